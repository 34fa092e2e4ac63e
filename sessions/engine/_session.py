"""The client session: a JSON-RPC peer over one transport, with the MCP lifecycle on top.

``ClientSession`` is a façade; the work is done by
``_rules`` (the verdicts on each received frame, and what it asks the session to do),
``_requests`` (the client's requests in flight, their clocks and handles),
``_serving`` (the server's requests to the client), ``_negotiation`` (initialize,
server/discover, the fallbacks), ``_input_required`` (the stateless retry loop) and
``_listen`` (stateless change notifications). ``_peer`` holds the facts they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from . import _listen, _negotiation, _rules, _shapes, _tasks, _xheaders
from ._clock import Clock, LoopClock, wait_first
from ._errors import ConnectionClosed, EngineError, RequestTimeout, SessionExpired
from ._frames import Event, Frame, Progress, Task
from ._input_required import InputRequiredDriver
from ._listen import Listens, ListenStream
from ._options import ClientOptions
from ._peer import PeerState
from ._protocol import INPUT_REQUIRED_METHODS, META_LOG_LEVEL, UNCANCELLABLE, encode
from ._requests import Outgoing, RequestHandle, RequestOptions, RequestTable
from ._serving import ServerRequestHandler, ServerRequests
from ._task_serving import ServedTask
from ._transport import Transport

if TYPE_CHECKING:  # the skills extension loads when a caller asks for it
    from ._skills import Skills

__all__ = ["ClientSession", "RequestHandle", "ServerRequestHandler"]

Subscriber = Callable[[Event], None]
# How long subscriptions/listen waits for its acknowledgement when the session has no timeout.
LISTEN_ACK_TIMEOUT = 30.0


class ClientSession:
    """One MCP connection: send requests, answer the server, and publish every frame in order.

    Use ``async with ClientSession(transport, options) as session`` to open and initialize, or call
    ``open()`` and ``initialize()`` yourself. All methods must run in the event loop that opened it.
    """

    def __init__(self, transport: Transport, options: ClientOptions | None = None) -> None:
        self.transport = transport
        self.options = options or ClientOptions()
        self.roots: list[dict[str, Any]] = list(self.options.roots)
        self.handlers: dict[str, ServerRequestHandler] = {}
        self.exit_code: int | None = None
        self.clock: Clock = self.options.clock or LoopClock()
        self.peer = PeerState(
            validate=self.options.validate,
            client_info=self.options.client_info,
            log_level=self.options.log_level,
        )
        """The facts of the connection: negotiated revision, both sides' capabilities, the books."""
        self._seq = itertools.count(1)
        self._subscribers: list[Subscriber] = []
        self._closed = asyncio.Event()
        self._background: set[asyncio.Task[Any]] = set()
        self._requests = RequestTable(self.clock, self._on_timeout, defaults=self.options)
        self._serving = ServerRequests(
            self, self.peer, self._requests, publish=self._publish, send=self._send, spawn=self._spawn
        )
        self._inputs = InputRequiredDriver(
            send=self._send_leg,
            resolve=self._serving.resolve,
            abandon=self._abandon,
            record=self.record,
            requests=self._requests,
            clock=self.clock,
            max_rounds=self.options.input_required_max_rounds,
        )

    # --- what was agreed (see PeerState) ------------------------------------------------

    @property
    def state(self) -> str:
        """``idle``, ``connecting``, ``initializing`` / ``discovering``, ``ready``, ``expired``,
        ``closing``, ``closed`` or ``failed``."""
        return self.peer.state

    @property
    def mode(self) -> str | None:
        """``handshake`` or ``stateless`` once connected (``None`` before)."""
        return self.peer.mode

    @property
    def protocol_version(self) -> str | None:
        return self.peer.protocol_version

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """What the client declared, shaped for the revision."""
        return self.peer.client_capabilities

    @property
    def server_capabilities(self) -> dict[str, Any]:
        return self.peer.server_capabilities

    @property
    def server_info(self) -> dict[str, Any]:
        return self.peer.server_info

    @property
    def instructions(self) -> str | None:
        return self.peer.instructions

    @property
    def discover_result(self) -> dict[str, Any] | None:
        """Stateless mode: the server/discover result, whole."""
        return self.peer.discover_result

    @property
    def log_level(self) -> str | None:
        """Stateless mode: the log level each request asks for in ``_meta``."""
        return self.peer.log_level

    @property
    def listens(self) -> Listens:
        """Stateless mode: the subscriptions/listen streams, and the one now carrying change notifications."""
        return self.peer.listens

    # --- the event stream -------------------------------------------------------------

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` with every event, synchronously and in order; return an unsubscribe."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    async def events(self) -> AsyncIterator[Event]:
        """Yield every event from now until the session closes."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        unsubscribe = self.subscribe(queue.put_nowait)
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            while True:
                if queue.empty() and self._closed.is_set():
                    return
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, closed}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    event = getter.result()
                    if event is not None:
                        yield event
                else:
                    getter.cancel()
        finally:
            closed.cancel()
            unsubscribe()

    def _publish(self, event: Event) -> None:
        for subscriber in self._subscribers:
            subscriber(event)

    # --- FrameSink: what the transport calls ------------------------------------------

    def record(self, frame: Frame) -> Frame:
        frame.seq = next(self._seq)
        if frame.kind == "message" and frame.direction == "out":
            _rules.describe_outgoing(frame)
            if frame.rpc_kind == "request":
                self._requests.sent(frame)
                self.peer.tasks.sent(frame, self.peer.server_capabilities)
                if frame.method == "resources/subscribe":
                    _shapes.remember_subscription(frame.message, self.peer.subscribed)
            elif frame.rpc_kind in ("result", "error"):
                self._serving.answered(frame)
        elif frame.kind == "exit":
            self.exit_code = frame.transport.get("stdio", {}).get("returncode")
        self._publish(frame)
        return frame

    def receive(self, frame: Frame) -> None:
        # Verdicts first, then the frame is published, then what it asks for is done.
        outcomes = _rules.check_frame(frame, self.peer, self._requests)
        self.record(frame)
        for event in self.peer.tasks.drain(frame.seq):
            self._publish(event)
        for outcome in outcomes:
            self._carry_out(outcome, frame)

    def _carry_out(self, outcome: _rules.Outcome, frame: Frame) -> None:
        frame_seq = frame.seq
        if isinstance(outcome, _rules.Answered):
            outcome.outgoing.reply_seq, outcome.outgoing.reply = frame_seq, frame
            if outcome.error is not None:
                self._requests.settle(outcome.outgoing, error=outcome.error)
            else:
                self._requests.settle(outcome.outgoing, result=outcome.result)
        elif isinstance(outcome, _rules.ServerRequest):
            self._serving.serve(outcome.request_id, outcome.method, outcome.params, frame_seq)
        elif isinstance(outcome, _rules.ServerCancelled):
            self._serving.withdraw(outcome.request_id)
        elif isinstance(outcome, _rules.InvalidRequest):
            self._serving.invalid(outcome.request_id, outcome.message, frame_seq, frame.method)
        else:
            outcome.progress.frame_seq = frame_seq
            if self.options.reset_timeout_on_progress:
                self._requests.restart_idle_clock(outcome.outgoing)
            self._publish(outcome.progress)
            if outcome.outgoing.on_progress is not None:
                outcome.outgoing.on_progress(outcome.progress)

    def requests_failed(self, request_ids: list[int | str], error: Exception) -> None:
        self._requests.fail(request_ids, error)

    def is_pending(self, request_id: int | str) -> bool:
        return request_id in self._requests.pending

    def connection_lost(self, error: Exception) -> None:
        if isinstance(error, ConnectionClosed) and error.exit_code is not None:
            self.exit_code = error.exit_code
        self._fail_everything(error)
        if isinstance(error, SessionExpired):
            # The transport still works: the person may re-initialize (see ``reinitialize``).
            self.peer.initialized_sent = False
            self._set_state("expired", str(error))
            return
        if self.state not in ("closing", "closed"):
            self._set_state("failed", str(error))
            self._closed.set()

    def param_headers(self, message: dict[str, Any]) -> dict[str, str]:
        """The Mcp-Param-* headers of a tools/call, from the tool's last listing (none if never listed)."""
        params = message.get("params")
        if message.get("method") != "tools/call" or not isinstance(params, dict):
            return {}
        mapping = self.peer.tool_headers.get(params.get("name"))  # type: ignore[arg-type]
        return _xheaders.param_headers(mapping, params.get("arguments")) if mapping else {}

    @contextlib.contextmanager
    def clocks_held(self) -> Iterator[None]:
        """Stop the requests' clocks while a person acts for the connection: a request waiting on an
        authorization in the browser must not time out meanwhile."""
        self._requests.pause_clocks()
        try:
            yield
        finally:
            self._requests.resume_clocks()

    # --- requests ------------------------------------------------------------------------

    async def start_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None | EllipsisType = ...,
        max_total_timeout: float | None | EllipsisType = ...,
        progress: bool | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> RequestHandle:
        """Send a request and return its handle at once; ``...`` means the session's default timeout.

        In stateless mode, an ``input_required`` answer to tools/call, prompts/get or resources/read is
        satisfied (sampling and elicitation through ``PendingRequest``, roots from ``session.roots``) and
        the request retried with the answers; the handle resolves with the final result.
        """
        options = RequestOptions(timeout, max_total_timeout, progress, on_progress)
        if method == "tools/call" and not self.peer.tools_learned:
            await self._learn_tools_first()
        outgoing = await self._send_leg(method, params, options)
        handle = RequestHandle(outgoing, self._abandon)
        if self.mode == "stateless" and method in INPUT_REQUIRED_METHODS and not outgoing.future.done():
            handle.follow(self._spawn(self._inputs.drive(handle, method, params, options)))
        return handle

    async def _send_leg(
        self, method: str, params: dict[str, Any] | None, options: RequestOptions, note: str | None = None
    ) -> Outgoing:
        """Send one request (a whole request, or one leg of an input-required exchange)."""
        params = self.peer.stamp(dict(params) if params is not None else None)
        outgoing, message = self._requests.open(method, params, options, note)
        try:
            await self.transport.send(encode(message), message)
        except EngineError as exc:
            self._requests.fail([outgoing.id], exc)
        except Exception as exc:
            self._requests.fail([outgoing.id], ConnectionClosed(f"sending failed: {exc}"))
        finally:
            self._requests.notes.pop(outgoing.id, None)
        return outgoing

    async def request(
        self, method: str, params: dict[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        """Send a request and wait for its result; a JSON-RPC error raises ``McpError``."""
        handle = await self.start_request(method, params, **options)
        try:
            return await handle
        except asyncio.CancelledError:
            # The caller gave up (its task was cancelled): tell the server too.
            if not handle.done:
                with contextlib.suppress(Exception):
                    await asyncio.shield(handle.cancel("cancelled"))
            raise

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.send_notification(method, params)

    async def send_notification(self, method: str, params: dict[str, Any] | None = None) -> Frame:
        """Send a notification (no id, no answer) and return its recorded frame."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return await self.transport.send(encode(message), message)

    async def _send(self, message: dict[str, Any]) -> None:
        await self.transport.send(encode(message), message)

    async def _abandon(self, outgoing: Outgoing, error: EngineError, reason: str) -> None:
        """Give up on a request: fail it locally and tell the server with notifications/cancelled."""
        if not self._requests.give_up(outgoing, error):
            return
        if outgoing.method not in UNCANCELLABLE:  # the spec forbids cancelling initialize and server/discover
            with contextlib.suppress(EngineError):
                await self.notify("notifications/cancelled", {"requestId": outgoing.id, "reason": reason})

    def _on_timeout(self, outgoing: Outgoing, error: RequestTimeout, reason: str) -> None:
        self._spawn(self._abandon(outgoing, error, reason))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # --- server→client requests ---------------------------------------------------------

    @property
    def waiting(self) -> list[str]:
        """Keys of the server→client requests waiting for a person, oldest first."""
        return self._serving.waiting

    @property
    def served_tasks(self) -> dict[str, ServedTask]:
        """2025-11-25: the tasks the client runs for the server's task-augmented requests, by id."""
        return self._serving.tasks.tasks

    def respond(self, key: str, result: dict[str, Any], *, note: str | None = None) -> None:
        """Answer a pending server→client request with ``result``."""
        self._serving.respond(key, result, note=note)

    def reject(
        self, key: str, code: int = -1, message: str = "User rejected the request", *, note: str | None = None
    ) -> None:
        """Refuse a pending server→client request with a JSON-RPC error (-1: the user said no)."""
        self._serving.reject(key, code, message, note=note)

    # --- lifecycle ----------------------------------------------------------------------

    def _set_state(self, state: str, note: str = "") -> None:
        self.record(self.peer.enter(state, note))

    async def open(self) -> None:
        """Start the transport (spawn the process or prepare the HTTP client)."""
        self._set_state("connecting", f"opening {self.transport.name} transport")
        try:
            await self.transport.open(self)
        except BaseException as exc:
            self._set_state("failed", str(exc))
            self._closed.set()
            raise

    async def initialize(self) -> dict[str, Any]:
        """Connect in the options' mode: the handshake, server/discover (stateless), or auto.

        ``auto`` probes server/discover and falls back to initialize when the server shows it does not
        speak the stateless revision; the ``state`` frames say which mode was chosen and why.
        """
        result = await _negotiation.initialize(self)
        self._listen_if_asked()
        return result

    async def discover(self, *, timeout: float | None | EllipsisType = ...) -> dict[str, Any]:
        """Connect statelessly: server/discover, then every request carries the protocol in ``_meta``.

        Fills ``protocol_version``, ``server_info`` (the result's ``_meta`` serverInfo),
        ``server_capabilities`` and ``instructions``; a -32022 answer naming a revision we speak is
        probed once more at that revision.
        """
        result = await _negotiation.discover(self, timeout=timeout)
        self._listen_if_asked()
        return result

    async def reinitialize(self) -> dict[str, Any]:
        """Start a new HTTP session after the server expired the old one."""
        result = await _negotiation.reinitialize(self)
        self._listen_if_asked()
        return result

    async def __aenter__(self) -> ClientSession:
        await self.open()
        try:
            await self.initialize()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Shut down: withdraw what waits, close the transport, fail what is still in flight."""
        if self.state in ("closing", "closed"):
            return
        was_failed = self.state == "failed"
        self.peer.state = "closing"
        if not was_failed:
            self._set_state("closing", "closing the connection")
        await self._serving.stop()
        try:
            await self.transport.close()
        finally:
            self._fail_everything(ConnectionClosed("the session was closed", exit_code=self.exit_code))
            for task in list(self._background):
                task.cancel()
            self._set_state(
                "closed", "closed" + (f" (exit code {self.exit_code})" if self.exit_code is not None else "")
            )
            self._closed.set()

    def _fail_everything(self, error: Exception) -> None:
        self._requests.fail_all(error)
        self._serving.fail_all(error)

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # --- the client's methods ------------------------------------------------------------

    async def ping(self) -> float:
        """Ping the server; return the round trip in milliseconds.

        The stateless revision has no ping: there, server/discover (which every server must answer)
        stands in for it.
        """
        started = time.perf_counter()
        await self.request("server/discover" if self.mode == "stateless" else "ping", progress=False)
        return (time.perf_counter() - started) * 1000

    async def list_page(self, method: str, cursor: str | None = None, **options: Any) -> dict[str, Any]:
        return await self.request(method, {"cursor": cursor} if cursor is not None else None, **options)

    async def list_all(self, method: str, key: str, **options: Any) -> list[Any]:
        """Follow ``nextCursor`` through every page of a list method and join the ``key`` arrays."""
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = await self.list_page(method, cursor, **options)
            items.extend(page.get(key) or [])
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return items
            if cursor in seen:
                raise EngineError(f"{method} returned cursor {cursor!r} twice; stopping")
            seen.add(cursor)

    async def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.list_page("tools/list", cursor)

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *,
        task: dict[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Call a tool; with ``task={"ttl": ms}`` (or ``{}``) as a task: the result is a CreateTaskResult."""
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if task is not None:
            params["task"] = task
        return await self.request("tools/call", params, **options)

    # --- tasks (2025-11-25, see _tasks) ---------------------------------------------------

    @property
    def tasks(self) -> dict[str, Task]:
        """Every task the session has seen (created, listed, notified), by id, as last reported."""
        return self.peer.tasks.known

    async def get_task(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/get", {"taskId": task_id})

    async def task_result(self, task_id: str, **options: Any) -> dict[str, Any]:
        """tasks/result: blocks until the task ends; returns the underlying request's result."""
        return await self.request("tasks/result", {"taskId": task_id}, **options)

    async def list_tasks(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.list_page("tasks/list", cursor)

    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        return await self.request("tasks/cancel", {"taskId": task_id})

    async def wait_task(self, task_id: str, statuses: tuple[str, ...] = ()) -> Task:
        """Poll tasks/get at the task's pollInterval until it ends or needs input (or ``statuses``)."""
        return await _tasks.wait_for_status(self, task_id, statuses or (*_tasks.TERMINAL, "input_required"))

    async def tool_problem(self, name: str) -> str | None:
        """Why a conforming client must not call tool ``name`` (invalid x-mcp-header annotations), or
        ``None``; learned from the listing made before the first call (stateless HTTP only)."""
        if not self.peer.tools_learned:
            await self._learn_tools_first()
        return self.peer.dropped_tools.get(name)

    async def _learn_tools_first(self) -> None:
        """List the tools once before the first call: stateless HTTP, to learn their Mcp-Param headers;
        with ``learn_tools``, to learn their output schemas."""
        self.peer.tools_learned = True
        headers = self.mode == "stateless" and self.transport.name == "streamable-http"
        if not (headers or self.options.learn_tools) or "tools" not in self.server_capabilities:
            return
        why = (
            "stateless HTTP: listing the tools before the first call, to learn which arguments "
            "a call mirrors into Mcp-Param-* headers"
            if headers
            else "listing the tools before the first call, to learn the output schemas its result is held to"
        )
        self.record(Frame("state", "local", transport={"state": "learn-tools"}, note=why))
        with contextlib.suppress(EngineError):
            await self.list_all("tools/list", "tools", progress=False)

    async def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.list_page("resources/list", cursor)

    async def list_resource_templates(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.list_page("resources/templates/list", cursor)

    async def read_resource(self, uri: str, **options: Any) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri}, **options)

    async def subscribe_resource(self, uri: str) -> dict[str, Any]:
        """Ask for a resource's updates: resources/subscribe, or in stateless mode a new listen stream."""
        if self.mode == "stateless":
            await self.listen([*self.subscribed_uris, uri])
            return {}
        return await self.request("resources/subscribe", {"uri": uri})

    async def unsubscribe_resource(self, uri: str) -> dict[str, Any]:
        if self.mode == "stateless":
            await self.listen([u for u in self.subscribed_uris if u != uri])
            return {}
        return await self.request("resources/unsubscribe", {"uri": uri})

    async def list_prompts(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.list_page("prompts/list", cursor)

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None, **options: Any
    ) -> dict[str, Any]:
        return await self.request("prompts/get", {"name": name, "arguments": arguments or {}}, **options)

    async def complete(
        self, ref: dict[str, Any], argument: dict[str, str], context: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"ref": ref, "argument": argument}
        if context is not None:
            params["context"] = context
        return await self.request("completion/complete", params)

    async def set_logging_level(self, level: str) -> dict[str, Any]:
        """Ask for logs at ``level``: logging/setLevel, or, in stateless mode (which dropped that
        request), the ``io.modelcontextprotocol/logLevel`` every later request carries in ``_meta``."""
        if self.mode != "stateless":
            return await self.request("logging/setLevel", {"level": level})
        self.peer.log_level = level
        self.record(
            Frame(
                "state",
                "local",
                transport={"state": "log-level"},
                note=f"stateless: no logging/setLevel in {self.protocol_version}; "
                f"later requests carry {META_LOG_LEVEL}={level}",
            )
        )
        return {}

    async def set_roots(self, roots: list[dict[str, Any]]) -> None:
        """Replace the roots; tell the server when the listChanged capability was declared."""
        self.roots = list(roots)
        if self.client_capabilities.get("roots", {}).get("listChanged"):
            await self.notify("notifications/roots/list_changed")

    @property
    def skills(self) -> Skills:
        """The skills extension (io.modelcontextprotocol/skills): list skills, load and verify their files."""
        from ._skills import Skills

        return Skills(self)

    # --- subscriptions/listen (stateless) -----------------------------------------------

    @property
    def subscribed_uris(self) -> list[str]:
        """The resources whose updates the session asked for (stateless: on its current listen stream)."""
        current = self.listens.current
        return list(current.uris) if current is not None else []

    async def listen(self, uris: list[str] | None = None) -> dict[str, Any]:
        """Stateless: open a subscriptions/listen stream for list changes and updates of ``uris``.

        ``None`` keeps the URIs of the current stream. The new stream replaces the current one only
        once the server has acknowledged it, so no notification falls between the two; returns what
        the server agreed to honour. Raises ``McpError`` if the server refuses, ``RequestTimeout`` if
        it does not acknowledge within the session's timeout (30 s when the session has none).
        """
        if self.mode != "stateless":
            raise EngineError("subscriptions/listen belongs to the stateless revision (2026-07-28)")
        if uris is None:
            uris = self.subscribed_uris
        requested = _listen.wanted(self.server_capabilities, uris)
        # The id start_request is about to take: the acknowledgement may arrive before it returns.
        request_id = self._requests.next_id
        stream = self.listens.open(request_id, requested)
        stream.handle = handle = await self.start_request(
            _listen.LISTEN,
            {"notifications": requested},
            timeout=None,
            max_total_timeout=None,
            progress=False,
        )
        assert handle.id == request_id, "subscriptions/listen took an unexpected request id"
        waited = self.options.timeout or LISTEN_ACK_TIMEOUT  # never wait for ever, even with no timeout
        await wait_first(self.clock, {stream.ack, handle.future}, waited)
        if not stream.ack.done() or stream.ack.cancelled():
            if handle.done:
                self.listens.forget(stream, "ended before it was acknowledged")
                await handle  # a refusal raises McpError here
                raise EngineError("the server ended subscriptions/listen before acknowledging it")
            self.listens.forget(stream, "not acknowledged")
            await handle.cancel("subscriptions/listen was not acknowledged")
            raise RequestTimeout(f"subscriptions/listen was not acknowledged within {waited:g} s")
        old, self.listens.current = self.listens.current, stream
        handle.future.add_done_callback(lambda result: self._listen_ended(stream, result))
        if old is not None:
            self.listens.forget(old, "replaced")
            if old.handle is not None and not old.handle.done:
                await old.handle.cancel(f"replaced by subscriptions/listen {request_id!r}")
        return stream.ack.result()

    def _listen_ended(self, stream: ListenStream, result: asyncio.Future[Any]) -> None:
        frame = self.listens.ended(stream, result, closing=self.state in ("closing", "closed"))
        if frame is not None:
            self.record(frame)

    def _listen_if_asked(self) -> None:
        """Open a listen stream right after a stateless connection, when the options ask for one."""
        if self.mode == "stateless" and self.options.listen:
            self._spawn(self._listen_after_discover())

    async def _listen_after_discover(self) -> None:
        try:
            await self.listen([])
        except Exception as exc:
            self.record(
                Frame(
                    "state",
                    "local",
                    transport={"state": "listen-failed"},
                    note=f"no subscriptions/listen stream: {exc}",
                )
            )
