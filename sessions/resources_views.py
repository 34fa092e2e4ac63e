"""Views of the resources, prompts and logging features of a session.

GET panels render from stored frames; every button that reaches the server is a POST through the
session's owner (``commands.request``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
from datetime import datetime
from typing import Any
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.db.models import Q
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from inspector.http import AuthedRequest
from sessions import commands
from sessions.calls import latest_result
from sessions.engine import LISTEN_ACKNOWLEDGED as ACKNOWLEDGED
from sessions.engine import SUBSCRIPTION_ID
from sessions.models import McpSession, TimelineFrame, wall_time

__all__ = [
    "LOG_LEVELS",
    "expand_uri_template",
    "level_rank",
    "marker_id",
    "panel_context",
    "template_variables",
]

# RFC 5424 severities, least severe first (the order logging/setLevel uses).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_LINES = 200
LOG_SCAN = 2000
RECENT_UPDATES = 20
ARG_PREFIX = "arg."
LISTS = {
    "resources": ("resources/list", "resources"),
    "templates": ("resources/templates/list", "resources"),
    "prompts": ("prompts/list", "prompts"),
}
_LIST_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


# --- RFC 6570 URI templates (levels 1-3; prefixes and explode of string values too) -------------

_EXPRESSION = re.compile(r"\{([^{}]*)\}")
# operator: (first, separator, named, if-empty, allow reserved)
_OPERATORS: dict[str, tuple[str, str, bool, str, bool]] = {
    "": ("", ",", False, "", False),
    "+": ("", ",", False, "", True),
    "#": ("#", ",", False, "", True),
    ".": (".", ".", False, "", False),
    "/": ("/", "/", False, "", False),
    ";": (";", ";", True, "", False),
    "?": ("?", "&", True, "=", False),
    "&": ("&", "&", True, "=", False),
}
_RESERVED = ":/?#[]@!$&'()*+,;="
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")


def _varspecs(expression: str) -> tuple[str, list[tuple[str, int | None]]]:
    operator = expression[0] if expression and expression[0] in "+#./;?&" else ""
    specs: list[tuple[str, int | None]] = []
    for spec in expression[len(operator) :].split(","):
        spec = spec.strip().rstrip("*")
        name, _, prefix = spec.partition(":")
        if name:
            specs.append((name, int(prefix) if prefix.isdigit() else None))
    return operator, specs


def template_variables(template: str) -> list[str]:
    """Return the variable names of a URI template, each once, in order."""
    names: list[str] = []
    for expression in _EXPRESSION.findall(template):
        for name, _ in _varspecs(expression)[1]:
            if name not in names:
                names.append(name)
    return names


def _encode(value: str, allow_reserved: bool) -> str:
    if not allow_reserved:
        return quote(value, safe="")
    # Reserved characters and existing %XX triplets pass; a lone % is encoded.
    parts, last = [], 0
    for match in _PCT.finditer(value):
        parts.append(quote(value[last : match.start()], safe=_RESERVED))
        parts.append(match.group())
        last = match.end()
    parts.append(quote(value[last:], safe=_RESERVED))
    return "".join(parts)


def expand_uri_template(template: str, values: dict[str, str | None]) -> str:
    """Expand an RFC 6570 template with string values; missing or None values are undefined."""

    def expand(match: re.Match[str]) -> str:
        operator, specs = _varspecs(match.group(1))
        first, separator, named, if_empty, allow_reserved = _OPERATORS[operator]
        pieces = []
        for name, prefix in specs:
            value = values.get(name)
            if value is None:
                continue
            value = str(value)[:prefix] if prefix is not None else str(value)
            encoded = _encode(value, allow_reserved)
            if named:
                pieces.append(f"{name}={encoded}" if encoded else f"{name}{if_empty}")
            else:
                pieces.append(encoded)
        return first + separator.join(pieces) if pieces else ""

    return _EXPRESSION.sub(expand, template)


# --- helpers shared with the live fragments ------------------------------------------------------


def marker_id(uri: str) -> str:
    """Return the stable element id of the "updated" marker of a resource."""
    return "res-updated-" + hashlib.sha256(uri.encode()).hexdigest()[:16]


def level_rank(level: Any) -> int:
    """Return a log level's place among the RFC 5424 levels (unknown levels count as debug)."""
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 0


