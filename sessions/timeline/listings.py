"""What a server listed, read back from the timeline: a method's newest result, a tool listing's pages."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from django.db.models import Max

from sessions.frames import message_of
from sessions.models import McpSession, TimelineFrame

__all__ = ["MAX_PAGES", "find_tool", "latest_result", "stored_pages"]

MAX_PAGES = 50


def latest_result(session: McpSession, method: str) -> dict[str, Any] | None:
    """Return the result of the newest successful response to ``method`` (e.g. the last tools/list)."""
    frame = (
        TimelineFrame.objects.filter(session=session, method=method, direction="in", rpc_kind="result")
        .order_by("-seq")
        .first()
    )
    result = message_of(frame.raw).get("result") if frame is not None else None
    return result if isinstance(result, dict) else None


def stored_pages(session: McpSession) -> list[dict[str, Any]]:
    """Return the pages of the newest listing: the newest tools/list result and the pages it continued."""
    frames = list(
        TimelineFrame.objects.filter(
            session=session, method="tools/list", rpc_kind__in=("request", "result")
        ).order_by("-seq")[: MAX_PAGES * 4]
    )
    cursors: dict[str, Any] = {}
    results: list[dict[str, Any]] = []
    for frame in frames:
        message = message_of(frame.raw)
        if frame.direction == "out":
            cursors[frame.rpc_id] = (message.get("params") or {}).get("cursor")
        elif isinstance(message.get("result"), dict):
            results.append({"rpc_id": frame.rpc_id, "result": message["result"]})
    pages: list[dict[str, Any]] = []
    for entry in results:
        cursor = cursors.get(entry["rpc_id"])
        if not pages:
            pages.append({"result": entry["result"], "cursor": cursor})
        elif entry["result"].get("nextCursor") == pages[0]["cursor"] and pages[0]["cursor"] is not None:
            pages.insert(0, {"result": entry["result"], "cursor": cursor})
        if pages[0]["cursor"] is None or len(pages) >= MAX_PAGES:
            break
    return [page["result"] for page in pages]


# The newest listing's tools by name, per session: a call finds its tool without reading and parsing
# every page again. Keyed by the newest tools/list frame, so a new listing (from any process) is read
# afresh; stored frames never change. Callers must not change the tools they get.
_TOOLS_KEPT = 64
_tools: OrderedDict[tuple[int, int], dict[str, dict[str, Any]]] = OrderedDict()
_tools_lock = threading.Lock()


def find_tool(session: McpSession, name: str) -> dict[str, Any] | None:
    """Return a tool of the newest listing by name (a later page's first, as the server sent it)."""
    listings = TimelineFrame.objects.filter(session=session, method="tools/list")
    newest = listings.aggregate(newest=Max("seq"))["newest"]
    if newest is None:
        return None
    key = (session.pk, newest)
    with _tools_lock:
        tools = _tools.get(key)
        if tools is not None:
            _tools.move_to_end(key)
    if tools is None:
        tools = {}
        for page in reversed(stored_pages(session)):
            for tool in page.get("tools") or []:
                if isinstance(tool, dict) and isinstance(tool.get("name"), str):
                    tools.setdefault(tool["name"], tool)
        with _tools_lock:
            _tools[key] = tools
            while len(_tools) > _TOOLS_KEPT:
                _tools.popitem(last=False)
    return tools.get(name)
