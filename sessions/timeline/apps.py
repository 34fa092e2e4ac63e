"""MCP Apps, read back from the timeline: the tools with a view, a view's document, a call's exchange."""

from __future__ import annotations

import json
from typing import Any

from sessions.engine import View, tool_view_uri, tool_visibility, view_of
from sessions.frames import message_of
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.listings import latest_result, stored_pages

__all__ = ["call_exchange", "offers_views", "tool_views", "view_document"]


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


def view_document(session: McpSession, seq: int) -> View | None:
    """The view a stored resources/read answer (frame ``seq``) carries, or None if it carries none."""
    response = TimelineFrame.objects.filter(
        session=session, seq=seq, direction="in", rpc_kind="result", method="resources/read"
    ).first()
    if response is None:
        return None
    request = (
        TimelineFrame.objects.filter(
            session=session, direction="out", rpc_kind="request", rpc_id=response.rpc_id, seq__lt=seq
        )
        .order_by("-seq")
        .first()
    )
    uri = str(_dict(message_of(request.raw).get("params")).get("uri") or "") if request else ""
    return view_of(message_of(response.raw).get("result"), uri, _listed_ui(session, uri))


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