def _message(frame: TimelineFrame) -> dict[str, Any]:
    try:
        message = json.loads(bytes(frame.raw))
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _params(frame: TimelineFrame) -> dict[str, Any]:
    params = _message(frame).get("params")
    return params if isinstance(params, dict) else {}


def log_line(params: dict[str, Any], wall: float, seq: int) -> dict[str, Any]:
    """Return what a log line shows, from the params of a notifications/message."""
    level = params.get("level")
    data = params.get("data")
    return {
        "seq": seq,
        "time": wall_time(wall),
        "level": level if isinstance(level, str) else "?",
        "rank": level_rank(level),
        "logger": params.get("logger") if isinstance(params.get("logger"), str) else "",
        "text": data if isinstance(data, str) else None,
        "data": data,
    }


# --- panels --------------------------------------------------------------------------------------


def _capabilities(session: McpSession) -> dict[str, Any]:
    caps = session.server_capabilities if isinstance(session.server_capabilities, dict) else {}
    resources = caps.get("resources")
    if not isinstance(resources, dict):
        resources = {}
    return {
        "resources": "resources" in caps,
        "subscribe": bool(resources.get("subscribe")),
        "prompts": "prompts" in caps,
        "completions": "completions" in caps,
        "logging": "logging" in caps,
    }


def _since_initialize(session: McpSession) -> int:
    """Return the seq of the newest initialize request: server-side state starts over there."""
    frame = (
        TimelineFrame.objects.filter(session=session, method="initialize", direction="out")
        .order_by("-seq")
        .only("seq")
        .first()
    )
    return frame.seq if frame else 0


LISTEN_ENDS = ("connecting", "listen-ended", "listen-failed", "closed")


def listen_state(session: McpSession) -> dict[str, Any] | None:
    """Stateless sessions: the newest listen stream, if one is open (``None`` otherwise), and why.

    The newest acknowledgement wins unless the stream ended, failed, or a new connection began since.
    """
    frame = (
        TimelineFrame.objects.filter(
            Q(method=ACKNOWLEDGED, direction="in") | Q(kind="state", transport__state__in=LISTEN_ENDS)
        )
        .filter(session=session)
        .order_by("-seq")
        .first()
    )
    if frame is None:
        return None
    if frame.method != ACKNOWLEDGED:
        ended = frame.transport.get("state") in ("listen-ended", "listen-failed")
        return {"open": False, "note": frame.note if ended else "", "seq": frame.seq}
    params = _params(frame)
    honored = params.get("notifications")
    listed = honored.get("resourceSubscriptions") if isinstance(honored, dict) else None
    uris = [u for u in listed if isinstance(u, str)] if isinstance(listed, list) else []
    meta = params.get("_meta")
    return {
        "open": True,
        "id": meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None,
        "note": frame.note.split(" acknowledged: ", 1)[-1],
        "seq": frame.seq,
        "uris": uris,
    }


def subscriptions(session: McpSession) -> list[str]:
    """Return the URIs subscribed in the current connection (the latest answered (un)subscribe wins).

    In the stateless revision they are the URIs the open subscriptions/listen stream acknowledged.
    """
    if session.mode == "stateless":
        listening = listen_state(session)
        return list(listening["uris"]) if listening and listening["open"] else []
    answered = TimelineFrame.objects.filter(
        session=session,
        method__in=("resources/subscribe", "resources/unsubscribe"),
        direction="in",
        rpc_kind="result",
        seq__gt=_since_initialize(session),
    ).values_list("pair_seq", flat=True)
    requests = TimelineFrame.objects.filter(session=session, seq__in=list(answered)).order_by("seq")
    state: dict[str, bool] = {}
    for frame in requests:
        uri = _params(frame).get("uri")
        if isinstance(uri, str):
            state[uri] = frame.method == "resources/subscribe"
    return [uri for uri, on in state.items() if on]


def recent_updates(session: McpSession, limit: int = RECENT_UPDATES) -> list[dict[str, Any]]:
    frames = TimelineFrame.objects.filter(
        session=session, method="notifications/resources/updated", direction="in"
    ).order_by("-seq")[:limit]
    return [{"uri": str(_params(f).get("uri", "")), "time": wall_time(f.wall), "seq": f.seq} for f in frames]


