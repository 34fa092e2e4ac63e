"""The client as a task receiver (2025-11-25): task-augmented sampling and elicitation, and tasks/*.

A server that sees ``tasks.requests`` in the client's capabilities may add ``task: {ttl}`` to a
sampling/createMessage or elicitation/create. The client answers at once with a ``CreateTaskResult``
and produces the real answer in the background, exactly as it answers the plain request (a handler,
or a person); the server follows the task with tasks/get, tasks/result (which waits for the answer),
tasks/list and tasks/cancel. A task is forgotten once its ttl has passed since its creation.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._clock import Clock, Timer
from ._errors import EngineError, McpError
from ._frames import TERMINAL
from ._tasks import RELATED_TASK, STATUS_NOTIFICATION, augmentable

__all__ = ["ServedTask", "ServedTasks"]

# A task without a requested ttl is kept an hour, and none longer than a day: the client holds each
# answer in memory until then.
DEFAULT_TTL_MS = 60 * 60 * 1000
MAX_TTL_MS = 24 * 60 * 60 * 1000
# What the client suggests the server waits between tasks/get: a person answers in seconds.
POLL_INTERVAL_MS = 1000
PAGE_SIZE = 50
"""Tasks per tasks/list page."""

Resolve = Callable[..., Awaitable[dict[str, Any]]]
Respond = Callable[..., Awaitable[None]]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True, eq=False)
class ServedTask:
    """One task the client runs for the server: its state, and the answer once there is one."""

    task_id: str
    method: str
    ttl: int
    order: int
    status: str = "working"
    status_message: str | None = None
    created_at: str = field(default_factory=_now)
    last_updated_at: str = ""
    result: dict[str, Any] | None = None
    error: McpError | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    work: asyncio.Task[None] | None = None
    expiry: Timer | None = None

    def __post_init__(self) -> None:
        self.last_updated_at = self.last_updated_at or self.created_at

    def wire(self) -> dict[str, Any]:
        """The task as the spec's ``Task`` shapes it."""
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttl": self.ttl,
            "pollInterval": POLL_INTERVAL_MS,
        }
        if self.status_message is not None:
            task["statusMessage"] = self.status_message
        return task

    def end(self, status: str, message: str | None) -> None:
        self.status, self.status_message, self.last_updated_at = status, message, _now()
        self.done.set()


