"""The clock request timeouts run on: the event loop's by default, a manual one in tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Protocol

__all__ = ["Clock", "LoopClock", "Timer", "sleep", "wait_first"]


class Timer(Protocol):
    """A scheduled callback that can still be called off."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic seconds and callbacks at a later time; every engine timeout goes through one."""

    def now(self) -> float:
        """Return the current time in seconds (monotonic; only differences mean anything)."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Call ``callback`` once, ``delay`` seconds from now, in the event loop's thread."""
        ...


class LoopClock:
    """The running event loop's clock: what a session uses unless ``ClientOptions.clock`` says otherwise."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_later(max(delay, 0.0), callback)


async def sleep(clock: Clock, seconds: float) -> None:
    """Wait ``seconds`` on ``clock`` (a manual clock only wakes this when it is advanced)."""
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    timer = clock.call_later(seconds, lambda: None if woken.done() else woken.set_result(None))
    try:
        await woken
    finally:
        timer.cancel()


async def wait_first(clock: Clock, futures: Iterable[asyncio.Future[Any]], timeout: float) -> None:
    """Wait until one of ``futures`` is done or ``timeout`` seconds pass on ``clock``, whichever is first."""
    expired: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    timer = clock.call_later(timeout, lambda: None if expired.done() else expired.set_result(None))
    try:
        await asyncio.wait({*futures, expired}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
        expired.cancel()
