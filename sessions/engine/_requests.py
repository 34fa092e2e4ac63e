"""The client's requests in flight: the table of them, their clocks, and the handles callers hold."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from ._clock import Clock, Timer
from ._errors import EngineError, MessageTooLarge, RequestCancelled, RequestTimeout
from ._frames import Frame, Progress
from ._options import ClientOptions
from ._protocol import PROGRESS_METHODS

__all__ = ["Outgoing", "RequestHandle", "RequestOptions", "RequestTable"]


@dataclass(slots=True)
class RequestOptions:
    """How one request waits: its timeouts (``...``: the session's) and whether it asks for progress."""

    timeout: float | None | EllipsisType = ...
    max_total_timeout: float | None | EllipsisType = ...
    progress: bool | None = None
    on_progress: Callable[[Progress], None] | None = None


class Outgoing:
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
        "reply",
        "reply_seq",
        "sent_mono",
        "timer",
        "tool",
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
        self.timer: Timer | None = None
        self.paused_at: float | None = None
        self.last_progress: float | None = None
        self.on_progress: Callable[[Progress], None] | None = None
        self.reply_seq: int | None = None
        self.reply: Frame | None = None
        """The frame that answered it, as the engine judged it (the owner's answer is drawn from it)."""
        self.tool: str | None = None
        """The tool a tools/call names, whose output schema its result is held to (None otherwise)."""


Abandon = Callable[[Outgoing, EngineError, str], Awaitable[None]]
"""Give up on a request: fail it locally and tell the server (``ClientSession._abandon``)."""


class RequestHandle:
    """A request in flight: await it for the result, or cancel it.

    In stateless mode a request a server answers with ``input_required`` takes several legs (the
    original, then one retry per round); the handle follows them and resolves with the final result.
    """

    def __init__(self, outgoing: Outgoing, abandon: Abandon) -> None:
        self.leg = outgoing
        """The leg now in flight (the input-required driver moves it on to each retry)."""
        self._abandon = abandon
        self._id = outgoing.id
        self._result: asyncio.Future[Any] = outgoing.future
        self._driver: asyncio.Task[None] | None = None
        self.cancel_reason: str | None = None
        """Why the caller cancelled, for the driver to pass on."""

    @property
    def id(self) -> int:
        """The id of the first leg (the request the caller made)."""
        return self._id

    @property
    def current_id(self) -> int:
        """The id of the leg now in flight (a retry after input was required, or the first)."""
        return self.leg.id

    @property
    def done(self) -> bool:
        return self._result.done()

    @property
    def future(self) -> asyncio.Future[Any]:
        """The future this handle resolves with: the final result, or the request's error."""
        return self._result

    async def cancel(self, reason: str = "cancelled by the user") -> None:
        """Cancel whichever leg or wait is current; the server hears of it unless the spec forbids."""
        error = RequestCancelled(reason)
        if self._driver is not None and not self._driver.done():
            self.cancel_reason = reason
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)
            # Cancelled before it ever ran: the leg is still in flight.
            await self._abandon(self.leg, error, reason)
            self.fail(error)
            return
        await self._abandon(self.leg, error, reason)

    def follow(self, driver: asyncio.Task[None]) -> None:
        """Resolve through ``driver`` (which follows the legs) rather than through the first leg."""
        self._result = asyncio.get_running_loop().create_future()
        self._driver = driver
        # A driver cancelled before it ran (the session closing) still fails the handle.
        driver.add_done_callback(lambda _: self.fail(RequestCancelled(self.cancel_reason or "cancelled")))

    def finish(self, result: Any) -> None:
        if not self._result.done():
            self._result.set_result(result)

    def fail(self, error: BaseException) -> None:
        if not self._result.done():
            self._result.set_exception(error)
            # A caller that never awaits the handle must not produce "exception never retrieved".
            self._result.exception()

    def __await__(self) -> Generator[Any, None, dict[str, Any]]:
        return self._result.__await__()


