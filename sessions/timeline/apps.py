"""MCP Apps, read back from the timeline: the tools with a view, a view's document, a call's exchange."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet

from sessions.engine import View, tool_view_uri, tool_visibility, view_checks, view_csp, view_of
from sessions.frames import message_of, pretty_json
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.listings import latest_result, stored_pages

__all__ = ["call_exchange", "offers_views", "recorded_view", "tool_views", "view_document"]

# How a frame is shown: as stored, or redacted (a share).
Shown = Callable[[TimelineFrame], TimelineFrame]


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
    if frame.method == "resources/read" and frame.direction == "in" and frame.rpc_kind == "result":
        view = view_document(session, frame.seq, frames, shown)
        return None if view is None else {"source": _source(view), "read_seq": frame.seq}
    if frame.method != "tools/call" or not frame.rpc_id:
        return None
    request = (
        frames.filter(direction="out", rpc_kind="request", method="tools/call", rpc_id=frame.rpc_id)
        .filter(seq__lte=frame.seq)
        .order_by("-seq")
        .first()
    )
    if request is None:
        return None
    params = _dict(message_of(shown(request).raw).get("params"))
    name = str(params.get("name") or "")
    uri = tool_view_uri(_tool_at(frames, name, request.seq, shown))
    if uri is None:
        return None
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
    return {"uri": uri, "tool": name, "call": call, "read_seq": read_seq, "rpc_id": request.rpc_id}


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
