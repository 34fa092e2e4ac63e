"""The OAuth debugger's pages: start one for a server, then walk its flow a step at a time.

A debugger is a session of its own (``config["oauth_debug"]``), run by an owner like any session
(``sessions/runtime/oauth_debug.py``): so its HTTP goes through the engine's client for the target,
under the same egress rules, its authorization step waits for the same callback, and its
exchanges are a timeline that can be exported and shared like any other. This page reads that
timeline step by step (each step's frames are numbered in the session's phases).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django import forms
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions.models import McpSession, TimelineFrame
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.oauth_debug import DEBUG_STEPS, busy, progress
from sessions.servers import DEFAULT_PROTOCOL_VERSION
from sessions.teams import access, policy
from sessions.teams.models import Role
from sessions.web import together
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.oauth import WAIT_MINUTES, waiting_authorizations, with_callback
from sessions.web.shortcuts import error_response, owned_session, person_scope_async, session_for

__all__ = ["debug_start", "debug_step", "debugger"]

SPEC = "https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization"
# What the protocol asks of each step, in a sentence or two, and where it says so.
STEP_INFO: dict[str, dict[str, str]] = {
    "discovery": {
        "title": "Discovery",
        "requires": "A request without a token is answered 401 with a WWW-Authenticate challenge; its "
        "resource_metadata parameter names the server's protected resource metadata (RFC 9728 §5.1).",
        "link": f"{SPEC}#protected-resource-metadata-discovery-requirements",
    },
    "resource-metadata": {
        "title": "Protected resource metadata",
        "requires": "The server MUST publish RFC 9728 metadata whose resource is this server and whose "
        "authorization_servers names at least one authorization server.",
        "link": f"{SPEC}#authorization-server-location",
    },
    "authorization-server": {
        "title": "Authorization server metadata",
        "requires": "The client reads RFC 8414 (or OpenID Connect) metadata at the locations the spec "
        "lists, in order; the issuer must match, and PKCE S256 MUST be advertised.",
        "link": f"{SPEC}#authorization-server-metadata-discovery",
    },
    "client": {
        "title": "Registration",
        "requires": "The client's identity, in order of preference: pre-registered credentials, a Client "
        "ID Metadata Document, or Dynamic Client Registration (RFC 7591).",
        "link": f"{SPEC}#client-registration-approaches",
    },
    "authorization": {
        "title": "Authorization",
        "requires": "Authorization code with PKCE (S256), a state and the resource indicator (RFC 8707); "
        "you approve at the authorization server, which sends you back to the inspector's callback.",
        "link": f"{SPEC}#authorization-code-protection",
    },
    "token": {
        "title": "Token",
        "requires": "The code is exchanged at the token endpoint with the PKCE verifier and the same "
        "resource; the token should be issued for this server (its audience).",
        "link": f"{SPEC}#token-audience-binding-and-validation",
    },
    "request": {
        "title": "First authenticated request",
        "requires": "Every request carries the token in the Authorization header (Bearer); the server "
        "MUST accept only tokens issued for it.",
        "link": f"{SPEC}#access-token-usage",
    },
}
FRAMES_SHOWN = 40  # of one step
_ID = re.compile(r"[0-9]{1,18}")
STARTING = (McpSession.Status.STARTING, McpSession.Status.CONNECTING)


class DebugForm(forms.Form):
    """A server to debug, typed in (a saved server or a session is picked by its id instead)."""

    url = forms.URLField(max_length=2000, label="Server URL", assume_scheme="https")
    client_id = forms.CharField(max_length=1000, required=False, label="Client ID")
    client_secret = forms.CharField(
        max_length=4000,
        required=False,
        label="Client secret",
        widget=forms.PasswordInput(render_value=True, attrs={"autocomplete": "off"}),
    )
    client_metadata_url = forms.CharField(max_length=2000, required=False, label="Client metadata URL")
    scope = forms.CharField(max_length=1000, required=False, label="Scopes")

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        if not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("an http:// or https:// URL")
        return url

    def config(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["url"][:200],
            "transport": "http",
            "url": data["url"],
            "headers": {},
            "bearer_token": "",
            "verify_tls": True,
            "protocol_version": DEFAULT_PROTOCOL_VERSION,
            "oauth": {
                "client_id": data["client_id"].strip(),
                "client_secret": data["client_secret"],
                "client_metadata_url": data["client_metadata_url"].strip(),
                "scope": " ".join(data["scope"].split()),
            },
        }


def _session_of(request: AuthedRequest, scope: access.Scope, value: str) -> McpSession | None:
    """A session of the person's current team by its public id (anything else: None)."""
    try:
        public_id = uuid.UUID(value)
    except ValueError:
        return None
    found = access.session_with_role(request.user.pk, public_id)
    return found[0] if found is not None and found[0].team_id == scope.team_id else None


def _source(request: AuthedRequest, scope: access.Scope, data: Any) -> dict[str, Any] | None:
    """The config of the saved server or session the person picked (within their team), if any."""
    server_id, session_id = data.get("server", ""), data.get("session", "")
    if server_id:
        server = scope.servers().filter(pk=int(server_id)).first() if _ID.fullmatch(server_id) else None
        if server is None:
            raise Http404("No such server")
        return server.snapshot()
    if session_id:
        session = _session_of(request, scope, session_id)
        if session is None:
            raise Http404("No such session")
        return dict(session.config)
    return None


def _picked(request: AuthedRequest, scope: access.Scope) -> McpSession | None:
    session_id = request.GET.get("session", "")
    return _session_of(request, scope, session_id) if session_id else None