class ServedTasks:
    """The tasks the client runs for the server, by id, and its answers to the server's tasks/* requests."""

    def __init__(
        self,
        *,
        clock: Clock,
        resolve: Resolve,
        respond: Respond,
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        self._clock = clock
        self._resolve = resolve
        """How the client answers the underlying request (``ServerRequests.resolve``)."""
        self._respond = respond
        self._send = send
        self._tasks: dict[str, ServedTask] = {}
        self._expired: set[str] = set()
        self._count = 0

    @property
    def tasks(self) -> dict[str, ServedTask]:
        """The tasks still kept, oldest first."""
        return self._tasks

    @staticmethod
    def accepts(method: str, params: dict[str, Any], client_capabilities: dict[str, Any]) -> bool:
        """Whether a server request is task-augmented for a kind the client declared task support for
        (any other ``task`` is ignored: the request is answered normally, as the spec says)."""
        return isinstance(params.get("task"), dict) and augmentable(client_capabilities, method)

    def start(self, request_id: int | str, method: str, params: dict[str, Any], frame_seq: int) -> ServedTask:
        """Create a task for a task-augmented request: answer it with the ``CreateTaskResult``, then
        produce the real answer in the background."""
        asked = params["task"].get("ttl")
        valid = isinstance(asked, int) and not isinstance(asked, bool) and asked >= 0
        ttl = asked if valid else DEFAULT_TTL_MS
        self._count += 1
        task = ServedTask(str(uuid.uuid4()), method, min(ttl, MAX_TTL_MS), self._count)
        self._tasks[task.task_id] = task
        task.work = asyncio.ensure_future(self._run(task, request_id, params, frame_seq))
        return task

    async def _run(self, task: ServedTask, request_id: int | str, params: dict[str, Any], seq: int) -> None:
        await self._respond(request_id, result={"task": task.wire()})
        # Armed once the server has its CreateTaskResult: even a ttl of 0 must not leave it unanswered.
        task.expiry = self._clock.call_later(task.ttl / 1000, lambda: self._expire(task.task_id))
        # The task stays working while a person answers: input_required would send the server to
        # tasks/result for questions of the client's, and the client has none.
        try:
            result = await self._resolve(
                request_id, task.method, params, seq, withdrawn="the server cancelled the task, or it expired"
            )
        except asyncio.CancelledError:
            return  # tasks/cancel (its response tells), the ttl, or the session's end: nothing to tell
        except McpError as exc:
            task.error = exc
            task.end("failed", exc.message)
        except Exception as exc:
            task.error = McpError(-32603, f"client handler failed: {exc}")
            task.end("failed", task.error.message)
        else:
            task.result = result
            task.end("completed", None)
        # A receiver may tell of a change; the server may be polling, so the end of the work is told.
        with contextlib.suppress(EngineError):
            await self._send({"jsonrpc": "2.0", "method": STATUS_NOTIFICATION, "params": task.wire()})

    def _expire(self, task_id: str) -> None:
        task = self._tasks.pop(task_id, None)
        if task is None:
            return
        self._expired.add(task_id)
        if task.work is not None:
            task.work.cancel()
        task.done.set()  # a waiting tasks/result learns it has expired

    # --- the server's tasks/* requests ----------------------------------------------------------

    async def answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer tasks/get, tasks/result, tasks/list or tasks/cancel; ``McpError`` to refuse."""
        if method == "tasks/list":
            return self._page(params.get("cursor"))
        task = self._find(params.get("taskId"))
        if method == "tasks/get":
            return task.wire()
        if method == "tasks/cancel":
            return self._cancel(task)
        await task.done.wait()
        if task.task_id not in self._tasks:
            raise McpError(-32602, f"Failed to retrieve task: task {task.task_id} has expired")
        if task.error is not None:
            # Exactly what the request would have been answered with: the same error.
            raise task.error
        result = dict(task.result or {})
        result["_meta"] = {**(result.get("_meta") or {}), RELATED_TASK: {"taskId": task.task_id}}
        return result

    def _find(self, task_id: Any) -> ServedTask:
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is not None:
            return task
        if task_id in self._expired:
            raise McpError(-32602, f"Failed to retrieve task: task {task_id} has expired")
        raise McpError(-32602, f"Failed to retrieve task: no task {task_id!r}")

    def _cancel(self, task: ServedTask) -> dict[str, Any]:
        if task.status in TERMINAL:
            raise McpError(-32602, f"Cannot cancel task: already in terminal status {task.status!r}")
        # Cancelled before the response, as the spec requires; what the answer would have been is gone.
        task.error = McpError(-32603, f"task {task.task_id} was cancelled: it has no result")
        task.end("cancelled", "cancelled by the server's tasks/cancel")
        if task.work is not None:
            task.work.cancel()
        return task.wire()

    def _page(self, cursor: Any) -> dict[str, Any]:
        # The cursor is the creation number of the next page's first task, so expiries between
        # pages skip nothing.
        start = 0
        if cursor is not None:
            if not isinstance(cursor, str) or not cursor.isascii() or not cursor.isdigit():
                raise McpError(-32602, f"Invalid cursor {cursor!r}")
            start = int(cursor)
        tasks = [task for task in self._tasks.values() if task.order >= start]
        page: dict[str, Any] = {"tasks": [task.wire() for task in tasks[:PAGE_SIZE]]}
        if len(tasks) > PAGE_SIZE:
            page["nextCursor"] = str(tasks[PAGE_SIZE].order)
        return page

    # --- the end --------------------------------------------------------------------------------

    async def stop(self) -> None:
        """The session ends: stop every task's work and timer, and wait until the work is gone."""
        works = [task.work for task in self._tasks.values() if task.work is not None]
        for task in self._tasks.values():
            if task.expiry is not None:
                task.expiry.cancel()
            if task.work is not None:
                task.work.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*works, return_exceptions=True)
