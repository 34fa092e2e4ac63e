"""MCP Apps, read back from the timeline: the tools with a view, a view's document, a call's exchange."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet

from sessions.engine import (
    APP_MESSAGE_STATE,
    View,
    tool_view_uri,
    tool_visibility,
    view_checks,
    view_csp,
    view_of,
)
from sessions.frames import message_of, pretty_json
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.listings import latest_result, stored_pages

__all__ = ["call_exchange", "offers_views", "recorded_view", "tool_views", "view_document"]

# How a frame is shown: as stored, or redacted (a share).
Shown = Callable[[TimelineFrame], TimelineFrame]
# The requests a view may make through the host.
FORWARDED = ("tools/call", "resources/read")
# How far apart (in frames) a view's request, the request it caused and the host's answer may be: the
# host records what waits before it sends, and answers the view once the server has.
NEAR = 5000


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def tool_views(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools of a listing that have a view: name, title, description, the view's URI, visibility."""
    rows = []
    for page in pages:
        for tool in page.get("tools") or []:
            uri = tool_view_uri(tool)
            if uri is None:
                continue
            rows.append(
                {
                    "name": str(tool.get("name") or ""),
                    "title": tool.get("title") or _dict(tool.get("annotations")).get("title") or "",
                    "description": tool.get("description") or "",
                    "uri": uri,
                    "visibility": tool_visibility(tool),
                }
            )
    return rows


def offers_views(session: McpSession) -> bool:
    """Whether the newest tool listing has a tool with a view (the Apps tab shows only then)."""
    return not session.is_tap and any(
        tool_view_uri(t) for p in stored_pages(session) for t in p.get("tools") or []
    )


def _listed_ui(session: McpSession, uri: str) -> dict[str, Any]:
    """The ``_meta.ui`` of the newest resources/list entry for ``uri``, if it was listed."""
    for entry in _dict(latest_result(session, "resources/list")).get("resources") or []:
        if isinstance(entry, dict) and entry.get("uri") == uri:
            return _dict(_dict(entry.get("_meta")).get("ui"))
    return {}


def _as_stored(frame: TimelineFrame) -> TimelineFrame:
    return frame


def view_document(
    session: McpSession, seq: int, frames: QuerySet[TimelineFrame] | None = None, shown: Shown = _as_stored
) -> View | None:
    """The view a stored resources/read answer (frame ``seq``) carries, or None if it carries none.

    ``frames`` is where to look (a share's scope; the session's by default), ``shown`` how a frame is
    read out of it (a share redacts)."""
    frames = TimelineFrame.objects.filter(session=session) if frames is None else frames
    response = frames.filter(seq=seq, direction="in", rpc_kind="result", method="resources/read").first()
    if response is None:
        return None
    request = (
        frames.filter(direction="out", rpc_kind="request", rpc_id=response.rpc_id, seq__lt=seq)
        .order_by("-seq")
        .first()
    )
    uri = str(_dict(message_of(shown(request).raw).get("params")).get("uri") or "") if request else ""
    return view_of(message_of(shown(response).raw).get("result"), uri, _listed_ui(session, uri))


def _source(view: View) -> dict[str, Any]:
    """What "Source" shows of a view: its HTML (as text), ``_meta.ui``, the policy, what it gets wrong."""
    return {
        "uri": view.uri,
        "html": view.html,
        "mime_type": view.mime_type,
        "ui": pretty_json(json.dumps(view.ui).encode()) or "{}",
        "csp": view_csp(view.ui),
        "checks": view_checks(view),
    }


def _tool_at(frames: QuerySet[TimelineFrame], name: str, before: int, shown: Shown) -> dict[str, Any] | None:
    """Tool ``name`` as the newest tools/list answer before frame ``before`` lists it."""
    listings = frames.filter(direction="in", rpc_kind="result", method="tools/list", seq__lt=before)
    for listing in listings.order_by("-seq")[:20]:
        for tool in _dict(message_of(shown(listing).raw).get("result")).get("tools") or []:
            if isinstance(tool, dict) and tool.get("name") == name:
                return tool
    return None


def _read_of(frames: QuerySet[TimelineFrame], uri: str, shown: Shown) -> int | None:
    """The newest resources/read answer of ``uri`` among ``frames``."""
    reads = frames.filter(direction="out", rpc_kind="request", method="resources/read").order_by("-seq")
    for request in reads[:200]:
        if _dict(message_of(shown(request).raw).get("params")).get("uri") != uri:
            continue
        answer = (
            frames.filter(direction="in", rpc_kind="result", rpc_id=request.rpc_id, seq__gt=request.seq)
            .order_by("seq")
            .first()
        )
        if answer is not None:
            return answer.seq
    return None