class RequestTable:
    """The requests the client sent and awaits, by id, with the clocks that time them out.

    A request has an idle clock (reset by progress when asked) and a total clock; both pause while
    a server→client request waits for a person. When one runs out, ``on_timeout`` gives it up.
    """

    def __init__(
        self,
        clock: Clock,
        on_timeout: Callable[[Outgoing, RequestTimeout, str], None],
        defaults: ClientOptions,
    ) -> None:
        self.clock = clock
        self._on_timeout = on_timeout
        self._defaults = defaults
        self._ids = itertools.count(defaults.first_request_id)
        self.next_id = defaults.first_request_id
        """The id the next request takes; every id below it was issued, in order."""
        self.pending: dict[int | str, Outgoing] = {}
        self.progress: dict[int | str, Outgoing] = {}
        """Requests whose progress token (their id) is live."""
        self.abandoned: dict[int | str, str] = {}
        """Requests given up (``timed out`` or ``cancelled``), so a late response can say so."""
        self.notes: dict[int | str, str] = {}
        """Notes for the out frame of a request about to be sent (a retry says what it retries)."""
        self.paused = False
        """Clocks stand still: a server→client request waits for a person, or a person authorizes."""
        self._holds = 0

    def open(
        self, method: str, params: dict[str, Any] | None, options: RequestOptions, note: str | None = None
    ) -> tuple[Outgoing, dict[str, Any]]:
        """Take the next id for a request, start its clocks; return it and the message to send."""
        request_id = next(self._ids)
        self.next_id = request_id + 1
        outgoing = Outgoing(request_id, method, asyncio.get_running_loop().create_future())
        outgoing.on_progress = options.on_progress
        if method == "tools/call" and isinstance(params, dict) and "task" not in params:
            # A task-augmented call is answered with a CreateTaskResult, which has no structuredContent.
            name = params.get("name")
            outgoing.tool = name if isinstance(name, str) else None
        if note:
            self.notes[request_id] = note
        wants_progress = options.progress
        if wants_progress is None:
            wants_progress = options.on_progress is not None or method in PROGRESS_METHODS
        if wants_progress:
            params = params or {}
            params["_meta"] = {**params.get("_meta", {}), "progressToken": request_id}
            self.progress[request_id] = outgoing
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.pending[request_id] = outgoing
        idle = self._defaults.timeout if isinstance(options.timeout, EllipsisType) else options.timeout
        total = (
            self._defaults.max_total_timeout
            if isinstance(options.max_total_timeout, EllipsisType)
            else options.max_total_timeout
        )
        outgoing.idle_timeout = idle
        now = self.clock.now()
        outgoing.idle_deadline = now + idle if idle is not None else None
        outgoing.total_deadline = now + total if total is not None else None
        if self.paused:
            outgoing.paused_at = now
        else:
            self._arm(outgoing)
        return outgoing, message

    def sent(self, frame: Frame) -> None:
        """Pair a request's out frame with its entry: the latency of its response counts from here."""
        assert frame.rpc_id is not None
        outgoing = self.pending.get(frame.rpc_id)
        if outgoing is not None:
            outgoing.frame_seq = frame.seq
            outgoing.sent_mono = frame.mono
        if frame.rpc_id in self.notes:
            frame.note = self.notes.pop(frame.rpc_id)

    def settle(
        self, outgoing: Outgoing, *, result: dict[str, Any] | None = None, error: BaseException | None = None
    ) -> None:
        """Resolve a request's future (once) and stop its clocks."""
        if outgoing.timer is not None:
            outgoing.timer.cancel()
            outgoing.timer = None
        self.progress.pop(outgoing.id, None)
        if outgoing.future.done():
            return
        if error is not None:
            outgoing.future.set_exception(error)
            # A caller that never awaits the handle must not produce "exception never retrieved".
            outgoing.future.exception()
        else:
            outgoing.future.set_result(result)

    def fail(self, request_ids: list[int | str], error: Exception) -> None:
        """Fail the pending requests among ``request_ids``."""
        for request_id in request_ids:
            outgoing = self.pending.pop(request_id, None)
            if outgoing is not None:
                if isinstance(error, MessageTooLarge) and error.frame is not None:
                    # The reply came, too large to take in: what was kept of it answers the request.
                    outgoing.reply_seq, outgoing.reply = error.frame.seq, error.frame
                self.settle(outgoing, error=error)

    def fail_all(self, error: Exception) -> None:
        """Fail every pending request (the connection is gone); clocks start afresh after this."""
        pending, self.pending = self.pending, {}
        for outgoing in pending.values():
            self.settle(outgoing, error=error)
        self.paused = False
        self._holds = 0

    def give_up(self, outgoing: Outgoing, error: EngineError) -> bool:
        """Fail a pending request and remember why, for a late response; false if it was not pending."""
        if self.pending.pop(outgoing.id, None) is None:
            return False
        self.abandoned[outgoing.id] = "timed out" if isinstance(error, RequestTimeout) else "cancelled"
        self.settle(outgoing, error=error)
        return True

    # --- clocks -----------------------------------------------------------------------

    def _arm(self, outgoing: Outgoing) -> None:
        deadlines = [d for d in (outgoing.idle_deadline, outgoing.total_deadline) if d is not None]
        if outgoing.timer is not None:
            outgoing.timer.cancel()
            outgoing.timer = None
        if deadlines:
            delay = min(deadlines) - self.clock.now()
            outgoing.timer = self.clock.call_later(delay, lambda: self._expire(outgoing))

    def restart_idle_clock(self, outgoing: Outgoing) -> None:
        """Progress arrived: the request's idle clock starts again (a paused clock stays paused)."""
        if outgoing.idle_timeout is None or outgoing.paused_at is not None:
            return
        outgoing.idle_deadline = self.clock.now() + outgoing.idle_timeout
        self._arm(outgoing)

    def _expire(self, outgoing: Outgoing) -> None:
        outgoing.timer = None
        if outgoing.id not in self.pending:
            return
        now = self.clock.now()
        which = (
            "its maximum total time" if outgoing.total_deadline and now >= outgoing.total_deadline else "time"
        )
        seconds = outgoing.idle_timeout
        reason = f"timed out ({which}{f', {seconds:g} s' if seconds is not None and which == 'time' else ''})"
        self._on_timeout(outgoing, RequestTimeout(f"{outgoing.method} {reason}"), reason)

    def pause_clocks(self) -> None:
        """Stop every request's clocks (a person is answering the server, or authorizing); each pause
        is ended by one ``resume_clocks``, and the clocks start again when the last one is."""
        self._holds += 1
        if self._holds > 1:
            return
        self.paused = True
        now = self.clock.now()
        for outgoing in self.pending.values():
            if outgoing.paused_at is None:
                outgoing.paused_at = now
                if outgoing.timer is not None:
                    outgoing.timer.cancel()
                    outgoing.timer = None

    def resume_clocks(self) -> None:
        """Start the clocks again, their deadlines moved on by the time they stood still."""
        self._holds = max(0, self._holds - 1)
        if self._holds:
            return
        self.paused = False
        now = self.clock.now()
        for outgoing in self.pending.values():
            if outgoing.paused_at is not None:
                waited = now - outgoing.paused_at
                outgoing.paused_at = None
                if outgoing.idle_deadline is not None:
                    outgoing.idle_deadline += waited
                if outgoing.total_deadline is not None:
                    outgoing.total_deadline += waited
                self._arm(outgoing)
