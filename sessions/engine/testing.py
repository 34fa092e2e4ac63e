"""Test doubles for the engine: a scripted in-memory transport, a manual clock, an event recorder.

No process, no socket, no real waiting. The test plays the server::

    server = ScriptedTransport(handshake=True)          # answers initialize (or server/discover) itself
    async with ClientSession(server, ClientOptions(clock=ManualClock())) as session:
        handle = await session.start_request("tools/list")
        sent = await server.next_sent("tools/list")      # what the client wrote: parsed, raw, its frame
        frame = server.answer(sent, {"tools": []})       # delivered as a transport delivers a frame
        assert frame.verdicts == [] and await handle == {"tools": []}

``mock_http(handler)`` drives the real HTTP transports against ``httpx.MockTransport`` instead.
Nothing here is imported by the engine itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._clock import Timer
from ._errors import ConnectionClosed
from ._frames import Event, Frame, PendingRequest
from ._options import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION
from ._protocol import META_PROTOCOL_VERSION, META_SERVER_INFO, encode
from ._targets import HttpTarget
from ._transport import FrameSink

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ManualClock",
    "ManualTimer",
    "Recorder",
    "ScriptedTransport",
    "Sent",
    "discover_result",
    "initialize_result",
    "mock_http",
]

WAIT = 5.0
"""How long a test waits for something the client should do at once, before it fails."""
SERVER_INFO = {"name": "scripted", "version": "1.0.0"}


def initialize_result(protocol_version: str = LATEST_HANDSHAKE_VERSION, **fields: Any) -> dict[str, Any]:
    """A valid initialize result for ``protocol_version``; ``fields`` replace or add top-level keys."""
    return {"protocolVersion": protocol_version, "capabilities": {}, "serverInfo": SERVER_INFO, **fields}


def discover_result(protocol_version: str = LATEST_MODERN_VERSION, **fields: Any) -> dict[str, Any]:
    """A valid server/discover result offering ``protocol_version``; ``fields`` replace or add keys."""
    return {
        "resultType": "complete",
        "supportedVersions": [protocol_version],
        "capabilities": {},
        "cacheScope": "public",
        "ttlMs": 0,
        "_meta": {META_SERVER_INFO: SERVER_INFO},
        **fields,
    }


@dataclass(slots=True, frozen=True)
class Sent:
    """One message the client sent: its recorded frame, with the parsed message and the exact bytes."""

    frame: Frame

    @property
    def message(self) -> Any:
        return self.frame.message

    @property
    def raw(self) -> bytes:
        return self.frame.raw

    @property
    def method(self) -> str | None:
        return self.frame.method

    @property
    def id(self) -> int | str | None:
        return self.frame.rpc_id

    @property
    def params(self) -> dict[str, Any]:
        params = self.message.get("params") if isinstance(self.message, dict) else None
        return params if isinstance(params, dict) else {}


class ScriptedTransport:
    """An in-memory ``Transport`` whose server side the test scripts.

    What the client sends is recorded as an ``out`` frame (as every transport does) and queued for
    ``next_sent``; what the test sends with ``server_sends`` reaches the session through
    ``sink.receive``, exactly as a transport delivers what it reads. ``handshake=True`` (or a dict
    of result fields) answers every initialize and server/discover at once with a valid result,
    and keeps them (and ``notifications/initialized``) out of the ``next_sent`` queue.
    """

    def __init__(
        self,
        *,
        name: str = "scripted",
        handshake: bool | Mapping[str, Any] = False,
        out_details: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        """What the session sees as the transport's name (``streamable-http`` to look like HTTP)."""
        self.handshake: dict[str, Any] | None = (
            dict(handshake) if isinstance(handshake, Mapping) else {} if handshake else None
        )
        self.out_details = dict(out_details or {})
        """The ``transport`` details of every ``out`` frame (e.g. ``{"http": {"method": "POST"}}``)."""
        self.sent: list[Sent] = []
        """Everything the client sent, in order (handshake messages included)."""
        self.protocol_version: str | None = None
        self.opened = False
        self.closed = False
        self._sink: FrameSink | None = None
        self._queue: asyncio.Queue[Sent] = asyncio.Queue()

    # --- Transport: what the session calls ------------------------------------------

    async def open(self, sink: FrameSink) -> None:
        self._sink = sink
        self.opened = True

    async def send(self, raw: bytes, message: Any) -> Frame:
        out = Frame("message", "out", raw, message=message, transport=dict(self.out_details))
        frame = self.sink.record(out)
        if self.closed:
            raise ConnectionClosed("the scripted transport is closed")
        sent = Sent(frame)
        self.sent.append(sent)
        if self.handshake is not None and sent.method in ("initialize", "server/discover"):
            # Answered after send returns, as a real server's reply would be.
            asyncio.get_running_loop().call_soon(self._answer_handshake, sent)
        elif not (self.handshake is not None and sent.method == "notifications/initialized"):
            self._queue.put_nowait(sent)
        return frame

    def set_protocol_version(self, version: str) -> None:
        self.protocol_version = version

    async def close(self) -> None:
        self.closed = True

    # --- the server's side: what the test calls -------------------------------------

    @property
    def sink(self) -> FrameSink:
        """The session this transport delivers to (set by ``open``)."""
        assert self._sink is not None, "the session has not opened the transport"
        return self._sink

    async def next_sent(self, method: str | None = None, *, timeout: float = WAIT) -> Sent:
        """Return the next message the client sent (with ``method``, skipping others, when given)."""
        async with asyncio.timeout(timeout):
            while True:
                sent = await self._queue.get()
                if method is None or sent.method == method:
                    return sent

    def server_sends(self, message: Any, **details: Any) -> Frame:
        """Deliver one frame to the session and return it, recorded and judged.

        ``bytes`` and ``str`` go as they are (so broken JSON can be sent); anything else is encoded
        as JSON. ``details`` become the frame's ``transport`` details, e.g. ``http={"status": 400}``
        to look like an HTTP reply.
        """
        if isinstance(message, bytes):
            raw = message
        elif isinstance(message, str):
            raw = message.encode()
        else:
            raw = encode(message)
        frame = Frame("message", "in", raw, transport=dict(details))
        self.sink.receive(frame)
        return frame

    def answer(
        self, request: Sent, result: Any = None, *, error: Mapping[str, Any] | None = None, **details: Any
    ) -> Frame:
        """Send the response to ``request``: ``result`` (``{}`` if omitted) or ``error``."""
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": request.id}
        if error is not None:
            response["error"] = dict(error)
        else:
            response["result"] = {} if result is None else result
        return self.server_sends(response, **details)

    def server_closes(self, error: Exception | None = None) -> None:
        """End the connection from the server's side (``SessionExpired`` for an expired HTTP session)."""
        self.sink.connection_lost(error or ConnectionClosed("the scripted server closed the connection"))

    def _answer_handshake(self, sent: Sent) -> None:
        assert self.handshake is not None
        if sent.method == "initialize":
            offered = sent.params.get("protocolVersion", LATEST_HANDSHAKE_VERSION)
            result = initialize_result(offered, **self.handshake)
        else:
            meta = sent.params.get("_meta")
            probed = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
            result = discover_result(probed or LATEST_MODERN_VERSION, **self.handshake)
        self.answer(sent, result)


