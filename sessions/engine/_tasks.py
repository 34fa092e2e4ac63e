"""Tasks (2025-11-25, experimental): task-augmented requests, the task books, and their verdicts.

A requestor adds ``task: {ttl}`` to a request the receiver declared task support for
(``capabilities.tasks.requests``); the receiver answers at once with a ``CreateTaskResult`` and
the real result comes later from ``tasks/result``. ``tasks/get``, ``tasks/list`` and
``tasks/cancel`` follow a task, and ``notifications/tasks/status`` may report its changes.

``TaskBook`` (one per session, on ``PeerState``) keeps every task the session has seen, from any
message that carries one, and judges what the server says about them. Like ``_rules`` it sends
nothing: the session publishes the ``TaskChanged`` events it collects once their frame is recorded.
Schema checks of task messages are ``_schema``'s (the published JSON schema); these are the rules
a schema cannot express.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ._clock import Clock, sleep
from ._frames import TERMINAL, Frame, Task, TaskChanged

__all__ = [
    "RELATED_TASK",
    "STATUSES",
    "STATUS_NOTIFICATION",
    "TASK_METHODS",
    "TERMINAL",
    "Task",
    "TaskBook",
    "augmentable",
    "declares",
    "wait_for_status",
]

STATUSES = ("working", "input_required", "completed", "failed", "cancelled")
TASK_METHODS = frozenset({"tasks/get", "tasks/result", "tasks/list", "tasks/cancel"})
STATUS_NOTIFICATION = "notifications/tasks/status"
RELATED_TASK = "io.modelcontextprotocol/related-task"
# Where ``capabilities.tasks.requests`` declares task support for each request type.
AUGMENTABLE = {
    "tools/call": ("tools", "call"),
    "sampling/createMessage": ("sampling", "createMessage"),
    "elicitation/create": ("elicitation", "create"),
}
# The result a task's tasks/result returns: the underlying request's (published schema definitions).
RESULT_OF = {
    "tools/call": "CallToolResult",
    "sampling/createMessage": "CreateMessageResult",
    "elicitation/create": "ElicitResult",
}
# Polling when the receiver suggests no interval (seconds), and the most we wait between polls.
DEFAULT_POLL = 1.0
MAX_POLL = 30.0


def augmentable(capabilities: dict[str, Any], method: str) -> bool:
    """Whether the peer with these capabilities declared task support for ``method``."""
    path = AUGMENTABLE.get(method)
    tasks = capabilities.get("tasks")
    if path is None or not isinstance(tasks, dict):
        return False
    requests = tasks.get("requests")
    group = requests.get(path[0]) if isinstance(requests, dict) else None
    return isinstance(group, dict) and path[1] in group


def declares(capabilities: dict[str, Any], operation: str) -> bool:
    """``tasks.list`` / ``tasks.cancel`` declared (``""``: any ``tasks`` capability at all)."""
    tasks = capabilities.get("tasks")
    return isinstance(tasks, dict) and (not operation or operation in tasks)


def _short(task_id: str) -> str:
    return task_id if len(task_id) <= 12 else task_id[:8] + "…"


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


@dataclass(slots=True)
class _Asked:
    """One of the client's requests the books wait to see answered."""

    method: str
    task_id: str | None = None
    """tasks/get, tasks/result, tasks/cancel: the task it names."""
    augmented: bool = False
    name: str | None = None
    progress_token: int | str | None = None


