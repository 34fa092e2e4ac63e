"""Requests from the server: ping and roots answered at once, sampling and elicitation held for a person
(or run as a task the server follows, when it asks for one: ``_task_serving``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from ._errors import EngineError, McpError
from ._frames import Event, Frame, PendingRequest, PendingResolved
from ._options import ClientOptions
from ._peer import PeerState
from ._protocol import HUMAN_METHODS
from ._requests import RequestTable
from ._rules import refusal
from ._task_serving import ServedTasks
from ._tasks import TASK_METHODS, declares

__all__ = ["ServerRequestHandler", "ServerRequests"]

ServerRequestHandler = Callable[[PendingRequest], Awaitable[dict[str, Any]]]


class Answerer(Protocol):
    """What answering reads from the session, as it is at the moment of answering."""

    @property
    def options(self) -> ClientOptions: ...

    @property
    def handlers(self) -> dict[str, ServerRequestHandler]: ...

    @property
    def roots(self) -> list[dict[str, Any]]: ...


class ServerRequests:
    """The server's requests to the client: answered by a handler, from the roots, or by a person.

    While a person is asked (sampling, elicitation, reviewed roots), every request the client has
    in flight stops its clocks: over stdio nothing says which request the question belongs to.
    """

    def __init__(
        self,
        session: Answerer,
        peer: PeerState,
        requests: RequestTable,
        *,
        publish: Callable[[Event], None],
        send: Callable[[dict[str, Any]], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None]], object],
    ) -> None:
        self._session = session
        self._peer = peer
        self._requests = requests
        self._publish = publish
        self._send = send
        self._spawn = spawn
        self._frames: dict[int | str, tuple[int, str]] = {}
        """The frame and method of each server request, to pair the client's response with it."""
        self._notes: dict[int | str, str] = {}
        """A note for the client's response (what the person said about it)."""
        self._waiting: dict[str, tuple[int | str, asyncio.Future[dict[str, Any]]]] = {}
        self.tasks = ServedTasks(clock=requests.clock, resolve=self.resolve, respond=self._respond, send=send)
        """2025-11-25: the tasks the client runs for the server's task-augmented requests."""

    def serve(self, request_id: int | str, method: str, params: dict[str, Any], frame_seq: int) -> None:
        """Start answering a request the server sent in frame ``frame_seq``."""
        self._frames[request_id] = (frame_seq, method)
        if method == "ping" and method not in self._session.handlers:
            self._spawn(self._respond(request_id, result={}))
            return
        capabilities = self._peer.client_capabilities
        if self.tasks.accepts(method, params, capabilities) and refusal(method, params, capabilities) is None:
            created = self.tasks.start(request_id, method, params, frame_seq)
            self._notes[request_id] = f"task {created.task_id} created (working)"
            return
        task = asyncio.ensure_future(self._answer(request_id, method, params, frame_seq))
        self._peer.answering[request_id] = task
        task.add_done_callback(lambda _: self._peer.answering.pop(request_id, None))

    def invalid(self, request_id: Any, message: str, frame_seq: int, method: str | None) -> None:
        """Answer a request the client cannot take with -32600 (Invalid Request), ``request_id`` echoed."""
        if request_id is not None and method is not None:
            self._frames[request_id] = (frame_seq, method)
        self._spawn(self._respond(request_id, error={"code": -32600, "message": message}))

    def withdraw(self, request_id: int | str) -> None:
        """The server cancelled its request: stop answering it (a waiting person is told)."""
        task = self._peer.answering.get(request_id)
        if task is not None:
            task.cancel()

    def answered(self, frame: Frame) -> None:
        """Pair the client's out response frame with the server request it answers."""
        for_request = self._frames.pop(frame.rpc_id, None) if frame.rpc_id is not None else None
        if for_request is not None:
            frame.pair_seq, frame.method = for_request
            frame.latency_ms = None
        if frame.rpc_id in self._notes:
            frame.note = self._notes.pop(frame.rpc_id)

    async def resolve(
        self,
        request_id: int | str,
        method: str,
        params: dict[str, Any],
        frame_seq: int,
        *,
        withdrawn: str = "the server cancelled its request",
    ) -> dict[str, Any]:
        """The client's answer to one server→client request: a handler, the roots, or a person.

        Used for JSON-RPC requests from the server and for the requests embedded in a stateless
        input_required result alike. Raises ``McpError`` to refuse.
        """
        refused = refusal(method, params, self._peer.client_capabilities)
        if refused is not None:
            # A capability (or an elicitation mode) this client did not declare: flagged, and refused at
            # once, before any handler or person sees it.
            raise refused
        pending = PendingRequest(f"{request_id!r}@{frame_seq}", request_id, method, params, frame_seq)
        handler = self._session.handlers.get(method)
        if handler is not None:
            return await handler(pending)
        operation = method.split("/")[1] if method in ("tasks/list", "tasks/cancel") else ""
        if method in TASK_METHODS and declares(self._peer.client_capabilities, operation):
            return await self.tasks.answer(method, params)
        if method == "roots/list" and not self._session.options.review_roots:
            return {"roots": list(self._session.roots)}
        if method in HUMAN_METHODS or method == "roots/list":
            return await self._wait_for_person(pending, withdrawn)
        raise McpError(-32601, f"Method not found: {method}")

    async def _answer(
        self, request_id: int | str, method: str, params: dict[str, Any], frame_seq: int
    ) -> None:
        try:
            result = await self.resolve(request_id, method, params, frame_seq)
        except asyncio.CancelledError:
            # The server withdrew its request (notifications/cancelled): it wants no answer.
            return
        except McpError as exc:
            error: dict[str, Any] = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                error["data"] = exc.data
            await self._respond(request_id, error=error)
            return
        except Exception as exc:
            await self._respond(
                request_id, error={"code": -32603, "message": f"client handler failed: {exc}"}
            )
            return
        await self._respond(request_id, result=result)

    async def _respond(
        self,
        request_id: Any,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result
        with contextlib.suppress(EngineError):
            await self._send(message)

    # --- a person answers -------------------------------------------------------------

    async def _wait_for_person(self, pending: PendingRequest, withdrawn: str) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if not self._waiting:
            self._requests.pause_clocks()
        self._waiting[pending.key] = (pending.request_id, future)
        self._publish(pending)
        try:
            return await future
        except asyncio.CancelledError:
            # Still listed: nobody answered it and the connection did not fail; it was withdrawn.
            if self._waiting.pop(pending.key, None) is not None:
                self._publish(PendingResolved(pending.key, "withdrawn", withdrawn))
                if not self._waiting:
                    self._requests.resume_clocks()
            raise
        finally:
            if self._waiting.pop(pending.key, None) is not None and not self._waiting:
                self._requests.resume_clocks()

    @property
    def waiting(self) -> list[str]:
        """Keys of the server→client requests waiting for a person, oldest first."""
        return list(self._waiting)

    def respond(self, key: str, result: dict[str, Any], *, note: str | None = None) -> None:
        """Answer a waiting request with ``result``."""
        request_id, future = self._entry(key)
        if note and request_id in self._frames:  # not yet answered (a task's was, by its CreateTaskResult)
            self._notes[request_id] = note
        future.set_result(result)
        self._publish(PendingResolved(key, "answered", note or ""))

    def reject(self, key: str, code: int, message: str, *, note: str | None = None) -> None:
        """Refuse a waiting request with a JSON-RPC error."""
        request_id, future = self._entry(key)
        if note and request_id in self._frames:  # not yet answered (a task's was, by its CreateTaskResult)
            self._notes[request_id] = note
        future.set_exception(McpError(code, message))
        self._publish(PendingResolved(key, "rejected", message))

    def _entry(self, key: str) -> tuple[int | str, asyncio.Future[dict[str, Any]]]:
        entry = self._waiting.get(key)
        if entry is None or entry[1].done():
            raise KeyError(f"no pending request {key!r}")
        return entry

    # --- the end ----------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop answering: withdraw every request still being answered, and wait until they are gone."""
        await self.tasks.stop()
        tasks = list(self._peer.answering.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def fail_all(self, error: Exception) -> None:
        """The connection failed: every wait for a person ends, unanswered."""
        waiting, self._waiting = self._waiting, {}
        for key, (_, future) in waiting.items():
            if not future.done():
                future.cancel()
                self._publish(PendingResolved(key, "failed", str(error)))