class ManualTimer:
    """A callback a ``ManualClock`` calls when it is advanced past ``when``."""

    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that stands still until ``advance`` moves it; pass it as ``ClientOptions(clock=...)``."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._timers: list[ManualTimer] = []
        self._changed = asyncio.Event()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = ManualTimer(self._now + max(delay, 0.0), callback)
        self._timers.append(timer)
        self._changed.set()
        return timer

    @property
    def armed(self) -> list[float]:
        """The due times of the timers still armed, soonest first."""
        return sorted(t.when for t in self._timers if not t.cancelled)

    async def wait_until(self, predicate: Callable[[list[float]], bool], *, timeout: float = WAIT) -> None:
        """Wait until ``predicate(self.armed)`` holds (a task has armed the timer a test expects)."""
        async with asyncio.timeout(timeout):
            while not predicate(self.armed):
                self._changed.clear()
                await self._changed.wait()

    def advance(self, seconds: float) -> int:
        """Move time on by ``seconds``, calling each timer that falls due, in due order; return how many.

        Callbacks run here, synchronously; what they start (a task that sends notifications/cancelled)
        runs when the test next awaits.
        """
        target = self._now + seconds
        fired = 0
        while True:
            due = [t for t in self._timers if not t.cancelled and t.when <= target]
            if not due:
                break
            timer = min(due, key=lambda t: t.when)
            self._timers.remove(timer)
            self._now = max(self._now, timer.when)
            timer.cancelled = True
            timer.callback()
            fired += 1
        self._now = target
        self._timers = [t for t in self._timers if not t.cancelled]
        return fired


class Recorder:
    """Keep every event a session publishes; wait, with a deadline, for one that matches."""

    def __init__(self, session: Any) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        session.subscribe(self._add)

    def _add(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()

    @property
    def frames(self) -> list[Frame]:
        return [e for e in self.events if isinstance(e, Frame)]

    def codes(self) -> list[str]:
        """Every verdict code on every frame so far, in order."""
        return [v.code for f in self.frames for v in f.verdicts]

    async def wait_for(
        self, predicate: Callable[[Event], bool], *, timeout: float = WAIT, since: int = 0
    ) -> Event:
        """Return the first event (from index ``since`` on, so far or to come) that matches ``predicate``."""
        async with asyncio.timeout(timeout):
            seen = since
            while True:
                for event in self.events[seen:]:
                    if predicate(event):
                        return event
                seen = len(self.events)
                self._changed.clear()
                await self._changed.wait()

    async def frame(self, predicate: Callable[[Frame], bool], *, timeout: float = WAIT) -> Frame:
        """Return the first frame that matches ``predicate``."""
        event = await self.wait_for(lambda e: isinstance(e, Frame) and predicate(e), timeout=timeout)
        assert isinstance(event, Frame)
        return event

    async def pending(self, method: str, *, timeout: float = WAIT) -> PendingRequest:
        """Return the first server→client request of ``method`` that waits for a person."""
        event = await self.wait_for(
            lambda e: isinstance(e, PendingRequest) and e.method == method, timeout=timeout
        )
        assert isinstance(event, PendingRequest)
        return event


Handler = Callable[["httpx.Request"], "httpx.Response | Awaitable[httpx.Response]"]


def mock_http(handler: Handler) -> Callable[[HttpTarget], httpx.AsyncClient]:
    """A ``client_factory`` for the HTTP transports whose every request ``handler`` answers.

    StreamableHttpTransport(HttpTarget(url), client_factory=mock_http(handler))
    """
    import httpx

    async def respond(request: httpx.Request) -> httpx.Response:
        response = handler(request)
        return await response if isinstance(response, Awaitable) else response

    def factory(target: HttpTarget) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(respond), follow_redirects=False)

    return factory
