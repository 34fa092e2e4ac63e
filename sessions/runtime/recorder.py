"""The recorder: frames into the database in batches, off the traffic's path, then to the viewers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.layers import BaseChannelLayer

from sessions.frames import summary
from sessions.runtime.messages import FramesStored, encode_event
from sessions.runtime.store import store_frames

__all__ = ["Recorder"]

log = logging.getLogger(__name__)

TAIL = 200  # rows a live batch carries at most: viewers in follow mode never show more
MAX_BATCH = 2000


class Recorder:
    """Write frames to the database in batches, off the traffic's path, then tell the viewers.

    Frames are published only after they are stored, so a viewer that catches up from the
    database and then follows the group never misses one.
    """

    def __init__(self, session_pk: int, group: str, layer: BaseChannelLayer) -> None:
        self.session_pk = session_pk
        self.group = group
        self.layer = layer
        self.rows: list[dict[str, Any]] = []
        self.stored_seq = 0
        self._wake = asyncio.Event()
        self._stored = asyncio.Condition()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"recorder-{self.session_pk}")

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._drain()
            if self._closing:
                return

    async def _drain(self) -> None:
        while self.rows:
            batch, self.rows = self.rows[:MAX_BATCH], self.rows[MAX_BATCH:]
            try:
                await store_frames(self.session_pk, batch)
            except Exception:
                log.exception("storing %d frames of session %s failed", len(batch), self.session_pk)
                continue
            self.stored_seq = batch[-1]["seq"]
            async with self._stored:
                self._stored.notify_all()
            event = FramesStored(batch[0]["seq"], batch[-1]["seq"], [summary(r) for r in batch[-TAIL:]])
            with contextlib.suppress(Exception):
                await self.layer.group_send(self.group, encode_event(event))

    async def wait_stored(self, seq: int, timeout: float = 2.0) -> None:
        """Wait (a bounded time) until frame ``seq`` is in the database."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._stored:
                await self._stored.wait_for(lambda: self.stored_seq >= seq)

    async def close(self) -> None:
        """Store everything still buffered, then stop (never cancelled mid-write: that would lose a batch)."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._drain()