def recorded_view(
    session: McpSession, frame: TimelineFrame, frames: QuerySet[TimelineFrame], shown: Shown = _as_stored
) -> dict[str, Any] | None:
    """What the frame detail shows of a view: for a resources/read answer carrying one, its source;
    for a tools/call of a tool with a view, the call and the recorded read to render it from."""
    if _app_message(frame):
        caused = _caused_by(frames, frame, shown)
        return {"caused": caused} if caused else None
    if frame.method == "resources/read" and frame.direction == "in" and frame.rpc_kind == "result":
        view = view_document(session, frame.seq, frames, shown)
        return None if view is None else {"source": _source(view), "read_seq": frame.seq}
    forwarded = frame.direction == "out" and frame.rpc_kind == "request" and frame.method in FORWARDED
    cause = _cause_of(frames, frame, shown) if forwarded else None
    if frame.method != "tools/call" or not frame.rpc_id:
        return {"cause": cause} if cause else None
    request = (
        frames.filter(direction="out", rpc_kind="request", method="tools/call", rpc_id=frame.rpc_id)
        .filter(seq__lte=frame.seq)
        .order_by("-seq")
        .first()
    )
    if request is None:
        return {"cause": cause} if cause else None
    params = _dict(message_of(shown(request).raw).get("params"))
    name = str(params.get("name") or "")
    uri = tool_view_uri(_tool_at(frames, name, request.seq, shown))
    if uri is None:
        return {"cause": cause} if cause else None
    read_seq = _read_of(frames, uri, shown)
    response = (
        frames.filter(
            direction="in", rpc_id=request.rpc_id, rpc_kind__in=("result", "error"), seq__gt=request.seq
        )
        .order_by("seq")
        .first()
    )
    call: dict[str, Any] = {"name": name, "arguments": _dict(params.get("arguments"))}
    if response is not None:
        message = message_of(shown(response).raw)
        call["result" if "result" in message else "error"] = _dict(
            message.get("result", message.get("error"))
        )
    return {
        "uri": uri,
        "tool": name,
        "call": call,
        "read_seq": read_seq,
        "rpc_id": request.rpc_id,
        "cause": cause,
    }


def _app_message(frame: TimelineFrame) -> dict[str, Any] | None:
    """The ``transport.app`` of a view↔host message frame, or None for any other frame."""
    transport = _dict(frame.transport)
    return _dict(transport.get("app")) if transport.get("state") == APP_MESSAGE_STATE else None


def _app_messages(frames: QuerySet[TimelineFrame]) -> QuerySet[TimelineFrame]:
    return frames.filter(kind="state", transport__state=APP_MESSAGE_STATE)


def _caused_by(frames: QuerySet[TimelineFrame], frame: TimelineFrame, shown: Shown) -> dict[str, Any] | None:
    """For a view's request, the request it made the host send the server (the host's answer to the
    view names it), and that answer."""
    app = _app_message(frame) or {}
    if app.get("direction") != "in" or app.get("what") not in ("tools/call", "resources/read"):
        return None
    message_id = message_of(shown(frame).raw).get("id")
    answers = [f"result #{str(message_id)[:40]}", f"error #{str(message_id)[:40]}"]
    answer = (
        _app_messages(frames)
        .filter(seq__gt=frame.seq, seq__lte=frame.seq + NEAR)
        .filter(transport__app__direction="out", transport__app__what__in=answers)
        .filter(transport__app__view=app.get("view"))
        .order_by("seq")
        .first()
    )
    caused = (_app_message(answer) or {}).get("caused") if answer is not None else None
    if caused is None:
        return {"answer_seq": answer.seq} if answer is not None else None
    request = (
        frames.filter(direction="out", rpc_kind="request", rpc_id=json.dumps(caused), seq__gt=frame.seq)
        .order_by("seq")
        .first()
    )
    return {
        "answer_seq": answer.seq if answer else None,
        "seq": request.seq if request else None,
        "rpc_id": caused,
    }


def _cause_of(frames: QuerySet[TimelineFrame], frame: TimelineFrame, shown: Shown) -> int | None:
    """For a request the host sent for a view, the seq of the view's message that asked for it."""
    try:
        rpc_id = json.loads(frame.rpc_id or "null")
    except ValueError:
        return None
    if rpc_id is None:
        return None
    answer = (
        _app_messages(frames)
        .filter(seq__gt=frame.seq, seq__lte=frame.seq + NEAR, transport__app__caused=rpc_id)
        .order_by("seq")
        .first()
    )
    if answer is None:
        return None
    message_id = message_of(shown(answer).raw).get("id")
    asked = (
        _app_messages(frames)
        .filter(seq__lt=frame.seq, seq__gte=frame.seq - NEAR)
        .filter(transport__app__direction="in", transport__app__what=frame.method)
        .order_by("-seq")
    )
    for candidate in asked[:50]:
        if message_of(shown(candidate).raw).get("id") == message_id:
            return candidate.seq
    return None


def call_exchange(session: McpSession, rpc_id: int) -> dict[str, Any] | None:
    """A tools/call's arguments and how it ended (``result`` or ``error``), as stored; None when the
    request is not stored, or has no answer yet."""
    key = json.dumps(rpc_id)
    request = (
        TimelineFrame.objects.filter(
            session=session, direction="out", rpc_kind="request", rpc_id=key, method="tools/call"
        )
        .order_by("-seq")
        .first()
    )
    if request is None:
        return None
    response = (
        TimelineFrame.objects.filter(
            session=session, direction="in", rpc_id=key, rpc_kind__in=("result", "error"), seq__gt=request.seq
        )
        .order_by("seq")
        .first()
    )
    if response is None:
        return None
    params = _dict(message_of(request.raw).get("params"))
    message = message_of(response.raw)
    exchange: dict[str, Any] = {"name": params.get("name"), "arguments": _dict(params.get("arguments"))}
    if "result" in message:
        exchange["result"] = _dict(message["result"])
    else:
        exchange["error"] = _dict(message.get("error"))
    return exchange