def _last_update(session: McpSession, uri: str) -> datetime | None:
    frame = (
        TimelineFrame.objects.filter(
            session=session,
            method="notifications/resources/updated",
            direction="in",
            preview__contains=json.dumps(uri)[1:-1],
        )
        .order_by("-seq")
        .first()
    )
    return wall_time(frame.wall) if frame and _params(frame).get("uri") == uri else None


def _arguments_form(prefix: str, names: list[tuple[str, str, bool]]) -> list[dict[str, Any]]:
    return [
        {"name": name, "description": description, "required": required, "id": f"{prefix}-a{j}"}
        for j, (name, description, required) in enumerate(names)
    ]


def _resources_context(session: McpSession, fresh: dict[str, Any]) -> dict[str, Any]:
    listing = _latest(session, "resources/list", fresh)
    templates_listing = _latest(session, "resources/templates/list", fresh)
    subscribed = subscriptions(session)
    if "subscription" in fresh:
        uri, on = fresh["subscription"]
        subscribed = [u for u in subscribed if u != uri] + ([uri] if on else [])
    resources = [r for r in (listing or {}).get("resources") or [] if isinstance(r, dict)]
    templates = []
    for i, template in enumerate((templates_listing or {}).get("resourceTemplates") or []):
        if not isinstance(template, dict) or not isinstance(template.get("uriTemplate"), str):
            continue
        names = [(n, "", False) for n in template_variables(template["uriTemplate"])]
        templates.append({**template, "form_id": f"tpl{i}", "variables": _arguments_form(f"tpl{i}", names)})
    return {
        "resources": resources,
        "resources_listed": listing is not None,
        "resources_next": (listing or {}).get("nextCursor"),
        "templates": templates,
        "templates_listed": templates_listing is not None,
        "templates_next": (templates_listing or {}).get("nextCursor"),
        "subscribed": subscribed,
        "subscriptions": [
            {"uri": uri, "marker": marker_id(uri), "updated": _last_update(session, uri)}
            for uri in subscribed
        ],
        "updates": recent_updates(session),
        "listen": listen_state(session) if session.mode == "stateless" else None,
    }


def _prompts_context(session: McpSession, fresh: dict[str, Any]) -> dict[str, Any]:
    listing = _latest(session, "prompts/list", fresh)
    prompts = []
    for i, prompt in enumerate((listing or {}).get("prompts") or []):
        if not isinstance(prompt, dict) or not isinstance(prompt.get("name"), str):
            continue
        arguments = [a for a in prompt.get("arguments") or [] if isinstance(a, dict) and a.get("name")]
        names = [
            (str(a["name"]), str(a.get("description") or ""), bool(a.get("required"))) for a in arguments
        ]
        prompts.append({**prompt, "form_id": f"prompt{i}", "fields": _arguments_form(f"prompt{i}", names)})
    return {
        "prompts": prompts,
        "prompts_listed": listing is not None,
        "prompts_next": (listing or {}).get("nextCursor"),
    }


def log_lines(session: McpSession, min_level: str, limit: int = LOG_LINES) -> list[dict[str, Any]]:
    """Return the newest log notifications at or above ``min_level``, oldest first."""
    floor = level_rank(min_level)
    frames = TimelineFrame.objects.filter(
        session=session, method="notifications/message", direction="in"
    ).order_by("-seq")[:LOG_SCAN]
    lines: list[dict[str, Any]] = []
    for frame in frames:
        line = log_line(_params(frame), frame.wall, frame.seq)
        if line["rank"] >= floor:
            lines.append(line)
            if len(lines) >= limit:
                break
    return lines[::-1]


def _logging_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    min_level = request.GET.get("min_level", "debug")
    if min_level not in LOG_LEVELS:
        min_level = "debug"
    answered = (
        TimelineFrame.objects.filter(
            session=session, method="logging/setLevel", direction="in", rpc_kind="result"
        )
        .order_by("-seq")
        .values_list("pair_seq", flat=True)
        .first()
    )
    sent = TimelineFrame.objects.filter(session=session, seq=answered).first() if answered else None
    return {
        "levels": LOG_LEVELS,
        "min_level": min_level,
        "min_rank": level_rank(min_level),
        "server_level": fresh.get("level") or (_params(sent).get("level") if sent else None),
        "log_lines": log_lines(session, min_level),
        "log_limit": LOG_LINES,
    }


def panel_context(session: McpSession, tab: str, request: AuthedRequest) -> dict[str, Any]:
    """Return what the resources, prompts and logging panels show (runs in a worker thread)."""
    return _panel(session, tab, request, {})


