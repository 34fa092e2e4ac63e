"""The client session: a JSON-RPC peer over one transport, with the MCP lifecycle on top."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from types import EllipsisType, ModuleType
from typing import Any

from . import _listen, _xheaders
from ._errors import (
    ConnectionClosed,
    EngineError,
    HttpStatusError,
    InputRequiredRoundsExceeded,
    McpError,
    RequestCancelled,
    RequestTimeout,
    SessionExpired,
    TransportError,
    VersionNegotiationFailed,
    error_name,
)
from ._frames import Event, Frame, PendingRequest, PendingResolved, Progress
from ._listen import ListenStream
from ._options import HANDSHAKE_VERSIONS, MODERN_VERSIONS, ClientOptions
from ._transport import Transport

__all__ = ["ClientSession", "RequestHandle", "ServerRequestHandler"]

Subscriber = Callable[[Event], None]
ServerRequestHandler = Callable[[PendingRequest], Awaitable[dict[str, Any]]]

# Server→client requests that wait for a person; request clocks pause while one is open.
HUMAN_METHODS = frozenset({"sampling/createMessage", "elicitation/create"})
# Methods whose requests carry a progress token unless the caller says otherwise.
PROGRESS_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
# What a server may send before the client's `initialized` notification.
EARLY_SERVER_METHODS = frozenset({"ping", "notifications/message", "notifications/progress"})
CAPABILITY_OF = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

# The stateless revision (2026-07-28): protocol metadata every request carries in params._meta.
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
# Requests a stateless server may answer with an input_required result (mcp-types INPUT_REQUIRED_METHODS).
INPUT_REQUIRED_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
# Requests the spec forbids cancelling.
UNCANCELLABLE = frozenset({"initialize", "server/discover"})
# How long subscriptions/listen waits for its acknowledgement when the session has no timeout.
LISTEN_ACK_TIMEOUT = 30.0
# Error codes the stateless revision answers with HTTP 400.
STATELESS_400_CODES = frozenset({-32020, -32021, -32022})


class _Outgoing:
    """A request in flight: its future, its clocks and its progress."""

    __slots__ = (
        "frame_seq",
        "future",
        "id",
        "idle_deadline",
        "idle_timeout",
        "last_progress",
        "method",
        "on_progress",
        "paused_at",
        "reply_seq",
        "sent_mono",
        "timer",
        "total_deadline",
    )

    def __init__(self, request_id: int, method: str, future: asyncio.Future[Any]) -> None:
        self.id = request_id
        self.method = method
        self.future = future
        self.frame_seq: int | None = None
        self.sent_mono = time.monotonic()
        self.idle_timeout: float | None = None
        self.idle_deadline: float | None = None
        self.total_deadline: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.paused_at: float | None = None
        self.last_progress: float | None = None
        self.on_progress: Callable[[Progress], None] | None = None
        self.reply_seq: int | None = None


class RequestHandle:
    """A request in flight: await it for the result, or cancel it.

    In stateless mode a request a server answers with ``input_required`` takes several legs (the
    original, then one retry per round); the handle follows them and resolves with the final result.
    """

    def __init__(self, session: ClientSession, outgoing: _Outgoing) -> None:
        self._session = session
        self._outgoing = outgoing
        self._id = outgoing.id
        self._result: asyncio.Future[Any] = outgoing.future
        self._driver: asyncio.Task[None] | None = None
        self._cancel_reason: str | None = None

    @property
    def id(self) -> int:
        """The id of the first leg (the request the caller made)."""
        return self._id

    @property
    def current_id(self) -> int:
        """The id of the leg now in flight (a retry after input was required, or the first)."""
        return self._outgoing.id

    @property
    def done(self) -> bool:
        return self._result.done()

    async def cancel(self, reason: str = "cancelled by the user") -> None:
        await self._give_up(RequestCancelled(reason), reason)

    async def _give_up(self, error: EngineError, reason: str) -> None:
        if self._driver is not None and not self._driver.done():
            self._cancel_reason = reason
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)
            # Cancelled before it ever ran: the leg is still in flight.
            await self._session._abandon(self._outgoing, error, reason)
            ClientSession._fail_handle(self, error)
            return
        await self._session._abandon(self._outgoing, error, reason)

    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        return self._result.__await__()


class ClientSession:
    """One MCP connection: send requests, answer the server, and publish every frame in order.

    Use ``async with ClientSession(transport, options) as session`` to open and initialize, or call
    ``open()`` and ``initialize()`` yourself. All methods must run in the event loop that opened it.
    """

    def __init__(self, transport: Transport, options: ClientOptions | None = None) -> None:
        self.transport = transport
        self.options = options or ClientOptions()
        self.state = "idle"
        self.protocol_version: str | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.server_info: dict[str, Any] = {}
        self.instructions: str | None = None
        self.client_capabilities: dict[str, Any] = {}
        self.roots: list[dict[str, Any]] = list(self.options.roots)
        self.handlers: dict[str, ServerRequestHandler] = {}
        self.exit_code: int | None = None
        self._seq = itertools.count(1)
        self._ids = itertools.count(self.options.first_request_id)
        self._issued = self.options.first_request_id
        self._subscribers: list[Subscriber] = []
        self._pending: dict[int | str, _Outgoing] = {}
        self._progress: dict[int | str, _Outgoing] = {}
        self._abandoned: dict[int | str, str] = {}
        self._server_ids: set[int | str] = set()
        self._incoming: dict[int | str, asyncio.Task[None]] = {}
        self._waiting: dict[str, tuple[int | str, asyncio.Future[dict[str, Any]]]] = {}
        self._initialized_sent = False
        self._closed = asyncio.Event()
        self._schema: ModuleType | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._server_ids_frames: dict[int | str, tuple[int, str]] = {}
        self._notes: dict[int | str, str] = {}
        self._out_notes: dict[int | str, str] = {}
        self.mode: str | None = None
        """``handshake`` or ``stateless`` once connected (``None`` before)."""
        self.log_level: str | None = self.options.log_level
        """Stateless mode: the log level each request asks for in ``_meta``."""
        self.discover_result: dict[str, Any] | None = None
        self._stamp_version: str | None = None
        self.listens = _listen.Listens()
        """Stateless mode: the subscriptions/listen streams, and the one now carrying change notifications."""
        self._tool_headers: dict[str, dict[tuple[str, ...], str]] = {}
        """Stateless mode: per tool, the arguments its calls mirror into Mcp-Param-* headers."""
        self._tools_learned = False

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
            self._describe_outgoing(frame)
        elif frame.kind == "exit":
            self.exit_code = frame.transport.get("stdio", {}).get("returncode")
        self._publish(frame)
        return frame

    def receive(self, frame: Frame) -> None:
        try:
            message = json.loads(frame.raw)
        except UnicodeDecodeError as exc:
            frame.parse_error = f"invalid UTF-8 at byte {exc.start}"
            frame.rpc_kind = "invalid"
            frame.flag("invalid-utf8", "error", "message is not valid UTF-8")
            self.record(frame)
            return
        except ValueError as exc:
            frame.parse_error = str(exc)
            frame.rpc_kind = "invalid"
            frame.flag("invalid-json", "error", f"not JSON: {exc}")
            self.record(frame)
            return
        frame.message = message
        if isinstance(message, list):
            frame.rpc_kind = "batch"
            if self.protocol_version != "2025-03-26":
                frame.flag(
                    "batch",
                    "warning",
                    f"JSON-RPC batches belong to protocol 2025-03-26 only (this is {self.protocol_version})",
                )
            if not message:
                frame.flag("empty-batch", "error", "an empty batch is an invalid request")
            actions = [self._check(item, frame, f"[{i}] ") for i, item in enumerate(message)]
        else:
            actions = [self._check(message, frame, "")]
        self.record(frame)
        for action in actions:
            if action is not None:
                action()

    def requests_failed(self, request_ids: list[int | str], error: Exception) -> None:
        for request_id in request_ids:
            outgoing = self._pending.pop(request_id, None)
            if outgoing is not None:
                self._settle(outgoing, error=error)

    def is_pending(self, request_id: int | str) -> bool:
        return request_id in self._pending

    def connection_lost(self, error: Exception) -> None:
        if isinstance(error, ConnectionClosed) and error.exit_code is not None:
            self.exit_code = error.exit_code
        self._fail_everything(error)
        if isinstance(error, SessionExpired):
            # The transport still works: the person may re-initialize (see ``reinitialize``).
            self._initialized_sent = False
            self._set_state("expired", str(error))
            return
        if self.state not in ("closing", "closed"):
            self._set_state("failed", str(error))
            self._closed.set()

    # --- checking and dispatching what arrives -----------------------------------------

    def _check(self, message: Any, frame: Frame, at: str) -> Callable[[], None] | None:
        """Attach verdicts for one message to ``frame``; return what to do once it is recorded."""
        if not isinstance(message, dict):
            frame.rpc_kind = frame.rpc_kind or "invalid"
            frame.flag("not-jsonrpc", "error", f"{at}not a JSON-RPC message object")
            return None
        if message.get("jsonrpc") != "2.0":
            frame.flag("jsonrpc-version", "error", f'{at}"jsonrpc" must be "2.0"')
        method = message.get("method")
        has_id = "id" in message
        if isinstance(method, str):
            if frame.rpc_kind != "batch":
                frame.method = method
            if has_id and not method.startswith("notifications/"):
                return self._check_request(message, method, frame, at)
            if has_id:
                frame.flag("notification-with-id", "error", f"{at}notification {method} carries an id")
            return self._check_notification(message, method, frame, at)
        if method is not None:
            frame.flag("invalid-method", "error", f"{at}method must be a string")
            return None
        if has_id and ("result" in message or "error" in message):
            return self._check_response(message, frame, at)
        frame.rpc_kind = frame.rpc_kind or "invalid"
        frame.flag("not-jsonrpc", "error", f"{at}neither a request, a notification nor a response")
        return None

    def _check_response(self, message: dict[str, Any], frame: Frame, at: str) -> Callable[[], None] | None:
        request_id = message["id"]
        is_error = "error" in message
        if frame.rpc_kind != "batch":
            frame.rpc_kind = "error" if is_error else "result"
            frame.rpc_id = request_id
        if "result" in message and is_error:
            frame.flag("result-and-error", "error", f"{at}response carries both result and error")
        if is_error:
            error = message["error"]
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                frame.flag("invalid-error", "error", f"{at}error must be an object with an integer code")
            else:
                if not isinstance(error.get("message"), str):
                    frame.flag("invalid-error", "error", f"{at}error must have a string message")
                self._check_error_code(error, frame, at)
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            if request_id is None and is_error:
                frame.note = "error response without an id (the server could not read the request)"
                return None
            frame.flag("invalid-id", "error", f"{at}response id must be a string or an integer")
            return None
        outgoing = self._pending.pop(request_id, None)
        if outgoing is None:
            if request_id in self._abandoned:
                frame.note = f"late response to a request that was {self._abandoned.pop(request_id)}"
                frame.flag("late-response", "info", f"{at}response arrived after the request was given up")
            elif isinstance(request_id, int) and 0 <= request_id < self._issued:
                # Ids are issued in order: one below the next id, neither pending nor given up, was answered.
                frame.flag("duplicate-response", "error", f"{at}a second response to request {request_id!r}")
            else:
                frame.flag("unknown-id", "error", f"{at}response to unknown request id {request_id!r}")
            return None
        if frame.rpc_kind != "batch":
            frame.pair_seq = outgoing.frame_seq
            frame.method = outgoing.method
            frame.latency_ms = round((frame.mono - outgoing.sent_mono) * 1000, 3)
        if not is_error and (self.mode == "stateless" or outgoing.method == "server/discover"):
            self._check_stateless_result(outgoing.method, message["result"], frame, at)
        if not is_error and outgoing.method == "tools/list" and self.mode == "stateless":
            self._learn_tool_headers(message["result"], frame, at)
        if not is_error and self.options.validate and self.protocol_version:
            frame.verdicts.extend(
                self._schema_module().check_result(outgoing.method, self.protocol_version, message["result"])
            )
        elif not is_error and outgoing.method == "server/discover" and self.options.validate:
            probed = self._stamp_version or self.options.modern_version()
            frame.verdicts.extend(
                self._schema_module().check_result("server/discover", probed, message["result"])
            )
        elif not is_error and outgoing.method == "initialize" and self.options.validate:
            version = (
                message["result"].get("protocolVersion") if isinstance(message["result"], dict) else None
            )
            if version in HANDSHAKE_VERSIONS:
                frame.verdicts.extend(
                    self._schema_module().check_result("initialize", version, message["result"])
                )

        def settle() -> None:
            if is_error:
                error = message["error"] if isinstance(message["error"], dict) else {}
                code = error.get("code")
                self._settle(
                    outgoing,
                    error=McpError(
                        code if isinstance(code, int) else 0, str(error.get("message", "")), error.get("data")
                    ),
                )
            else:
                result = message["result"]
                outgoing.reply_seq = frame.seq
                self._settle(outgoing, result=result if isinstance(result, dict) else {"result": result})

        return settle

    def _check_error_code(self, error: dict[str, Any], frame: Frame, at: str) -> None:
        """Name the error code on the frame; hold the stateless revision's error codes to its rules."""
        code = error["code"]
        name = error_name(code)
        if name and frame.note is None and frame.rpc_kind != "batch":
            frame.note = f"{name} ({code})"
        if code in STATELESS_400_CODES:
            status = frame.transport.get("http", {}).get("status")
            if isinstance(status, int) and status != 400:
                frame.flag(
                    "error-status",
                    "warning",
                    f"{at}error {code} ({name}) must come with HTTP 400, not {status}",
                )
        if code == -32020:
            frame.flag(
                "header-mismatch",
                "warning",
                f"{at}the server says the HTTP headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) "
                f"do not match the body: {error.get('message', '')}",
            )
        elif code == -32022:
            data = error.get("data")
            supported = data.get("supported") if isinstance(data, dict) else None
            if not isinstance(supported, list):
                frame.flag(
                    "invalid-error",
                    "error",
                    f"{at}error -32022 must list the supported versions in data.supported",
                )
            elif frame.rpc_kind != "batch":
                frame.note = f"{name} ({code}); the server supports {', '.join(map(str, supported))}"

    def _check_stateless_result(self, method: str, result: Any, frame: Frame, at: str) -> None:
        """Rules for results in the stateless revision: resultType, the serverInfo stamp, input_required."""
        if not isinstance(result, dict):
            return
        result_type = result.get("resultType")
        if result_type is None:
            frame.flag("result-type", "error", f"{at}a 2026-07-28 result must carry resultType")
        meta = result.get("_meta")
        if not isinstance(meta, dict) or META_SERVER_INFO not in meta:
            frame.flag(
                "server-info",
                "info",
                f"{at}the result has no _meta {META_SERVER_INFO!r} (servers SHOULD send it)",
            )
        if result_type != "input_required":
            return
        if method not in INPUT_REQUIRED_METHODS:
            frame.flag(
                "input-required",
                "error",
                f"{at}{method} may not answer input_required (only tools/call, prompts/get, resources/read)",
            )
            return
        requests = result.get("inputRequests")
        if requests is None and result.get("requestState") is None:
            frame.flag("input-required", "error", f"{at}input_required needs inputRequests or requestState")
        if isinstance(requests, dict):
            asked = ", ".join(
                f"{key}: {item.get('method') if isinstance(item, dict) else '?'}"
                for key, item in requests.items()
            )
            if frame.rpc_kind != "batch":
                frame.note = f"input required ({asked or 'state only'}); the client answers and retries"

    def _learn_tool_headers(self, result: Any, frame: Frame, at: str) -> None:
        """Note which arguments of each listed tool go into Mcp-Param-* headers; flag bad annotations."""
        self._tools_learned = True
        tools = result.get("tools") if isinstance(result, dict) else None
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            name, schema = tool["name"], tool.get("inputSchema")
            problem = _xheaders.problem(schema)
            if problem is not None:
                frame.flag(
                    "x-mcp-header",
                    "error",
                    f"{at}tool {name!r}: {problem}; a conforming client drops this tool "
                    "(the inspector keeps it and sends no Mcp-Param headers for it)",
                )
                self._tool_headers.pop(name, None)
                continue
            mapping = _xheaders.header_map(schema)
            if mapping:
                self._tool_headers[name] = mapping
            else:
                self._tool_headers.pop(name, None)

    async def _learn_tools_first(self) -> None:
        """Stateless HTTP: list the tools once before the first call, to learn their Mcp-Param headers."""
        self._tools_learned = True
        if self.transport.name != "streamable-http" or "tools" not in self.server_capabilities:
            return
        self.record(
            Frame(
                "state",
                "local",
                transport={"state": "learn-tools"},
                note="stateless HTTP: listing the tools before the first call, to learn which arguments "
                "a call mirrors into Mcp-Param-* headers",
            )
        )
        with contextlib.suppress(EngineError):
            await self.list_all("tools/list", "tools", progress=False)

    def param_headers(self, message: dict[str, Any]) -> dict[str, str]:
        """The Mcp-Param-* headers of a tools/call, from the tool's last listing (none if never listed)."""
        params = message.get("params")
        if message.get("method") != "tools/call" or not isinstance(params, dict):
            return {}
        mapping = self._tool_headers.get(params.get("name"))  # type: ignore[arg-type]
        return _xheaders.param_headers(mapping, params.get("arguments")) if mapping else {}

    def _check_request(
        self, message: dict[str, Any], method: str, frame: Frame, at: str
    ) -> Callable[[], None] | None:
        request_id = message["id"]
        if frame.rpc_kind != "batch":
            frame.rpc_kind = "request"
            frame.rpc_id = request_id
        if not isinstance(request_id, int | str) or isinstance(request_id, bool):
            frame.flag("invalid-id", "error", f"{at}request id must be a string or an integer, never null")
            return None
        if request_id in self._server_ids:
            frame.flag("id-reuse", "error", f"{at}the server reused request id {request_id!r}")
        self._server_ids.add(request_id)
        capability = CAPABILITY_OF.get(method)
        if capability and capability not in self.client_capabilities:
            frame.flag(
                "undeclared-capability",
                "error",
                f"{at}{method} needs the client capability {capability!r}, which this client did not declare",
            )
        if method == "elicitation/create":
            mode = (message.get("params") or {}).get("mode", "form")
            modes = self.client_capabilities.get("elicitation")
            if isinstance(modes, dict) and modes and mode not in modes:
                frame.flag(
                    "undeclared-capability", "error", f"{at}elicitation mode {mode!r} was not declared"
                )
        if not self._initialized_sent and method not in EARLY_SERVER_METHODS:
            frame.flag("before-initialized", "error", f"{at}{method} sent before the client's initialized")
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            frame.flag("invalid-params", "error", f"{at}params must be an object")
            params = None
        if self.options.validate and self.protocol_version:
            frame.verdicts.extend(
                self._schema_module().check_server_request(method, self.protocol_version, params)
            )
        return lambda: self._serve(request_id, method, params or {}, frame.seq)

    def _check_notification(
        self, message: dict[str, Any], method: str, frame: Frame, at: str
    ) -> Callable[[], None] | None:
        if frame.rpc_kind != "batch":
            frame.rpc_kind = "notification"
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            frame.flag("invalid-params", "error", f"{at}params must be an object")
            params = None
        params = params or {}
        if self.state == "initializing" and method not in EARLY_SERVER_METHODS:
            frame.flag("before-initialized", "error", f"{at}{method} sent before initialization finished")
        if self.options.validate and self.protocol_version:
            frame.verdicts.extend(
                self._schema_module().check_server_notification(method, self.protocol_version, params or None)
            )
        if method == "notifications/message" and self.mode == "stateless" and self.log_level is None:
            frame.flag(
                "unrequested-log",
                "warning",
                f"{at}a log message although no request asked for one ({META_LOG_LEVEL} was not sent)",
            )
        if self.mode == "stateless" and (method in _listen.LISTEN_METHODS or method == _listen.ACKNOWLEDGED):
            self.listens.check(method, params, frame, at)
        if method == "notifications/progress":
            return self._check_progress(params, frame, at)
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            task = self._incoming.get(request_id) if isinstance(request_id, int | str) else None
            if task is None:
                frame.note = "cancels a request that is not in flight"
                return None

            def withdraw() -> None:
                task.cancel()

            return withdraw
        return None

    def _check_progress(self, params: dict[str, Any], frame: Frame, at: str) -> Callable[[], None] | None:
        token = params.get("progressToken")
        progress = params.get("progress")
        outgoing = self._progress.get(token) if isinstance(token, int | str) else None
        if outgoing is None:
            frame.flag(
                "unknown-progress-token", "error", f"{at}progress for unknown or finished token {token!r}"
            )
            return None
        if not isinstance(progress, int | float):
            frame.flag("invalid-progress", "error", f"{at}progress must be a number")
            return None
        if outgoing.last_progress is not None and progress <= outgoing.last_progress:
            frame.flag(
                "progress-not-increasing",
                "error",
                f"{at}progress {progress} does not increase (last was {outgoing.last_progress})",
            )
        outgoing.last_progress = progress
        total = params.get("total")
        event = Progress(
            outgoing.id,
            float(progress),
            float(total) if isinstance(total, int | float) else None,
            params.get("message") if isinstance(params.get("message"), str) else None,
            0,
        )

        def report() -> None:
            event.frame_seq = frame.seq
            if self.options.reset_timeout_on_progress:
                self._restart_idle_clock(outgoing)
            self._publish(event)
            if outgoing.on_progress is not None:
                outgoing.on_progress(event)

        return report

    def _describe_outgoing(self, frame: Frame) -> None:
        message = frame.message
        if not isinstance(message, dict):
            frame.rpc_kind = "batch" if isinstance(message, list) else "invalid"
            return
        frame.method = message.get("method")
        frame.rpc_id = message.get("id")
        if frame.method is None:
            frame.rpc_kind = "error" if "error" in message else "result"
            for_request = (
                self._server_ids_frames.pop(frame.rpc_id, None) if frame.rpc_id is not None else None
            )
            if for_request is not None:
                frame.pair_seq, frame.method = for_request
                frame.latency_ms = None
            if frame.rpc_id in self._notes:
                frame.note = self._notes.pop(frame.rpc_id)
        elif frame.rpc_id is None:
            frame.rpc_kind = "notification"
        else:
            frame.rpc_kind = "request"
            outgoing = self._pending.get(frame.rpc_id)
            if outgoing is not None:
                outgoing.frame_seq = frame.seq
                outgoing.sent_mono = frame.mono
            if frame.rpc_id in self._out_notes:
                frame.note = self._out_notes.pop(frame.rpc_id)

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
        options: dict[str, Any] = {
            "timeout": timeout,
            "max_total_timeout": max_total_timeout,
            "progress": progress,
            "on_progress": on_progress,
        }
        if method == "tools/call" and not self._tools_learned and self.mode == "stateless":
            await self._learn_tools_first()
        outgoing = await self._send_request(method, params, **options)
        handle = RequestHandle(self, outgoing)
        if self.mode == "stateless" and method in INPUT_REQUIRED_METHODS and not outgoing.future.done():
            handle._result = asyncio.get_running_loop().create_future()
            handle._driver = asyncio.ensure_future(self._drive(handle, method, params, options))
            self._background.add(handle._driver)
            handle._driver.add_done_callback(self._background.discard)
            # A driver cancelled before it ran (the session closing) still fails the handle.
            handle._driver.add_done_callback(
                lambda _: self._fail_handle(handle, RequestCancelled(handle._cancel_reason or "cancelled"))
            )
        return handle

    def _stamp(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """Stateless mode: put the revision's protocol metadata into ``params._meta``."""
        if self._stamp_version is None:
            return params
        params = params or {}
        meta = dict(params.get("_meta") or {})
        meta[META_PROTOCOL_VERSION] = self._stamp_version
        meta[META_CLIENT_INFO] = self.options.client_info
        meta[META_CLIENT_CAPABILITIES] = self.client_capabilities
        if self.log_level is not None:
            meta.setdefault(META_LOG_LEVEL, self.log_level)
        params["_meta"] = meta
        return params

    async def _send_request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float | None | EllipsisType = ...,
        max_total_timeout: float | None | EllipsisType = ...,
        progress: bool | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        note: str | None = None,
    ) -> _Outgoing:
        request_id = next(self._ids)
        self._issued = request_id + 1
        loop = asyncio.get_running_loop()
        outgoing = _Outgoing(request_id, method, loop.create_future())
        outgoing.on_progress = on_progress
        params = self._stamp(dict(params) if params is not None else None)
        if note:
            self._out_notes[request_id] = note
        if progress or (progress is None and (on_progress is not None or method in PROGRESS_METHODS)):
            params = params or {}
            params["_meta"] = {**params.get("_meta", {}), "progressToken": request_id}
            self._progress[request_id] = outgoing
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self._pending[request_id] = outgoing
        idle = self.options.timeout if isinstance(timeout, EllipsisType) else timeout
        total = (
            self.options.max_total_timeout
            if isinstance(max_total_timeout, EllipsisType)
            else max_total_timeout
        )
        outgoing.idle_timeout = idle
        now = loop.time()
        outgoing.idle_deadline = now + idle if idle is not None else None
        outgoing.total_deadline = now + total if total is not None else None
        if self._waiting:
            outgoing.paused_at = now
        else:
            self._arm(outgoing)
        try:
            await self.transport.send(_dumps(message).encode(), message)
        except EngineError as exc:
            if self._pending.pop(request_id, None) is not None:
                self._settle(outgoing, error=exc)
        except Exception as exc:
            if self._pending.pop(request_id, None) is not None:
                self._settle(outgoing, error=ConnectionClosed(f"sending failed: {exc}"))
        finally:
            self._out_notes.pop(request_id, None)
        return outgoing

    async def _drive(
        self, handle: RequestHandle, method: str, params: dict[str, Any] | None, options: dict[str, Any]
    ) -> None:
        """Follow input_required answers: fulfil the embedded requests, retry, until a final result."""
        try:
            result = await asyncio.shield(handle._outgoing.future)
            rounds, delay = 0, 0.05
            while isinstance(result, dict) and result.get("resultType") == "input_required":
                rounds += 1
                if rounds > self.options.input_required_max_rounds:
                    raise InputRequiredRoundsExceeded(
                        f"{method} still required input after {self.options.input_required_max_rounds} rounds"
                    )
                requests = result.get("inputRequests")
                state = result.get("requestState")
                retry = {
                    k: v for k, v in (params or {}).items() if k not in ("inputResponses", "requestState")
                }
                if isinstance(requests, dict) and requests:
                    delay = 0.05
                    responses = await self._fulfil(requests, handle._outgoing.reply_seq or 0)
                    retry["inputResponses"] = responses
                    what = f"{len(responses)} input response{'s' if len(responses) != 1 else ''}"
                else:
                    # Only requestState: the server is working; ask again after a short, growing pause.
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 0.25)
                    what = "no input responses"
                if isinstance(state, str):
                    retry["requestState"] = state
                note = f"retry of request {handle.id!r} after input was required (round {rounds}, {what})"
                handle._outgoing = await self._send_request(method, retry, note=note, **options)
                result = await asyncio.shield(handle._outgoing.future)
        except asyncio.CancelledError:
            reason = handle._cancel_reason or "cancelled"
            if handle._outgoing.id in self._pending:
                await self._abandon(handle._outgoing, RequestCancelled(reason), reason)
            self._fail_handle(handle, RequestCancelled(reason))
        except BaseException as exc:
            self._fail_handle(handle, exc)
        else:
            if not handle._result.done():
                handle._result.set_result(result)

    @staticmethod
    def _fail_handle(handle: RequestHandle, error: BaseException) -> None:
        if not handle._result.done():
            handle._result.set_exception(error)
            handle._result.exception()

    async def _fulfil(self, requests: dict[str, Any], frame_seq: int) -> dict[str, Any]:
        """Answer the requests embedded in an input_required result, concurrently; the first refusal wins."""
        keys = list(requests)
        tasks = [asyncio.ensure_future(self._input_response(key, requests[key], frame_seq)) for key in keys]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return dict(zip(keys, answers, strict=True))

    async def _input_response(self, key: str, request: Any, frame_seq: int) -> dict[str, Any]:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise McpError(-32602, f"input request {key!r} is not a request object with a method")
        params = request.get("params")
        try:
            return await self._resolve(
                key,
                request["method"],
                params if isinstance(params, dict) else {},
                frame_seq,
                withdrawn="the request that needed this input was cancelled or refused elsewhere",
            )
        except McpError as exc:
            self.record(
                Frame(
                    "state",
                    "local",
                    transport={"state": "input-refused"},
                    note=f"input request {key!r} ({request['method']}) refused: {exc.message}; not retrying",
                )
            )
            raise

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
                    await asyncio.shield(handle._give_up(RequestCancelled("caller cancelled"), "cancelled"))
            raise

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.transport.send(_dumps(message).encode(), message)

    def _settle(
        self, outgoing: _Outgoing, *, result: dict[str, Any] | None = None, error: BaseException | None = None
    ) -> None:
        if outgoing.timer is not None:
            outgoing.timer.cancel()
            outgoing.timer = None
        self._progress.pop(outgoing.id, None)
        if outgoing.future.done():
            return
        if error is not None:
            outgoing.future.set_exception(error)
            # A caller that never awaits the handle must not produce "exception never retrieved".
            outgoing.future.exception()
        else:
            outgoing.future.set_result(result)

    async def _abandon(self, outgoing: _Outgoing, error: EngineError, reason: str) -> None:
        """Give up on a request: fail it locally and tell the server with notifications/cancelled."""
        if self._pending.pop(outgoing.id, None) is None:
            return
        self._abandoned[outgoing.id] = "timed out" if isinstance(error, RequestTimeout) else "cancelled"
        self._settle(outgoing, error=error)
        if outgoing.method not in UNCANCELLABLE:  # the spec forbids cancelling initialize and server/discover
            with contextlib.suppress(EngineError):
                await self.notify("notifications/cancelled", {"requestId": outgoing.id, "reason": reason})

    # --- clocks -----------------------------------------------------------------------

    def _arm(self, outgoing: _Outgoing) -> None:
        deadlines = [d for d in (outgoing.idle_deadline, outgoing.total_deadline) if d is not None]
        if outgoing.timer is not None:
            outgoing.timer.cancel()
            outgoing.timer = None
        if deadlines:
            outgoing.timer = asyncio.get_running_loop().call_at(min(deadlines), self._expire, outgoing)

    def _restart_idle_clock(self, outgoing: _Outgoing) -> None:
        if outgoing.idle_timeout is None or outgoing.paused_at is not None:
            return
        outgoing.idle_deadline = asyncio.get_running_loop().time() + outgoing.idle_timeout
        self._arm(outgoing)

    def _expire(self, outgoing: _Outgoing) -> None:
        outgoing.timer = None
        if outgoing.id not in self._pending:
            return
        now = asyncio.get_running_loop().time()
        which = (
            "its maximum total time" if outgoing.total_deadline and now >= outgoing.total_deadline else "time"
        )
        seconds = outgoing.idle_timeout
        reason = f"timed out ({which}{f', {seconds:g} s' if seconds is not None and which == 'time' else ''})"
        task = asyncio.ensure_future(
            self._abandon(outgoing, RequestTimeout(f"{outgoing.method} {reason}"), reason)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _pause_clocks(self) -> None:
        now = asyncio.get_running_loop().time()
        for outgoing in self._pending.values():
            if outgoing.paused_at is None:
                outgoing.paused_at = now
                if outgoing.timer is not None:
                    outgoing.timer.cancel()
                    outgoing.timer = None

    def _resume_clocks(self) -> None:
        now = asyncio.get_running_loop().time()
        for outgoing in self._pending.values():
            if outgoing.paused_at is not None:
                waited = now - outgoing.paused_at
                outgoing.paused_at = None
                if outgoing.idle_deadline is not None:
                    outgoing.idle_deadline += waited
                if outgoing.total_deadline is not None:
                    outgoing.total_deadline += waited
                self._arm(outgoing)

    # --- server→client requests ---------------------------------------------------------

    def _serve(self, request_id: int | str, method: str, params: dict[str, Any], frame_seq: int) -> None:
        self._server_ids_frames[request_id] = (frame_seq, method)
        if method == "ping" and method not in self.handlers:
            self._spawn(self._respond(request_id, result={}))
            return
        task = asyncio.ensure_future(self._answer(request_id, method, params, frame_seq))
        self._incoming[request_id] = task
        task.add_done_callback(lambda _: self._incoming.pop(request_id, None))

    async def _resolve(
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
        pending = PendingRequest(f"{request_id!r}@{frame_seq}", request_id, method, params, frame_seq)
        handler = self.handlers.get(method)
        capability = CAPABILITY_OF.get(method)
        if capability and capability not in self.client_capabilities:
            # A request for a capability this client did not declare: it is flagged, and refused.
            raise McpError(-32601, f"Method not found: {method} (capability {capability!r} not declared)")
        if handler is not None:
            return await handler(pending)
        if method == "roots/list" and not self.options.review_roots:
            return {"roots": list(self.roots)}
        if method in HUMAN_METHODS or method == "roots/list":
            return await self._wait_for_person(pending, withdrawn)
        raise McpError(-32601, f"Method not found: {method}")

    async def _answer(
        self, request_id: int | str, method: str, params: dict[str, Any], frame_seq: int
    ) -> None:
        try:
            result = await self._resolve(request_id, method, params, frame_seq)
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

    async def _wait_for_person(self, pending: PendingRequest, withdrawn: str) -> dict[str, Any]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        if not self._waiting:
            self._pause_clocks()
        self._waiting[pending.key] = (pending.request_id, future)
        self._publish(pending)
        try:
            return await future
        except asyncio.CancelledError:
            # Still listed: nobody answered it and the connection did not fail; it was withdrawn.
            if self._waiting.pop(pending.key, None) is not None:
                self._publish(PendingResolved(pending.key, "withdrawn", withdrawn))
                if not self._waiting:
                    self._resume_clocks()
            raise
        finally:
            if self._waiting.pop(pending.key, None) is not None and not self._waiting:
                self._resume_clocks()

    @property
    def waiting(self) -> list[str]:
        """Keys of the server→client requests waiting for a person, oldest first."""
        return list(self._waiting)

    def respond(self, key: str, result: dict[str, Any], *, note: str | None = None) -> None:
        """Answer a pending server→client request with ``result``."""
        request_id, future = self._waiting_entry(key)
        if note:
            self._notes[request_id] = note
        future.set_result(result)
        self._publish(PendingResolved(key, "answered", note or ""))

    def reject(self, key: str, code: int = -1, message: str = "User rejected the request") -> None:
        """Refuse a pending server→client request with a JSON-RPC error (-1: the user said no)."""
        _, future = self._waiting_entry(key)
        future.set_exception(McpError(code, message))
        self._publish(PendingResolved(key, "rejected", message))

    def _waiting_entry(self, key: str) -> tuple[int | str, asyncio.Future[dict[str, Any]]]:
        entry = self._waiting.get(key)
        if entry is None or entry[1].done():
            raise KeyError(f"no pending request {key!r}")
        return entry

    async def _respond(
        self,
        request_id: int | str,
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
            await self.transport.send(_dumps(message).encode(), message)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # --- lifecycle ----------------------------------------------------------------------

    def _set_state(self, state: str, note: str = "") -> None:
        self.state = state
        self.record(Frame("state", "local", transport={"state": state}, note=note or state))

    def _schema_module(self) -> ModuleType:
        if self._schema is None:
            from . import _schema

            self._schema = _schema
        return self._schema

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
        mode = self.options.effective_mode()
        if mode == "handshake":
            return await self._handshake()
        if mode == "stateless":
            try:
                return await self.discover()
            except EngineError as exc:
                if self.state != "failed":
                    self._set_state("failed", f"server/discover failed: {exc}")
                raise
        try:
            return await self.discover(timeout=self.options.discover_timeout)
        except (McpError, HttpStatusError, RequestTimeout, VersionNegotiationFailed) as exc:
            if isinstance(exc, McpError) and exc.code == -32022 and self._modern_only(exc.data):
                self._set_state(
                    "failed", f"server/discover failed: {exc}; the server speaks no revision we do"
                )
                raise
            if isinstance(exc, McpError):
                why = f"{exc.code} {exc.name or exc.message}"
            elif isinstance(exc, HttpStatusError):
                why = f"HTTP {exc.status}"
            else:
                why = str(exc)
            self._stamp_version = None
            return await self._handshake(
                f"handshake: server/discover failed ({why}); falling back to initialize"
            )

    @staticmethod
    def _modern_only(data: Any) -> bool:
        """A -32022 whose supported list names no revision this client speaks: a real incompatibility."""
        supported = data.get("supported") if isinstance(data, dict) else None
        return isinstance(supported, list) and not any(
            v in HANDSHAKE_VERSIONS or v in MODERN_VERSIONS for v in supported
        )

    async def discover(self, *, timeout: float | None | EllipsisType = ...) -> dict[str, Any]:
        """Connect statelessly: server/discover, then every request carries the protocol in ``_meta``.

        Fills ``protocol_version``, ``server_info`` (the result's ``_meta`` serverInfo),
        ``server_capabilities`` and ``instructions``; a -32022 answer naming a revision we speak is
        probed once more at that revision.
        """
        version = self.options.modern_version()
        self.client_capabilities = self.options.capabilities.to_wire(version)
        self._set_state("discovering", f"server/discover at protocol {version}")
        result: dict[str, Any] = {}
        for attempt in range(2):
            self._stamp_version = version
            try:
                result = await self.request("server/discover", None, progress=False, timeout=timeout)
            except McpError as exc:
                supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
                mutual = [v for v in MODERN_VERSIONS if isinstance(supported, list) and v in supported]
                if exc.code == -32022 and mutual and mutual[-1] != version and attempt == 0:
                    version = mutual[-1]
                    self.client_capabilities = self.options.capabilities.to_wire(version)
                    continue
                self._stamp_version = None
                raise
            except BaseException:
                self._stamp_version = None
                raise
            break
        supported = result.get("supportedVersions")
        mutual = [v for v in MODERN_VERSIONS if isinstance(supported, list) and v in supported]
        if not mutual:
            self._stamp_version = None
            raise VersionNegotiationFailed(
                f"server/discover listed {supported!r}; this client speaks {', '.join(MODERN_VERSIONS)}"
            )
        chosen = version if version in mutual else mutual[-1]
        self._stamp_version = chosen
        self.protocol_version = chosen
        self.mode = "stateless"
        self.discover_result = result
        self.transport.set_protocol_version(chosen)
        self.client_capabilities = self.options.capabilities.to_wire(chosen)
        caps = result.get("capabilities")
        self.server_capabilities = caps if isinstance(caps, dict) else {}
        meta = result.get("_meta")
        info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
        self.server_info = info if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        self._initialized_sent = True  # nothing to wait for: the server may talk from now on
        self._set_state("ready", f"stateless: server/discover answered {chosen}")
        if self.options.listen:
            self._spawn(self._listen_after_discover())
        return result

    async def _handshake(self, why: str | None = None) -> dict[str, Any]:
        """Run the handshake: initialize, check the version, then notifications/initialized."""
        requested = self.options.handshake_version()
        self.client_capabilities = self.options.capabilities.to_wire(requested)
        offer = f"offering protocol {requested}"
        self._set_state("initializing", f"{why}, {offer}" if why else offer)
        params = {
            "protocolVersion": requested,
            "capabilities": self.client_capabilities,
            "clientInfo": self.options.client_info,
        }
        try:
            result = await self.request("initialize", params, progress=False)
        except TransportError as exc:
            if type(exc).__name__ != "FallbackToLegacy":
                self._set_state("failed", f"initialize failed: {exc}")
                raise
            # Auto-detection, as the spec's backward-compatibility section describes.
            from ._http import LegacySseTransport

            await self.transport.close()
            self.transport = LegacySseTransport(self.transport.target)  # type: ignore[attr-defined]
            self._set_state("connecting", f"{exc}")
            await self.transport.open(self)
            return await self._handshake(why)
        except EngineError as exc:
            self._set_state("failed", f"initialize failed: {exc}")
            raise
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            self._set_state(
                "failed", f"server answered protocol {version!r}, which this client does not speak"
            )
            spoken = ", ".join(HANDSHAKE_VERSIONS)
            raise VersionNegotiationFailed(f"server answered protocol {version!r}; client speaks {spoken}")
        self.protocol_version = str(version)
        self.mode = "handshake"
        self.transport.set_protocol_version(self.protocol_version)
        if version != requested:
            # Capabilities were shaped for the offered revision; reshape them for the agreed one.
            self.client_capabilities = self.options.capabilities.to_wire(self.protocol_version)
        caps = result.get("capabilities")
        self.server_capabilities = caps if isinstance(caps, dict) else {}
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        self.instructions = instructions if isinstance(instructions, str) else None
        self._initialized_sent = True
        await self.notify("notifications/initialized")
        note = f"protocol {version}" + (f" (offered {requested})" if version != requested else "")
        self._set_state("ready", note)
        return result

    async def reinitialize(self) -> dict[str, Any]:
        """Start a new HTTP session after the server expired the old one."""
        reset = getattr(self.transport, "reset", None)
        if reset is None:
            raise EngineError(f"the {self.transport.name} transport cannot start a new session")
        reset()
        self.protocol_version = None
        self.mode = None
        self._stamp_version = None
        self.discover_result = None
        return await self.initialize()

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
        self.state = "closing"
        if not was_failed:
            self._set_state("closing", "closing the connection")
        for task in list(self._incoming.values()):
            task.cancel()
        await asyncio.gather(*self._incoming.values(), return_exceptions=True)
        try:
            await self.transport.close()
        finally:
            self._fail_everything(ConnectionClosed("the session was closed", exit_code=self.exit_code))
            for task in list(getattr(self, "_background", ())):
                task.cancel()
            self._set_state(
                "closed", "closed" + (f" (exit code {self.exit_code})" if self.exit_code is not None else "")
            )
            self._closed.set()

    def _fail_everything(self, error: Exception) -> None:
        pending, self._pending = self._pending, {}
        for outgoing in pending.values():
            self._settle(outgoing, error=error)
        waiting, self._waiting = self._waiting, {}
        for key, (_, future) in waiting.items():
            if not future.done():
                future.cancel()
                self._publish(PendingResolved(key, "failed", str(error)))

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
        self, name: str, arguments: dict[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments or {}}, **options)

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
        self.log_level = level
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
        request_id = self._issued  # the id start_request is about to take: the ack may beat its return
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
        await asyncio.wait({stream.ack, handle._result}, timeout=waited, return_when=asyncio.FIRST_COMPLETED)
        if not stream.ack.done() or stream.ack.cancelled():
            if handle.done:
                self.listens.forget(stream, "ended before it was acknowledged")
                await handle  # a refusal raises McpError here
                raise EngineError("the server ended subscriptions/listen before acknowledging it")
            self.listens.forget(stream, "not acknowledged")
            await handle.cancel("subscriptions/listen was not acknowledged")
            raise RequestTimeout(f"subscriptions/listen was not acknowledged within {waited:g} s")
        old, self.listens.current = self.listens.current, stream
        handle._result.add_done_callback(lambda result: self._listen_ended(stream, result))
        if old is not None:
            self.listens.forget(old, "replaced")
            if old.handle is not None and not old.handle.done:
                await old.handle.cancel(f"replaced by subscriptions/listen {request_id!r}")
        return stream.ack.result()

    def _listen_ended(self, stream: ListenStream, result: asyncio.Future[Any]) -> None:
        """A listen stream's request finished: say so when it was the current stream."""
        if stream.ended is not None or self.state in ("closing", "closed"):
            self.listens.forget(stream, stream.ended or "closed")
            return
        if result.cancelled():
            why = "cancelled"
        elif result.exception() is not None:
            why = f"failed: {result.exception()}"
        else:
            why = "ended by the server (a graceful close)"
        current = self.listens.current is stream
        self.listens.forget(stream, why)
        if current:
            self.record(
                Frame(
                    "state",
                    "local",
                    transport={"state": "listen-ended", "subscription_id": stream.request_id},
                    note=f"subscriptions/listen {stream.request_id!r} {why}: no change notifications "
                    "arrive until the client listens again",
                )
            )

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

    async def set_roots(self, roots: list[dict[str, Any]]) -> None:
        """Replace the roots; tell the server when the listChanged capability was declared."""
        self.roots = list(roots)
        if self.client_capabilities.get("roots", {}).get("listChanged"):
            await self.notify("notifications/roots/list_changed")
