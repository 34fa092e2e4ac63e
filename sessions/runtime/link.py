"""This process's link to the channel layer's server (Redis, hosted): up, or down since when and why.

The Redis layer (``inspector/redis_layer.py``) reports here when a receive fails and when it has
reconnected and joined its groups again; an engine worker stops beating while the link is down
(``sessions/runtime/workers.py``), and a session page says "reconnecting to the engine". The
in-memory layer of the embedded set-up has no link: it cannot go down.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["ChannelLayerDown", "Link", "link_of"]


class ChannelLayerDown(ConnectionError):
    """The channel layer's server cannot be reached now: nothing was sent."""


class Link:
    """Whether the channel layer's server answers this process, and a way to wait for a change."""

    def __init__(self) -> None:
        self.problem = ""
        """Why the server cannot be reached (empty while it can)."""
        self.down_since: float | None = None
        self.changes = 0
        """How many times the link went down or came back: what ``changed`` waits to move on."""
        self.outages = 0
        self.last_problem = ""
        """How many times it went down, and why the last time (kept once it is back)."""
        # Futures of whichever event loops wait (a web process may run sync views' loops besides its own).
        self._waiting: list[asyncio.Future[None]] = []

    @property
    def up(self) -> bool:
        return self.down_since is None

    def down(self, problem: str) -> None:
        """A receive failed: the server is unreachable (again) for ``problem``."""
        self.problem = self.last_problem = problem or "the connection was lost"
        if self.down_since is None:
            self.down_since = time.time()
            self.outages += 1
            self._changed()

    def restored(self) -> None:
        """The server answers again and this process is back in its groups."""
        if self.down_since is not None:
            self.problem, self.down_since = "", None
            self._changed()

    async def changed(self, seen: int) -> int:
        """Wait until the link has changed since ``seen`` (a value of ``changes``); the new value."""
        while self.changes == seen:
            waiter = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
        return self.changes

    def _changed(self) -> None:
        self.changes += 1
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.done():
                waiter.get_loop().call_soon_threadsafe(_wake, waiter)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def link_of(layer: Any) -> Link | None:
    """The link of a channel layer that can lose its server; None for one that cannot."""
    link = getattr(layer, "link", None)
    return link if isinstance(link, Link) else None
