"""The Tasks panel (2025-11-25 tasks): every task the session has seen, live, with its result and cancel.

What it shows is rebuilt from the stored frames by the engine's own task books
(``TaskBook.replay``), so a recording shows its tasks as the live session did. Each action is a
request with its call card; the list follows new task frames over the live socket (``touches``).
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, HttpResponseBadRequest
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from sessions.engine import TASK_METHODS, TASK_STATUS_NOTIFICATION, TaskBook, task_augmentable
from sessions.frames import frame_of
from sessions.models import McpSession, TimelineFrame
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import ask, owned_session, render_call, render_panel

__all__ = ["panel_context", "render_list", "task_action", "task_capabilities", "touches", "tasks_list"]

# How many task frames (and task-creating tools/call answers) the panel reads back, newest first.
TASK_SCAN = 2000
ACTIONS = {"get": "tasks/get", "result": "tasks/result", "cancel": "tasks/cancel"}
_METHODS = (*sorted(TASK_METHODS), TASK_STATUS_NOTIFICATION)
# The engine notes the frame of a CreateTaskResult "task <id> created (<status>)": a stored column.
_CREATED = "task "


def task_capabilities(session: McpSession) -> dict[str, bool]:
    """What the server declared about tasks."""
    caps = session.server_capabilities if isinstance(session.server_capabilities, dict) else {}
    tasks = caps.get("tasks")
    declared = isinstance(tasks, dict)
    operations = tasks if isinstance(tasks, dict) else {}
    return {
        "tasks": declared,
        "list": "list" in operations,
        "cancel": "cancel" in operations,
        "tools_call": task_augmentable(caps, "tools/call"),
    }


def task_rows(session: McpSession) -> list[dict[str, Any]]:
    """Every task the stored frames tell of, newest first, as the panel shows it."""
    rows = list(
        TimelineFrame.objects.filter(session=session, kind="message", method__in=_METHODS).order_by("-seq")[
            :TASK_SCAN
        ]
    )
    created = list(
        TimelineFrame.objects.filter(
            session=session,
            method="tools/call",
            direction="in",
            rpc_kind="result",
            note__startswith=_CREATED,
        ).order_by("-seq")[:TASK_SCAN]
    )
    asked = [c.pair_seq for c in created if c.pair_seq is not None]
    calls = list(TimelineFrame.objects.filter(session=session, seq__in=asked)) if asked else []
    frames = sorted({r.seq: r for r in (*rows, *created, *calls)}.values(), key=lambda r: r.seq)
    book = TaskBook()
    caps = session.server_capabilities if isinstance(session.server_capabilities, dict) else {}
    book.replay((frame_of(r) for r in frames), caps)
    shown = []
    for task in sorted(book.known.values(), key=lambda t: t.created_at or "", reverse=True):
        row = task.to_dict()
        row["terminal"] = task.terminal
        row["result_json"] = json.dumps(task.result, indent=2, ensure_ascii=False) if task.result else ""
        row["error_json"] = json.dumps(task.error, indent=2, ensure_ascii=False) if task.error else ""
        shown.append(row)
    return shown


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """What the tasks panel shows (runs in a worker thread)."""
    return {"task_caps": task_capabilities(session), "tasks": task_rows(session)}


def touches(rows: list[dict[str, Any]]) -> bool:
    """Whether a live batch of rows changes what the tasks panel shows."""
    for row in rows:
        method = row.get("method")
        if method in _METHODS:
            return True
        if (
            method == "tools/call"
            and row.get("direction") == "in"
            and str(row.get("note") or "").startswith(_CREATED)
        ):
            return True
    return False


def render_list(session: McpSession) -> str:
    """The task list, to swap out of band into an open Tasks panel."""
    context = {
        "session": session,
        "tasks": task_rows(session),
        "task_caps": task_capabilities(session),
        "oob": True,
    }
    return render_to_string("sessions/tasks/_list.html", context)


@require_POST
async def tasks_list(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """tasks/list (every page), then the panel again."""
    session = await owned_session(request, public_id)
    cursor: str | None = None
    problem = None
    for _ in range(50):
        problem, result = await ask(request, session, "tasks/list", {"cursor": cursor} if cursor else None)
        cursor = result.get("nextCursor") if isinstance(result, dict) else None
        if problem is not None or not isinstance(cursor, str) or not cursor:
            break
    context = await sync_to_async(panel_context)(session, request, {})
    return await render_panel(request, session, "tasks", context, list_error=problem)


@require_POST
async def task_action(request: AuthedRequest, public_id: Any, action: str) -> HttpResponse:
    """tasks/get, tasks/result or tasks/cancel for one task, shown as a call card."""
    session = await owned_session(request, public_id)
    method = ACTIONS.get(action)
    task_id = request.POST.get("task_id", "")
    if method is None:
        return HttpResponseBadRequest("action must be get, result or cancel")
    if not task_id:
        return HttpResponseBadRequest("task_id is required")
    return await render_call(request, session, method, {"taskId": task_id})