@require_http_methods(["GET", "POST"])
async def debug_start(request: AuthedRequest) -> HttpResponse:
    """The debugger's start: pick a saved server, this session's server, or type one in."""
    needed = Role.OPERATOR if request.method == "POST" else Role.VIEWER
    scope = await person_scope_async(request, needed)
    user = await signed_in_user(request)
    form = DebugForm(request.POST or None)
    if request.method == "POST":
        config = await sync_to_async(_debug_config)(request, scope, form)
        if isinstance(config, HttpResponse):
            return config
        if config is not None:
            session = await McpSession.objects.acreate(
                team_id=scope.team_id,
                owner_id=user.pk,
                name=f"OAuth debugger: {config.get('name') or config['url']}"[:200],
                config=config,
            )
            await together.record(session, user.pk, "connected")
            await client.start_session(session)
            return redirect("oauth_debugger", public_id=session.public_id)
    return await sync_to_async(_start_page)(request, scope, form)


def _debug_config(
    request: AuthedRequest, scope: access.Scope, form: DebugForm
) -> dict[str, Any] | HttpResponse | None:
    """The debugger session's config from what was picked or typed; a refusal; None: the form's errors."""
    config = _source(request, scope, request.POST)
    if config is None and form.is_valid():
        config = form.config()
    if config is None:
        return None
    if config.get("transport", "stdio") == "stdio" or not config.get("url"):
        return error_response("The OAuth debugger needs an HTTP server.", 400)
    oauth = {**dict(config.get("oauth") or {}), "enabled": True}
    config = {**config, "oauth": oauth, "oauth_debug": True}
    config.pop("imported_from", None)
    problem = policy.connect_problem(scope, config)
    if problem:
        return error_response(problem, 403)
    return with_callback(request, policy.prepared(scope, config))


def _start_page(request: AuthedRequest, scope: access.Scope, form: DebugForm) -> HttpResponse:
    servers = [s for s in scope.servers() if s.transport != "stdio"]
    context = {"form": form, "servers": servers, "picked": _picked(request, scope)}
    return render(request, "sessions/oauth/debug_start.html", context, status=422 if form.errors else 200)


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _frame(row: TimelineFrame) -> dict[str, Any]:
    transport = row.transport if isinstance(row.transport, dict) else {}
    http, facts = transport.get("http"), transport.get("oauth")
    return {
        "oauth": facts if isinstance(facts, dict) else {},
        "seq": row.seq,
        "kind": row.kind,
        "direction": row.direction,
        "method": row.method,
        "http": http if isinstance(http, dict) else None,
        "body": _pretty(row.text[:20000]),
        "note": row.note,
        "verdicts": row.verdicts,
        "worst": row.worst,
    }


def steps_context(session: McpSession) -> dict[str, Any]:
    """Every step: what the spec requires, how it went, its exchanges and verdicts."""
    recorded = session.phases if isinstance(session.phases, list) else []
    phases = progress(recorded)
    steps: list[dict[str, Any]] = []
    running = busy(recorded)
    for name in DEBUG_STEPS:
        phase = phases.get(name)
        frames: list[dict[str, Any]] = []
        if phase is not None:
            rows = TimelineFrame.objects.filter(
                session=session, seq__gte=int(phase.get("first") or 0), seq__lte=int(phase.get("last") or 0)
            )[:FRAMES_SHOWN]
            frames = [_frame(r) for r in rows]
            running = running or phase.get("outcome") == "running"
        verdicts = [v for f in frames for v in (f["verdicts"] or [])]
        steps.append(
            {"name": name, **STEP_INFO[name], "phase": phase, "frames": frames, "verdicts": verdicts}
        )
    failed = any((s["phase"] or {}).get("outcome") == "failed" for s in steps)
    upcoming = next((s["name"] for s in steps if s["phase"] is None), None)
    authorizations = waiting_authorizations(session)
    return {
        "session": session,
        "steps": steps,
        # Starting: the worker has not made the debugger yet; the page follows until it has.
        "running": running or bool(authorizations) or session.status in STARTING,
        "next_step": upcoming if not failed and session.status == McpSession.Status.READY else None,
        "authorizations": authorizations,
        "wait_minutes": WAIT_MINUTES,
    }


@require_GET
def debugger(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The debugger: its steps so far (the steps alone for htmx, which polls while one runs)."""
    session = _debug_session(request, public_id, Role.VIEWER)
    context = steps_context(session)
    if request.htmx:
        return render(request, "sessions/oauth/_debug_steps.html", context)
    return render(request, "sessions/oauth/debugger.html", context)


def _debug_session(request: AuthedRequest, public_id: Any, needed: str) -> McpSession:
    session = session_for(request.user.pk, public_id, needed)
    if not session.config.get("oauth_debug"):
        raise Http404("No such OAuth debugger")
    return session


@require_POST
async def debug_step(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Run the next step ("Run all": every step left); the page follows them as they run."""
    session = await owned_session(request, public_id)
    if not session.config.get("oauth_debug"):
        raise Http404("No such OAuth debugger")
    run_all = request.POST.get("all") == "1"
    try:
        await client.call(session, m.OAuthStep(run_all=run_all, user_id=request.user.pk))
    except client.CommandFailed as exc:
        return error_response(str(exc), 409)
    if request.htmx:
        context = await sync_to_async(steps_context)(await McpSession.objects.aget(pk=session.pk))
        return await sync_to_async(render)(request, "sessions/oauth/_debug_steps.html", context)
    return redirect("oauth_debugger", public_id=session.public_id)
