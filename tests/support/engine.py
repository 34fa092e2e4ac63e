"""Helpers for engine tests: a recorder of every event, with waits bounded by a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from sessions.engine import ClientSession, Event, Frame, PendingRequest

WAIT = 15.0


class EventLog:
    """Subscribe to a session and keep every event; wait for one that matches, with a deadline."""

    def __init__(self, session: ClientSession) -> None:
        self.events: list[Event] = []
        self._changed = asyncio.Event()
        session.subscribe(self._add)

    def _add(self, event: Event) -> None:
        self.events.append(event)
        self._changed.set()

    @property
    def frames(self) -> list[Frame]:
        return [e for e in self.events if isinstance(e, Frame)]

    def messages(self, direction: str | None = None, method: str | None = None) -> list[Frame]:
        return [
            f
            for f in self.frames
            if f.kind == "message"
            and (direction is None or f.direction == direction)
            and (method is None or f.method == method)
        ]

    def codes(self) -> list[str]:
        return [v.code for f in self.frames for v in f.verdicts]

    async def wait_for(
        self, predicate: Callable[[Event], bool], timeout: float = WAIT, *, since: int = 0
    ) -> Any:
        """Return the first event (from index ``since`` on) that matches, waiting up to ``timeout``."""
        async with asyncio.timeout(timeout):
            seen = since
            while True:
                for event in self.events[seen:]:
                    if predicate(event):
                        return event
                seen = len(self.events)
                self._changed.clear()
                await self._changed.wait()

    async def pending(self, method: str, timeout: float = WAIT) -> PendingRequest:
        event: PendingRequest = await self.wait_for(
            lambda e: isinstance(e, PendingRequest) and e.method == method, timeout
        )
        return event


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
