"""The home page and a session's page: connecting, saved servers, recordings, the lifecycle, deleting."""

from __future__ import annotations

import contextlib
import secrets
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import UploadedFile
from django.db import connections
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh, HttpResponseLocation

from sessions.models import McpSession, PendingReview
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.teams import access, policy
from sessions.teams.models import Role
from sessions.timeline.calls import recent_calls
from sessions.timeline.queries import TimelineFilter, frame_detail, page_of_rows
from sessions.timeline.recordings import MAX_BYTES, RecordingError, Upload, import_progress, open_upload
from sessions.web import llm, playground, tap_controls, together
from sessions.web.forms import ConnectForm, ImportForm, ServerForm
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.oauth import oauth_context, with_callback
from sessions.web.panels import PANELS, panel_context, visible
from sessions.web.shortcuts import (
    error_response,
    int_param,
    owned_session,
    person_scope,
    person_scope_async,
)

__all__ = [
    "connect",
    "connect_saved",
    "delete_ended_sessions",
    "delete_server",
    "delete_session",
    "disconnect",
    "edit_server",
    "home",
    "import_servers",
    "import_status",
    "open_recording",
    "reconnect",
    "reinitialize",
    "session_page",
    "warm_connect",
    "warm_saved",
]

HOME_PAGE = 50  # sessions a page of the home page lists, newest first


@require_GET
def home(request: AuthedRequest) -> HttpResponse:
    """List the person's sessions and saved servers, with the connect form."""
    return _home(request)