@dataclass(slots=True, eq=False)
class TaskBook:
    """Every task the session has seen, the client's task requests in flight, and the task rules."""

    known: dict[str, Task] = field(default_factory=dict)
    tool_support: dict[str, str] = field(default_factory=dict)
    """Per listed tool, its ``execution.taskSupport`` from the last tools/list (``forbidden`` when absent)."""
    progress_tokens: dict[int | str, str] = field(default_factory=dict)
    """Progress tokens of task-augmented requests: valid for the task's whole life."""
    _asked: dict[int | str, _Asked] = field(default_factory=dict)
    _events: list[TaskChanged] = field(default_factory=list)

    # --- what the client sends --------------------------------------------------------------

    def sent(self, frame: Frame, server_capabilities: dict[str, Any]) -> None:
        """Note a request the client sent; say on its frame what the server did not declare."""
        message = frame.message
        if not isinstance(message, dict) or frame.rpc_id is None or not isinstance(frame.method, str):
            return
        method, params = frame.method, message.get("params")
        params = params if isinstance(params, dict) else {}
        if method in TASK_METHODS:
            task_id = params.get("taskId")
            self._asked[frame.rpc_id] = _Asked(method, task_id if isinstance(task_id, str) else None)
            operation = method.split("/")[1] if method in ("tasks/list", "tasks/cancel") else ""
            if not declares(server_capabilities, operation) and frame.note is None:
                wanted = f"tasks.{operation}" if operation else "tasks"
                frame.note = f"the server did not declare {wanted}: it may answer -32601"
            return
        name = params.get("name") if method == "tools/call" else None
        name = name if isinstance(name, str) else None
        if "task" not in params:
            if name is not None and self.tool_support.get(name) == "required":
                self._asked[frame.rpc_id] = _Asked(method, name=name)
            return
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self._asked[frame.rpc_id] = _Asked(
            method, augmented=True, name=name, progress_token=token if isinstance(token, int | str) else None
        )
        if frame.note is None:
            if not augmentable(server_capabilities, method):
                frame.note = (
                    f"task-augmented, but the server did not declare tasks.requests for {method}: "
                    "it must ignore the task and answer normally"
                )
            elif name is not None and self.tool_support.get(name) == "forbidden":
                frame.note = (
                    f"task-augmented, but tool {name!r} does not support tasks (taskSupport forbidden)"
                )

    # --- what the server answers ------------------------------------------------------------

    def answered(
        self,
        request_id: int | str,
        method: str,
        message: dict[str, Any],
        frame: Frame,
        at: str,
        server_capabilities: dict[str, Any],
    ) -> str | None:
        """Judge a response to one of the client's requests; return the schema definition its
        result must match instead of the method's own (``CreateTaskResult`` …), if any."""
        asked = self._asked.pop(request_id, None)
        result = message.get("result")
        if method == "tools/list" and isinstance(result, dict):
            self._learn_tools(result)
        if asked is None:
            if isinstance(result, dict) and self._looks_created(result):
                frame.flag(
                    "task-capability",
                    "error",
                    f"{at}a CreateTaskResult answers a {method} request that asked for no task",
                )
                return "CreateTaskResult"
            return None
        error = message.get("error")
        if asked.method in TASK_METHODS:
            if isinstance(error, dict):
                self._task_error(asked, error, frame, at)
            elif isinstance(result, dict):
                return self._task_result(asked, result, frame, at)
            return None
        if asked.augmented:
            return self._augmented_answer(request_id, asked, result, frame, at, server_capabilities)
        if isinstance(result, dict):  # a tool that requires a task, called without one
            frame.flag(
                "task-required",
                "warning",
                f"{at}tool {asked.name!r} requires task augmentation (taskSupport required): called "
                "without a task, the server must answer -32601 (Method not found), not a result",
            )
        return None

    def _augmented_answer(
        self,
        request_id: int | str,
        asked: _Asked,
        result: Any,
        frame: Frame,
        at: str,
        server_capabilities: dict[str, Any],
    ) -> str | None:
        if not isinstance(result, dict):
            return None
        declared = augmentable(server_capabilities, asked.method)
        if not self._looks_created(result):
            support = self.tool_support.get(asked.name) if asked.name is not None else "optional"
            if declared and support in ("optional", "required"):
                frame.flag(
                    "task-ignored",
                    "warning",
                    f"{at}the server declared task support for {asked.method} but answered the "
                    "task-augmented request with a plain result, not a CreateTaskResult",
                )
            return None
        if not declared:
            frame.flag(
                "task-capability",
                "error",
                f"{at}a CreateTaskResult although the server did not declare tasks.requests for "
                f"{asked.method}: it must process the request normally",
            )
        task = self._observe(result["task"], frame, at, created=True)
        if task is not None:
            task.method, task.name, task.request_id = asked.method, asked.name, request_id
            if asked.progress_token is not None:
                self.progress_tokens[asked.progress_token] = task.task_id
            if frame.note is None and frame.rpc_kind != "batch":
                frame.note = f"task {_short(task.task_id)} created ({task.status})"
        return "CreateTaskResult"

    def _task_result(self, asked: _Asked, result: dict[str, Any], frame: Frame, at: str) -> str | None:
        if asked.method == "tasks/list":
            tasks = result.get("tasks")
            for item in tasks if isinstance(tasks, list) else []:
                self._observe(item, frame, at)
            return None
        if asked.method == "tasks/result":
            return self._payload(asked, result, frame, at)
        before = self.known.get(asked.task_id) if asked.task_id is not None else None
        was = before.status if before is not None else None
        task = self._observe(result, frame, at)
        if asked.method == "tasks/cancel":
            if was in TERMINAL:
                frame.flag(
                    "task-status",
                    "error",
                    f"{at}tasks/cancel of a task already {was} must be refused with -32602 (Invalid params)",
                )
            elif task is not None and task.status != "cancelled":
                frame.flag(
                    "task-status",
                    "error",
                    f"{at}tasks/cancel answered status {task.status!r}: the task must be cancelled "
                    "before the response",
                )
        return None

    def _payload(self, asked: _Asked, result: dict[str, Any], frame: Frame, at: str) -> str | None:
        meta = result.get("_meta")
        related = meta.get(RELATED_TASK) if isinstance(meta, dict) else None
        named = related.get("taskId") if isinstance(related, dict) else None
        if named != asked.task_id:
            frame.flag(
                "related-task",
                "error",
                f"{at}a tasks/result result must carry _meta {RELATED_TASK!r} with taskId "
                f"{asked.task_id!r}" + (f" (it names {named!r})" if named is not None else ""),
            )
        task = self.known.get(asked.task_id) if asked.task_id is not None else None
        if task is None:
            return None
        task.result, task.error, task.frame_seq = result, None, 0
        self._events.append(TaskChanged(dataclasses.replace(task), task.status, 0, "result"))
        if frame.note is None and frame.rpc_kind != "batch":
            frame.note = f"result of task {_short(task.task_id)}"
        return RESULT_OF.get(task.method or "")

    def _task_error(self, asked: _Asked, error: dict[str, Any], frame: Frame, at: str) -> None:
        code = error.get("code")
        task = self.known.get(asked.task_id) if asked.task_id is not None else None
        if asked.method == "tasks/result" and task is not None and isinstance(code, int):
            # The underlying request failed: tasks/result returns that same error.
            task.error, task.result = error, None
            self._events.append(TaskChanged(dataclasses.replace(task), task.status, 0, "result"))
            return
        unknown = asked.method != "tasks/list" and task is None
        refused_terminal = asked.method == "tasks/cancel" and task is not None and task.terminal
        if (unknown or refused_terminal) and code != -32602:
            why = "a task this session never saw" if task is None else f"a task already {task.status}"
            frame.flag(
                "task-error",
                "warning",
                f"{at}{asked.method} of {why} is answered -32602 (Invalid params), not {code}",
            )

    # --- what the server tells --------------------------------------------------------------

    def notified(self, params: dict[str, Any], frame: Frame, at: str) -> None:
        """notifications/tasks/status: the full task, after a change."""
        task = self._observe(params, frame, at)
        if task is not None and frame.note is None and frame.rpc_kind != "batch":
            frame.note = f"task {_short(task.task_id)}: {task.status}"

    def server_request(
        self, method: str, params: dict[str, Any], frame: Frame, at: str, client_capabilities: dict[str, Any]
    ) -> None:
        """A request from the server: task-augmented, or about the client's own tasks."""
        if method in TASK_METHODS:
            operation = method.split("/")[1] if method in ("tasks/list", "tasks/cancel") else ""
            if not declares(client_capabilities, operation):
                wanted = f"tasks.{operation}" if operation else "tasks"
                frame.flag(
                    "undeclared-capability",
                    "error",
                    f"{at}{method} needs the client capability {wanted!r}, which this client did not declare",
                )
            return
        if "task" in params and not augmentable(client_capabilities, method):
            frame.flag(
                "task-capability",
                "warning",
                f"{at}a task-augmented {method} although the client did not declare tasks.requests for "
                "it; the client answers it normally",
            )

    def progress_of(self, token: Any) -> str | None:
        """The task whose request carried this progress token (valid for the task's whole life)."""
        return self.progress_tokens.get(token) if isinstance(token, int | str) else None

    def replay(self, frames: Iterable[Frame], server_capabilities: dict[str, Any]) -> None:
        """Rebuild the books from recorded frames, in order (a stored session's tasks); the verdicts
        and notes this would make go on copies and are dropped: the recording has its own."""
        for frame in frames:
            try:
                message = json.loads(frame.raw) if frame.kind == "message" else None
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            copy = Frame("message", frame.direction, seq=frame.seq, message=message, note="")
            copy.rpc_kind, copy.method, copy.rpc_id = frame.rpc_kind, frame.method, message.get("id")
            params = message.get("params")
            if frame.direction == "out" and frame.rpc_kind == "request":
                self.sent(copy, server_capabilities)
            elif frame.direction == "in" and frame.rpc_kind in ("result", "error") and frame.method:
                if isinstance(copy.rpc_id, int | str):
                    self.answered(copy.rpc_id, frame.method, message, copy, "", server_capabilities)
            elif frame.direction == "in" and frame.method == STATUS_NOTIFICATION and isinstance(params, dict):
                self.notified(params, copy, "")
            self.drain(frame.seq)

    def drain(self, frame_seq: int) -> list[TaskChanged]:
        """The task changes the last frame made, numbered with that frame, for the session to publish."""
        events, self._events = self._events, []
        for event in events:
            event.frame_seq = frame_seq
            event.task.frame_seq = frame_seq
            self.known[event.task.task_id].frame_seq = frame_seq
        return events

    # --- the books ----------------------------------------------------------------------------

    @staticmethod
    def _looks_created(result: dict[str, Any]) -> bool:
        return isinstance(result.get("task"), dict)

    def _learn_tools(self, result: dict[str, Any]) -> None:
        tools = result.get("tools")
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            execution = tool.get("execution")
            support = execution.get("taskSupport") if isinstance(execution, dict) else None
            self.tool_support[tool["name"]] = support if isinstance(support, str) else "forbidden"

    def _observe(self, data: Any, frame: Frame, at: str, *, created: bool = False) -> Task | None:
        """Take in a task's state as the server reports it; flag a status that may not follow."""
        if not isinstance(data, dict):
            return None
        task_id, status = data.get("taskId"), data.get("status")
        if not isinstance(task_id, str) or status not in STATUSES:
            return None  # the schema verdict says what is wrong
        task = self.known.get(task_id)
        if created and status != "working" and (task is None or task.status == status):
            frame.flag(
                "task-status", "warning", f"{at}task {task_id!r} was created {status}; tasks begin working"
            )
        if task is None:
            task = self.known[task_id] = Task(task_id, status)
            self._take(task, data)
            self._events.append(TaskChanged(dataclasses.replace(task), None, 0, "created"))
            return task
        reported, last = _time(data.get("lastUpdatedAt")), _time(task.last_updated_at)
        if reported is not None and last is not None and reported < last:
            if frame.note is None and frame.rpc_kind != "batch":
                frame.note = f"an older state of task {_short(task_id)} ({status}); it is {task.status}"
            return task
        previous = task.status
        if previous in TERMINAL and status != previous:
            frame.flag(
                "task-status",
                "error",
                f"{at}task {task_id!r} went from {previous} to {status}: a terminal status never changes",
            )
        message_before = task.status_message
        self._take(task, data)
        if status != previous or task.status_message != message_before:
            self._events.append(TaskChanged(dataclasses.replace(task), previous, 0, "status"))
        return task

    @staticmethod
    def _take(task: Task, data: dict[str, Any]) -> None:
        task.status = data["status"]
        message = data.get("statusMessage")
        task.status_message = message if isinstance(message, str) else None
        for attribute, key in (("created_at", "createdAt"), ("last_updated_at", "lastUpdatedAt")):
            value = data.get(key)
            setattr(task, attribute, value if isinstance(value, str) else None)
        ttl, poll = data.get("ttl"), data.get("pollInterval")
        task.ttl = ttl if isinstance(ttl, int) and not isinstance(ttl, bool) else None
        task.poll_interval = poll if isinstance(poll, int) and not isinstance(poll, bool) else None


# --- waiting for a task -------------------------------------------------------------------------


class Poller(Protocol):
    """What waiting for a task needs from the session."""

    @property
    def clock(self) -> Clock: ...

    @property
    def tasks(self) -> dict[str, Task]: ...

    async def get_task(self, task_id: str) -> dict[str, Any]: ...


async def wait_for_status(
    session: Poller, task_id: str, statuses: Iterable[str] = (*TERMINAL, "input_required")
) -> Task:
    """Poll tasks/get (at the receiver's ``pollInterval``) until the task reaches one of ``statuses``.

    A status notification that arrives between polls counts too. ``McpError`` if the server refuses.
    """
    wanted = frozenset(statuses)
    while True:
        await session.get_task(task_id)
        task = session.tasks.get(task_id)
        if task is not None and task.status in wanted:
            return task
        interval = (task.poll_interval / 1000) if task is not None and task.poll_interval else DEFAULT_POLL
        await sleep(session.clock, min(max(interval, 0.01), MAX_POLL))
        task = session.tasks.get(task_id)
        if task is not None and task.status in wanted:
            return task
