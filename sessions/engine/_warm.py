"""Warm starts: a stdio server started just before the person asks to connect to it, then adopted.

Starting a server is most of a connect (a Node server loads its modules for some 300 ms before it
reads a line), and a person's intent shows before the click: the pointer reaches the button first.
A runner offers the target then; the connect that follows with an equal target takes the running
process instead of starting one. An offer nobody takes is killed after ``keep`` seconds. The hint and
the click race (two requests), so both name the intent they come from (a key the page was given):
an offer of an intent whose connect has already come starts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from ._clock import Clock, LoopClock, Timer
from ._errors import TransportError
from ._stdio import StdioTransport
from ._targets import StdioTarget

__all__ = ["WarmStarts"]

LATE = 300.0
"""Seconds a connect's intent is remembered: its page is gone by then, and a late hint comes within
seconds, or many more on a loaded machine."""


@dataclass(eq=False)
class _Held:
    target: StdioTarget
    transport: StdioTransport
    spawned: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    timer: Timer | None = None


class WarmStarts:
    """At most ``limit`` servers started ahead of a connect, each kept ``keep`` seconds for one to take."""

    def __init__(self, *, keep: float = 10.0, limit: int = 2, clock: Clock | None = None) -> None:
        self.keep = keep
        self.limit = limit
        self.clock: Clock = clock or LoopClock()
        self._held: list[_Held] = []
        self._discarding: set[asyncio.Task[None]] = set()
        self._connected: dict[str, float] = {}
        """The intents of recent connects, with when: an offer of one of them comes too late."""
        self._failed: list[tuple[StdioTarget, float]] = []
        """Targets that could not start, with when: the pointer on Connect again tries nothing."""

    def __len__(self) -> int:
        return len(self._held)

    async def offer(self, target: StdioTarget, intent: str = "") -> bool:
        """Start ``target`` unless an equal one is already held (its time then starts again).

        False when nothing is started: the connect of ``intent`` has already come, or the server cannot
        be started here (the connect will then say why, in its timeline; an equal target is not tried
        again for ``keep`` seconds).
        """
        held = self._find(target)
        if held is not None:
            self._arm(held)
            return await asyncio.shield(held.spawned)
        if intent and intent in self._recent_connects():
            return False
        now = self.clock.now()
        self._failed = [(failed, at) for failed, at in self._failed if now - at < self.keep]
        if any(failed == target for failed, _ in self._failed):
            return False
        held = _Held(target, StdioTransport(target))
        self._held.append(held)
        while len(self._held) > self.limit:
            self._drop(self._held[0])
        self._arm(held)
        try:
            await held.transport.spawn()
        except TransportError:
            held.spawned.set_result(False)
            self._drop(held)
            self._failed.append((target, self.clock.now()))
            return False
        except BaseException:
            held.spawned.set_result(False)
            self._drop(held)
            raise
        held.spawned.set_result(True)
        return True

    def connecting(self, intent: str) -> None:
        """The connect of ``intent`` has come: its hints, from now on, are late."""
        if intent:
            self._recent_connects()[intent] = self.clock.now()

    async def take(self, target: StdioTarget) -> StdioTransport | None:
        """The held server started for an equal target, still running, for the caller to open; else None."""
        held = self._find(target)
        if held is None:
            return None
        self._held.remove(held)
        if held.timer is not None:
            held.timer.cancel()
        if not await asyncio.shield(held.spawned):
            return None
        process = held.transport.process
        if process is None or process.returncode is not None:
            self._discard(held.transport)
            return None
        return held.transport

    async def close(self) -> None:
        """Kill every server still held."""
        for held in list(self._held):
            self._drop(held)
        await asyncio.gather(*self._discarding, return_exceptions=True)

    def kill_all(self) -> None:
        """Last resort at exit (blocks briefly): no held server may outlive this process."""
        for held in self._held:
            held.transport.kill()

    def _recent_connects(self) -> dict[str, float]:
        now = self.clock.now()
        self._connected = {intent: at for intent, at in self._connected.items() if now - at < LATE}
        return self._connected

    def _find(self, target: StdioTarget) -> _Held | None:
        return next((held for held in self._held if held.target == target), None)

    def _arm(self, held: _Held) -> None:
        if held.timer is not None:
            held.timer.cancel()
        held.timer = self.clock.call_later(self.keep, lambda: self._drop(held))

    def _drop(self, held: _Held) -> None:
        with contextlib.suppress(ValueError):
            self._held.remove(held)
        if held.timer is not None:
            held.timer.cancel()
        if held.spawned.done():
            self._discard(held.transport)
        else:  # still starting: kill it once it has
            held.spawned.add_done_callback(lambda _: self._discard(held.transport))

    def _discard(self, transport: StdioTransport) -> None:
        task = asyncio.get_running_loop().create_task(transport.discard(), name="mcp-warm-discard")
        self._discarding.add(task)
        task.add_done_callback(self._discarding.discard)
