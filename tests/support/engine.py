"""Helpers for engine tests: a recorder of every event, with waits bounded by a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sessions.engine import ClientSession, Event, Frame, PendingRequest
from sessions.engine.testing import Recorder

WAIT = 15.0


class EventLog(Recorder):
    """The engine's test recorder, plus the messages of one direction or method."""

    def messages(self, direction: str | None = None, method: str | None = None) -> list[Frame]:
        return [
            f
            for f in self.frames
            if f.kind == "message"
            and (direction is None or f.direction == direction)
            and (method is None or f.method == method)
        ]

    # Real servers on a loaded machine: a longer default wait than the scripted transport needs.
    async def wait_for(
        self, predicate: Callable[[Event], bool], *, timeout: float = WAIT, since: int = 0
    ) -> Event:
        return await super().wait_for(predicate, timeout=timeout, since=since)

    async def pending(self, method: str, *, timeout: float = WAIT) -> PendingRequest:
        return await super().pending(method, timeout=timeout)


async def wait_for_tool(session: ClientSession, log: EventLog, name: str, timeout: float = WAIT) -> None:
    """Wait until the server lists a tool; server-everything adds capability-gated tools a moment
    after `initialized`, announcing them with notifications/tools/list_changed."""
    async with asyncio.timeout(timeout):
        while True:
            mark = len(log.events)
            if name in {t["name"] for t in await session.list_all("tools/list", "tools")}:
                return
            await log.wait_for(
                lambda e: isinstance(e, Frame) and e.method == "notifications/tools/list_changed", since=mark
            )