def _home(request: AuthedRequest, status: int = 200, **extra: Any) -> HttpResponse:
    """The home page: the person's sessions and saved servers, the connect form, and ``extra``."""
    scope = person_scope(request)
    sessions = scope.sessions().order_by("-created", "-pk")
    pages = max(1, -(-sessions.count() // HOME_PAGE))
    # A page past the last is a 400 that says how many there are, like any number out of range.
    number = int_param(request.GET, "page", minimum=1, maximum=pages) or 1
    context = {
        "sessions": sessions[(number - 1) * HOME_PAGE : number * HOME_PAGE],
        "page": {"number": number, "pages": pages, "older": number + 1, "newer": number - 1},
        "servers": scope.servers(),
        "catalog": policy.catalog_of(scope),
        "free_stdio": policy.free_stdio(scope),
        "can_operate": scope.allows(Role.OPERATOR),
        "warm_key": _warm_key(),
        "form": ConnectForm(),
        **extra,
    }
    if request.htmx and request.htmx.target == "home-sessions":
        return render(request, "sessions/_home_sessions.html", context, status=status)
    return render(request, "home.html", context, status=status)


@require_POST
def connect(request: AuthedRequest) -> HttpResponse:
    """Start a session from the connect form (and save the server when asked)."""
    scope = person_scope(request, Role.OPERATOR)
    form = ConnectForm(request.POST)
    if form.is_valid() and (problem := policy.connect_problem(scope, form.snapshot())):
        form.add_error(None, problem)
    if not form.is_valid():
        context = {"form": form, "servers": list(scope.servers()), "warm_key": _warm_key()}
        return render(request, "sessions/_connect_form.html", context, status=422)
    config = with_callback(request, policy.prepared(scope, form.snapshot()))
    session = McpSession.objects.create(
        team_id=scope.team_id,
        owner_id=request.user.pk,
        name=config["name"],
        config=config,
        roots=form.cleaned_data["roots"],
    )
    # The server starts before anything else is written: its start is most of what the person waits for.
    async_to_sync(client.start_session)(session, _intent(request))
    if form.cleaned_data.get("save"):
        session.server = form.save_server(scope, request.user)
        session.save(update_fields=["server"])
    async_to_sync(together.record)(session, request.user.pk, "connected")
    url = f"/s/{session.public_id}/"
    if request.htmx:
        # The session page in place of this one's body, without a new document: while the server
        # starts, the browser has less to do (docs/bench.md).
        return HttpResponseLocation(url, target="body")
    return redirect(url)


def _warm_key() -> str:
    """A page's key for its Connect buttons' intent, which their hint and their click both send; empty
    when warm starts are off (the buttons then send no hint)."""
    return secrets.token_urlsafe(9) if client.warm_starts() else ""


def _intent(request: AuthedRequest) -> str:
    return request.POST.get("intent", "")[:32]


@require_POST
def warm_connect(request: AuthedRequest) -> HttpResponse:
    """Start the connect form's stdio server now: the person's pointer is on Connect (engine/_warm.py).

    Always 204: a form that is not ready yet starts nothing, and Connect will say what is wrong with it.
    """
    scope = person_scope(request, Role.OPERATOR)
    form = ConnectForm(request.POST)
    if client.warm_starts() and form.is_valid() and not policy.connect_problem(scope, form.snapshot()):
        async_to_sync(client.warm_start)(policy.prepared(scope, form.snapshot()), _intent(request))
    return HttpResponse(status=204)


@require_POST
async def warm_saved(request: AuthedRequest, pk: int) -> HttpResponse:
    """Start a saved server now: the person's pointer is on its Connect button (always 204)."""
    scope = await person_scope_async(request, Role.OPERATOR)
    server = await scope.servers().filter(pk=pk).afirst()
    if server is None:
        raise Http404("No such server")
    if client.warm_starts() and not await sync_to_async(policy.connect_problem)(scope, server.snapshot()):
        config = await sync_to_async(policy.prepared)(scope, server.snapshot())
        await client.warm_start(config, _intent(request))
    return HttpResponse(status=204)


@require_POST
async def connect_saved(request: AuthedRequest, pk: int) -> HttpResponse:
    """Start a session from a saved server."""
    scope = await person_scope_async(request, Role.OPERATOR)
    user = await signed_in_user(request)
    server = await scope.servers().filter(pk=pk).afirst()
    if server is None:
        raise Http404("No such server")
    problem = await sync_to_async(policy.connect_problem)(scope, server.snapshot())
    if problem:
        return error_response(problem, 403)
    session = await McpSession.objects.acreate(
        team_id=scope.team_id,
        owner_id=user.pk,
        server=server,
        name=server.name,
        config=with_callback(request, await sync_to_async(policy.prepared)(scope, server.snapshot())),
    )
    await together.record(session, user.pk, "connected")
    await client.start_session(session, _intent(request))
    return redirect(f"/s/{session.public_id}/")


@require_POST
def import_servers(request: AuthedRequest) -> HttpResponse:
    """Save the servers of a pasted mcpServers document."""
    scope = person_scope(request, Role.OPERATOR)
    form = ImportForm(request.POST)
    if form.is_valid():
        form.save(scope, request.user)
        return redirect("home")
    return _home(request, status=422, import_form=form)


@require_http_methods(["GET", "POST"])
def edit_server(request: AuthedRequest, pk: int) -> HttpResponse:
    """A saved server's settings, to change (its secrets never shown: blank keeps, "remove" removes)."""
    scope = person_scope(request, Role.OPERATOR)
    server = scope.servers().filter(pk=pk).first()
    if server is None:
        raise Http404("No such server")
    if request.method == "GET":
        return render(request, "sessions/server_edit.html", {"form": ServerForm(server), "server": server})
    form = ServerForm(server, request.POST)
    if form.is_valid():
        config = form.config()
        if scope.servers().filter(name=config["name"]).exclude(pk=server.pk).exists():
            form.add_error("name", "another saved server of the team has this name")
        elif problem := policy.save_problem(scope, config):
            form.add_error(None, problem)
        else:
            form.store(config)
            return redirect("home")
    return render(request, "sessions/server_edit.html", {"form": form, "server": server}, status=422)


@require_POST
def delete_server(request: AuthedRequest, pk: int) -> HttpResponse:
    deleted, _ = person_scope(request, Role.OPERATOR).servers().filter(pk=pk).delete()
    if not deleted:
        raise Http404("No such server")
    return redirect("home")


@require_POST
async def open_recording(request: AuthedRequest) -> HttpResponse:
    """Open a JSON Lines recording (the web export or the CLI's --record) as a closed session.

    The file is copied and hashed, and a big one imported, on threads of their own: never the
    thread Django shares between synchronous views, so other pages carry on meanwhile.
    """
    scope = await person_scope_async(request, Role.OPERATOR)
    upload = request.FILES.get("recording")
    problem = "choose a .jsonl file to open" if upload is None else ""
    if upload is not None and upload.size is not None and upload.size > MAX_BYTES:
        problem = f"{upload.name} is larger than {MAX_BYTES >> 20} MiB"
    elif upload is not None:
        name = upload.name or "recording"
        try:
            session = await sync_to_async(_open_upload, thread_sensitive=False)(scope, name, upload)
        except RecordingError as exc:
            problem = f"cannot open {name}: {exc}"
        else:
            return redirect("session", public_id=session.public_id)
    return await sync_to_async(_home)(request, status=422, recording_error=problem)


def _open_upload(scope: access.Scope, name: str, upload: UploadedFile) -> McpSession:
    """Keep the upload and open it, on a worker thread of its own: its connection is closed after."""
    try:
        return open_upload(scope.team_id, scope.user_id, name, Upload.keep(upload))
    finally:
        connections.close_all()


@require_GET
async def import_status(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """How a recording's import stands (the session page polls it); the whole page again once done."""
    session = await owned_session(request, public_id)
    if session.status != McpSession.Status.IMPORTING and request.htmx:
        return HttpResponseClientRefresh()
    return await sync_to_async(render)(request, "sessions/_import_progress.html", _import_context(session))


def _import_context(session: McpSession) -> dict[str, Any]:
    return {"session": session, "progress": import_progress(session)}


@require_GET
async def session_page(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The session: lifecycle, feature panels, calls, reviews and the live timeline."""
    session = await owned_session(request, public_id)
    if session.status == McpSession.Status.IMPORTING:
        return await sync_to_async(render)(request, "sessions/importing.html", _import_context(session))
    asked = request.GET.get("tab")
    tab = asked or _first_tab(session)
    if tab not in PANELS or (session.is_tap and tab not in visible(session)):
        tab = "overview"
    wanted = int_param(request.GET, "frame")
    context = await sync_to_async(_session_context)(session, tab, request, wanted)
    # Still connecting: the page moves to Tools when the server turns out to have tools (panels.js).
    context["tools_when_ready"] = not asked and not session.is_tap and session.status in CONNECTING
    if session.is_tap:
        context["tap"] = tap_controls.tap_context(await tap_controls.live_state(session))
    context["waiting"] = len(context["reviews"]) + len(context.get("tap", {}).get("held", ()))
    return await sync_to_async(render)(request, "sessions/session.html", context)


# A session whose server has not answered yet: what it offers is not known.
CONNECTING = (McpSession.Status.STARTING, McpSession.Status.CONNECTING, McpSession.Status.INITIALIZING)


def _first_tab(session: McpSession) -> str:
    """The tab a session's page opens on when the person asked for none: Tools when a connected
    server has tools, else the overview."""
    ready = session.status == McpSession.Status.READY
    return "tools" if ready and session.offers_tools and not session.is_tap else "overview"


def _session_context(
    session: McpSession, tab: str, request: AuthedRequest, wanted: int | None
) -> dict[str, Any]:
    rows = page_of_rows(session, TimelineFilter())
    reviews = list(PendingReview.objects.filter(session=session, status=PendingReview.Status.WAITING))
    opened = frame_detail(session, wanted) if wanted is not None else None
    notes = together.frame_context(session, wanted, request.user.pk) if opened and wanted else {}
    return {
        **notes,
        "opened": opened,
        # The chat that made the opened frame's call, so the frame links back to it as when clicked.
        "chat_call": playground.call_of_frame(session, wanted) if opened and wanted else None,
        "session": session,
        "tab": tab,
        "panels": visible(session),
        # Rendered exactly as the tab switch renders it (panels.panel), so a reload shows the same.
        "panel_html": render_to_string(
            f"sessions/panels/{tab}.html", panel_context(session, tab, request), request
        ),
        "calls": recent_calls(session),
        "reviews": reviews,
        "draft_models": llm.offered_to(session, reviews),
        "rows": rows,
        "first_shown": rows[0]["seq"] if rows else 0,
        "last_shown": rows[-1]["seq"] if rows else 0,
        "filter": TimelineFilter(),
        "oauth": oauth_context(session, request.user.pk),
    }


@require_POST
async def disconnect(request: AuthedRequest, public_id: Any) -> HttpResponse:
    session = await owned_session(request, public_id)
    if session.is_live:
        user = await signed_in_user(request)
        await together.record(session, user.pk, "disconnected")
        with contextlib.suppress(client.CommandFailed):
            await client.call(session, m.Disconnect())
    return _back_to(request, session)


@require_POST
async def reconnect(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Start the same recorded session again; the timeline continues where it stopped."""
    session = await owned_session(request, public_id)
    if session.is_imported:
        return HttpResponseBadRequest("a session opened from a recording has no server to reconnect to")
    if session.is_tap:
        return HttpResponseBadRequest("a tap session belongs to its host: run the host again")
    if not session.is_live or not session.worker_channel:
        # The session's own team's rules, whichever team the person has chosen on the page.
        problem = await sync_to_async(policy.reconnect_problem)(session)
        if problem:
            return error_response(problem, 403)
        session.config = await sync_to_async(policy.reconnect_config)(session)
        session.status = McpSession.Status.STARTING
        await session.asave(update_fields=["status", "config"])
        user = await signed_in_user(request)
        await together.record(session, user.pk, "reconnected")
        await client.start_session(session)
    return _back_to(request, session)


@require_POST
async def reinitialize(request: AuthedRequest, public_id: Any) -> HttpResponse:
    session = await owned_session(request, public_id)
    try:
        await client.call(session, m.Reinitialize(), timeout=30)
    except client.CommandFailed as exc:
        return error_response(str(exc), 409)
    return _back_to(request, session)


def _back_to(request: AuthedRequest, session: McpSession) -> HttpResponse:
    """After a lifecycle action: htmx needs nothing (the live socket shows it); a plain form goes back."""
    if request.htmx:
        return HttpResponse(status=204)
    return redirect(f"/s/{session.public_id}/")


@require_POST
def delete_session(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Delete an ended session with its timeline; a live one must be disconnected first."""
    found = access.session_with_role(request.user.pk, public_id)
    if found is None:
        raise Http404("No such session")
    session, role = found
    if not Role.allows(role, Role.OPERATOR):
        raise PermissionDenied(f"Your role in this team is {role}; deleting a session needs operator.")
    if session.is_live:
        return HttpResponse("Disconnect the session before deleting it.", status=409)
    session.delete()
    return _home_again(request)


def _home_again(request: AuthedRequest) -> HttpResponse:
    return HttpResponseClientRedirect("/") if request.htmx else redirect("home")


@require_POST
def delete_ended_sessions(request: AuthedRequest) -> HttpResponse:
    """Clear the history: every ended session of the person (live ones stay), with their timelines."""
    person_scope(request, Role.OPERATOR).sessions().exclude(status__in=McpSession.LIVE).delete()
    return _home_again(request)
