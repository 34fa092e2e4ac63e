"""The Resources panel: resources and templates, reading them, subscriptions, and binary downloads.

GET panels render from stored frames; every button that reaches the server is a POST through the
session's owner.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest
from django.db.models import Q
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET, require_POST

from sessions.engine import LISTEN_ACKNOWLEDGED as ACKNOWLEDGED
from sessions.engine import SUBSCRIPTION_ID
from sessions.frames import message_of, params_of
from sessions.models import McpSession, TimelineFrame, wall_time
from sessions.web.completion import argument_fields, arguments
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import (
    call_card_html,
    capabilities,
    feature,
    latest,
    once_stored,
    owned_session,
    render_call,
    render_panel,
    socket_call,
    socket_form,
)
from sessions.web.uri_templates import expand_uri_template, template_variables

__all__ = [
    "marker_id",
    "panel_context",
    "read_template",
    "resource_blob",
    "subscribe",
    "template_from_socket",
]

RECENT_UPDATES = 20


def marker_id(uri: str) -> str:
    """Return the stable element id of the "updated" marker of a resource."""
    return "res-updated-" + hashlib.sha256(uri.encode()).hexdigest()[:16]


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
    params = params_of(frame.raw)
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
        uri = params_of(frame.raw).get("uri")
        if isinstance(uri, str):
            state[uri] = frame.method == "resources/subscribe"
    return [uri for uri, on in state.items() if on]


def recent_updates(session: McpSession, limit: int = RECENT_UPDATES) -> list[dict[str, Any]]:
    frames = TimelineFrame.objects.filter(
        session=session, method="notifications/resources/updated", direction="in"
    ).order_by("-seq")[:limit]
    return [
        {"uri": str(params_of(f.raw).get("uri", "")), "time": wall_time(f.wall), "seq": f.seq} for f in frames
    ]


def _last_update(session: McpSession, uri: str) -> datetime | None:
    frame = (
        TimelineFrame.objects.filter(
            session=session, method="notifications/resources/updated", direction="in", uri=uri
        )
        .order_by("-seq")
        .first()
    )
    return wall_time(frame.wall) if frame else None


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """What the resources panel shows (runs in a worker thread); ``fresh``: what a POST just learnt."""
    listing = latest(session, "resources/list", fresh)
    templates_listing = latest(session, "resources/templates/list", fresh)
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
        templates.append({**template, "form_id": f"tpl{i}", "variables": argument_fields(f"tpl{i}", names)})
    return {
        "caps": capabilities(session),
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


@require_POST
async def read_template(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Read the resource a URI template names once its variables are filled in."""
    session = await owned_session(request, public_id)
    return await render_call(request, session, "resources/read", _read_params(request.POST))


def _read_params(data: Any) -> dict[str, Any]:
    """The resources/read params a URI template's form asks for: the template with its variables filled in."""
    template = data.get("ref", "")
    if not template:
        raise BadRequest("ref (the URI template) is required")
    return {"uri": expand_uri_template(template, dict(arguments(data)))}


async def template_from_socket(user_id: int, public_id: Any, message: dict[str, Any]) -> str:
    """A URI template's form the session page sent over its live socket: ``read_template`` over it."""
    data = socket_form(message)

    async def send(session: McpSession) -> str:
        return await call_card_html(session, user_id, "resources/read", _read_params(data))

    return await socket_call(user_id, public_id, send)


@require_POST
async def subscribe(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Subscribe to a resource's updates, or unsubscribe; then show the panel again."""
    session = await owned_session(request, public_id)
    uri = request.POST.get("uri", "")
    action = request.POST.get("action", "subscribe")
    if action not in ("subscribe", "unsubscribe", "listen") or (not uri and action != "listen"):
        return HttpResponseBadRequest("action (subscribe, unsubscribe or listen) and a uri are required")
    if action == "listen" and session.mode != "stateless":
        return HttpResponseBadRequest("listening again belongs to the stateless revision")
    problem = await feature(request, session, action, uri)
    fresh = {} if problem or action == "listen" else {"subscription": (uri, action == "subscribe")}
    context = await sync_to_async(panel_context)(session, request, fresh)
    failed = f"{action} failed: {problem}" if problem else None
    return await render_panel(request, session, "resources", context, list_error=failed)


def _blob(session: McpSession, rpc_id: int, index: int) -> tuple[bytes, str] | None:
    """The bytes and name of a content of a stored resources/read response; None: no such response."""
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
        return None
    contents = (message_of(frame.raw).get("result") or {}).get("contents")
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
    session = await owned_session(request, public_id)
    blob = await once_stored(session, lambda: _blob(session, rpc_id, index))
    if blob is None:
        raise Http404("No such response")
    data, name = blob
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Content-Disposition"] = content_disposition_header(True, name) or "attachment"
    response["X-Content-Type-Options"] = "nosniff"
    return response