def _panel(session: McpSession, tab: str, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    # ``fresh`` holds what a POST just learnt (a listing, a subscription, a level): the owner
    # answers before the recorder has stored the response frame, so the timeline may lag by one.
    context: dict[str, Any] = {"caps": _capabilities(session)}
    if tab == "resources":
        context.update(_resources_context(session, fresh))
    elif tab == "prompts":
        context.update(_prompts_context(session, fresh))
    elif tab == "logging":
        context.update(_logging_context(session, request, fresh))
    return context


def _latest(session: McpSession, method: str, fresh: dict[str, Any]) -> dict[str, Any] | None:
    result = fresh.get(method)
    return result if isinstance(result, dict) else latest_result(session, method)


# --- views ---------------------------------------------------------------------------------------


async def _render_panel(
    request: AuthedRequest, session: McpSession, tab: str, fresh: dict[str, Any], **extra: Any
) -> HttpResponse:
    context = {"session": session, "tab": tab, **extra}
    context.update(await sync_to_async(_panel)(session, tab, request, fresh))
    return await sync_to_async(render)(request, f"sessions/panels/{tab}.html", context)


async def _ask(session: McpSession, method: str, params: dict[str, Any] | None) -> tuple[str | None, Any]:
    """Send a request and wait for it; return why it failed (or None) and its result."""
    try:
        answer = await commands.request(session, method, params, wait=10.0)
    except commands.CommandFailed as exc:
        return str(exc), None
    if answer.get("event") != "done":
        return f"{method} is still running; its answer will show in the timeline", None
    error = answer.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return f"{method} failed: {message}", None
    return None, answer.get("result")


async def _feature(session: McpSession, action: str, value: str = "") -> str | None:
    """Do a revision-aware panel action through the owner (see SessionOwner.cmd_feature); why it failed."""
    try:
        await commands.call(session, "feature", timeout=30.0, action=action, value=value)
    except commands.CommandFailed as exc:
        return str(exc)
    return None


def _arguments(request: AuthedRequest) -> dict[str, str]:
    return {
        key[len(ARG_PREFIX) :]: str(value)
        for key, value in request.POST.items()
        if key.startswith(ARG_PREFIX) and value != ""
    }


@require_POST
async def list_items(request: AuthedRequest, public_id: Any, kind: str) -> HttpResponse:
    """List resources, templates or prompts (a page at a time: the cursor asks for the next one)."""
    from sessions.views import owned_session

    session = await owned_session(request, public_id)
    if kind not in LISTS:
        raise Http404("No such list")
    method, tab = LISTS[kind]
    cursor = request.POST.get("cursor", "")
    problem, result = await _ask(session, method, {"cursor": cursor} if cursor else None)
    fresh = {method: result} if isinstance(result, dict) else {}
    return await _render_panel(
        request, session, tab, fresh, list_error=problem, page_kind=kind if cursor else ""
    )


@require_POST
async def read_template(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Read the resource a URI template names once its variables are filled in."""
    from sessions.views import owned_session, render_call

    session = await owned_session(request, public_id)
    template = request.POST.get("ref", "")
    if not template:
        return HttpResponseBadRequest("ref (the URI template) is required")
    uri = expand_uri_template(template, dict(_arguments(request)))
    return await render_call(request, session, "resources/read", {"uri": uri})


@require_POST
async def get_prompt(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Get a prompt with the arguments the person filled in (empty ones are left out)."""
    from sessions.views import owned_session, render_call

    session = await owned_session(request, public_id)
    name = request.POST.get("ref", "")
    if not name:
        return HttpResponseBadRequest("ref (the prompt's name) is required")
    return await render_call(
        request, session, "prompts/get", {"name": name, "arguments": _arguments(request)}
    )


@require_POST
async def complete(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Ask the server for completions of the argument being typed; answer with its datalist."""
    from sessions.views import owned_session

    session = await owned_session(request, public_id)
    ref_type = request.POST.get("ref_type", "")
    ref = request.POST.get("ref", "")
    trigger_name = request.htmx.trigger_name or request.POST.get("complete", "")
    list_id = f"{request.htmx.trigger or request.POST.get('input', '')}-options"
    if ref_type not in ("ref/prompt", "ref/resource") or not ref or not trigger_name.startswith(ARG_PREFIX):
        return HttpResponseBadRequest("ref_type, ref and the argument being completed are required")
    if not _LIST_ID.match(list_id):
        return HttpResponseBadRequest("bad input id")
    name = trigger_name[len(ARG_PREFIX) :]
    arguments = _arguments(request)
    params: dict[str, Any] = {
        "ref": {"type": ref_type, ("name" if ref_type == "ref/prompt" else "uri"): ref},
        "argument": {"name": name, "value": request.POST.get(trigger_name, "")},
    }
    others = {k: v for k, v in arguments.items() if k != name}
    if others:
        params["context"] = {"arguments": others}
    values: list[str] = []
    try:
        answer = await commands.request(session, "completion/complete", params, wait=5.0)
    except commands.CommandFailed:
        answer = {}
    completion = (answer.get("result") or {}).get("completion") if answer.get("event") == "done" else None
    if isinstance(completion, dict):
        values = [str(v) for v in completion.get("values") or [] if isinstance(v, str | int | float)][:100]
    context = {"list_id": list_id, "values": values}
    return HttpResponse(render_to_string("sessions/resources/_datalist.html", context))


@require_POST
async def subscribe(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Subscribe to a resource's updates, or unsubscribe; then show the panel again."""
    from sessions.views import owned_session

    session = await owned_session(request, public_id)
    uri = request.POST.get("uri", "")
    action = request.POST.get("action", "subscribe")
    if action not in ("subscribe", "unsubscribe", "listen") or (not uri and action != "listen"):
        return HttpResponseBadRequest("action (subscribe, unsubscribe or listen) and a uri are required")
    if action == "listen" and session.mode != "stateless":
        return HttpResponseBadRequest("listening again belongs to the stateless revision")
    problem = await _feature(session, action, uri)
    fresh = {} if problem or action == "listen" else {"subscription": (uri, action == "subscribe")}
    failed = f"{action} failed: {problem}" if problem else None
    return await _render_panel(request, session, "resources", fresh, list_error=failed)


@require_POST
async def set_level(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Ask the server to send log messages at this level and above."""
    from sessions.views import owned_session

    session = await owned_session(request, public_id)
    level = request.POST.get("level", "")
    if level not in LOG_LEVELS:
        return HttpResponseBadRequest("level must be an RFC 5424 level")
    problem = await _feature(session, "set_level", level)
    fresh = {} if problem else {"level": level}
    failed = f"setting the level failed: {problem}" if problem else None
    return await _render_panel(request, session, "logging", fresh, list_error=failed)


@require_POST
async def ping(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Ping the server and show the round trip."""
    from sessions.views import owned_session

    session = await owned_session(request, public_id)
    started = time.monotonic()
    problem = await _feature(session, "ping")
    answer = {"event": "done", **({"error": {"message": problem}} if problem else {})}
    # Measured here: through the owner and back, so a little more than the wire's round trip.
    context = {"answer": answer, "latency_ms": (time.monotonic() - started) * 1000}
    return HttpResponse(render_to_string("sessions/resources/_pong.html", context))


def _blob(session: McpSession, rpc_id: int, index: int) -> tuple[bytes, str]:
    frame = (
        TimelineFrame.objects.filter(
            session=session,
            rpc_id=json.dumps(rpc_id),
            direction="in",
            rpc_kind="result",
            method="resources/read",
        )
        .order_by("-seq")
        .first()
    )
    if frame is None:
        raise Http404("No such response")
    contents = (_message(frame).get("result") or {}).get("contents")
    if (
        not isinstance(contents, list)
        or not 0 <= index < len(contents)
        or not isinstance(contents[index], dict)
    ):
        raise Http404("No such content")
    item = contents[index]
    try:
        data = base64.b64decode(str(item.get("blob") or ""), validate=False)
    except (binascii.Error, ValueError):
        raise Http404("The content is not base64") from None
    name = str(item.get("uri") or "").rstrip("/").rsplit("/", 1)[-1] or "resource"
    return data, name


@require_GET
async def resource_blob(request: AuthedRequest, public_id: Any, rpc_id: int, index: int) -> HttpResponse:
    """Download a binary resource content from a stored resources/read response (never sent inline)."""
    from sessions.views import owned_session

    session = await owned_session(request, public_id)
    data, name = await sync_to_async(_blob)(session, rpc_id, index)
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, name) or "attachment"
    response["X-Content-Type-Options"] = "nosniff"
    return response
