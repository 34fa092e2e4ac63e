"""The recorder: frames into the database in batches, off the traffic's path, then to the viewers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, ClassVar

from channels.layers import BaseChannelLayer
from django.db import OperationalError

from sessions.engine import Frame, Verdict
from sessions.frames import answers, frame_row, summary
from sessions.runtime.messages import FramesStored, LiveRows, encode_event
from sessions.runtime.store import store_frames

__all__ = ["Recorder"]

log = logging.getLogger(__name__)

TAIL = 200  # rows a live batch carries at most: viewers in follow mode never show more
MAX_BATCH = 2000


class Recorder:
    """Write frames to the database in batches, off the traffic's path, then tell the viewers.

    Frames are published only after they are stored, so a viewer that catches up from the
    database and then follows the group never misses one.

    Nothing is lost: a batch the database refuses is retried after short delays, holding it and
    every later frame in order; if it still fails, its frames go one at a time, and a frame the
    database refuses even alone is replaced, under its seq, by a placeholder that says why. If the
    database takes nothing at all, the frames wait and are tried again until it answers, or until
    ``close()``, which makes a last attempt and logs which frames were not stored.
    """

    RETRY_DELAYS: ClassVar[tuple[float, ...]] = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
    """Seconds between attempts at a refused batch (or frame); the last one also paces an outage."""

    def __init__(self, session_pk: int, group: str, layer: BaseChannelLayer) -> None:
        self.session_pk = session_pk
        self.group = group
        self.layer = layer
        self.rows: list[dict[str, Any]] = []  # not stored yet, in seq order
        self.stored_seq = 0
        self._wake = asyncio.Event()
        self._stored: asyncio.Condition | None = None  # made by the first wait_stored()
        self._closing = False
        self._closed: asyncio.Event | None = None  # cuts the waits between attempts short (made by one)
        self._abandoned = False  # closed while the database took nothing: what is left stays in rows
        self._held = False  # the session is ending with the process: store what comes at close(), at once
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"recorder-{self.session_pk}")

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._wake.set()

    @property
    def held(self) -> bool:
        """Whether the process is stopping (``hold()``): the session's last writes wait for its end."""
        return self._held

    def hold(self) -> None:
        """Keep new frames until ``close()``, which stores them in one batch: the process is stopping.

        A session's last frames (closing, the DELETE and its answer, closed) each came in a write of
        their own; with a thousand sessions ending at once, those writes were most of the stop.
        """
        self._held = True

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._held and not self._closing:
                continue
            await self._drain()
            if self._closing:
                return

    async def _drain(self) -> None:
        while self.rows and not self._abandoned:
            # The batch stays at the head of rows until it is stored: later frames queue behind it.
            batch = self.rows[:MAX_BATCH]
            error = await self._try(batch)
            if error is None:
                await self._done(batch)
            else:
                await self._recover(batch, error)

    async def _done(self, stored: list[dict[str, Any]]) -> None:
        """``stored`` (the head of rows, or placeholders in their place) is in the database: tell everyone."""
        if not stored:
            return
        del self.rows[: len(stored)]
        self.stored_seq = stored[-1]["seq"]
        if self._stored is not None:
            async with self._stored:
                self._stored.notify_all()
        rows = LiveRows([summary(r) for r in stored[-TAIL:]])  # shared with every tab, not copied
        event = FramesStored(stored[0]["seq"], stored[-1]["seq"], rows, answers(stored))
        with contextlib.suppress(Exception):
            await self.layer.group_send(self.group, encode_event(event))

    # --- when the database refuses ----------------------------------------------------------

    async def _try(self, rows: list[dict[str, Any]]) -> Exception | None:
        """Store ``rows`` in one transaction; the error if the database refused them."""
        try:
            await store_frames(self.session_pk, rows)
        except Exception as exc:
            return exc
        return None

    async def _pause(self, delay: float) -> None:
        """Wait before the next attempt; at once when closing (its last attempts are not delayed)."""
        if delay <= 0 or self._closing:
            await asyncio.sleep(0)
            return
        if self._closed is None:
            self._closed = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await self._closed.wait()

    async def _recover(self, batch: list[dict[str, Any]], error: Exception) -> None:
        """Store a batch the database just refused, or what stands for each of its frames."""
        first, last, pk = batch[0]["seq"], batch[-1]["seq"], self.session_pk
        log.warning("storing frames %d-%d of session %s failed (%s); retrying", first, last, pk, _why(error))
        for delay in self.RETRY_DELAYS:
            await self._pause(delay)
            if (error_again := await self._try(batch)) is None:
                log.warning("frames %d-%d of session %s stored on a retry", first, last, self.session_pk)
                await self._done(batch)
                return
            error = error_again
        log.error(
            "storing frames %d-%d of session %s still fails after %d retries (%s): one at a time now",
            first, last, self.session_pk, len(self.RETRY_DELAYS), _why(error),
        )  # fmt: skip
        # One frame at a time, so that a frame the database refuses does not take the rest with it.
        stored: list[dict[str, Any]] = []
        index, down, regroup = 0, False, False
        while index < len(batch):
            if regroup:  # after a refused frame or an outage, the rest may well go in one batch again
                regroup = False
                if await self._try(batch[index:]) is None:
                    stored += batch[index:]
                    break
            closing = self._closing
            row = batch[index]
            kept = await self._store_alone(row)
            if kept is not None:
                if down:
                    log.warning("the database of session %s answers again", self.session_pk)
                stored.append(kept)
                index += 1
                regroup, down = kept is not row or down, False
                continue
            # Not even a placeholder: the database takes nothing. Keep every frame and try again.
            await self._done(stored)
            stored = []
            if closing:  # that was the last attempt, made after close()
                self._abandoned = True
                return
            if not down:
                down = True
                log.error(
                    "the database takes no frame of session %s (%s): holding %d frames from seq %d, "
                    "trying again every %g s",
                    self.session_pk, _why(error), len(self.rows), row["seq"], self._last_delay,
                )  # fmt: skip
            await self._pause(self._last_delay)
            regroup = True
        await self._done(stored)

    @property
    def _last_delay(self) -> float:
        return self.RETRY_DELAYS[-1] if self.RETRY_DELAYS else 0.0

    async def _store_alone(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """Store one frame, or a placeholder under its seq if the database refuses it; None if neither."""
        error = await self._try([row])
        for delay in self.RETRY_DELAYS:
            # An OperationalError is the database's state more often than the frame's (locked, gone):
            # try the frame again first, so that the attempt that finds the database free stores it.
            if not isinstance(error, OperationalError):
                break
            await self._pause(delay)
            error = await self._try([row])
        if error is None:
            return row
        placeholder = _placeholder(row, error)
        if await self._try([placeholder]) is not None:
            return None
        log.error(
            "frame %d of session %s (%s %s %s, %s bytes) could not be stored (%s): a placeholder stands in",
            row["seq"], self.session_pk, row.get("kind"), row.get("direction"), row.get("method") or "-",
            row.get("size"), _why(error),
        )  # fmt: skip
        return placeholder

    # --- waiting and closing -----------------------------------------------------------------

    async def wait_stored(self, seq: int, timeout: float = 2.0) -> None:
        """Wait (a bounded time) until frame ``seq`` is in the database."""
        if self._stored is None:
            self._stored = asyncio.Condition()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._stored:
                await self._stored.wait_for(lambda: self.stored_seq >= seq)

    async def close(self) -> None:
        """Store everything still buffered, then stop.

        Never cancelled mid-write (that would lose a batch); while the database refuses, the waits
        between attempts are cut short, and once it takes nothing at all one last attempt is made.
        """
        self._closing = True
        if self._closed is not None:
            self._closed.set()
        self._wake.set()
        if self._task is not None:
            await asyncio.shield(self._task)
        await self._drain()
        if self.rows:
            log.critical(
                "session %s closed with %d frames NOT STORED (seq %d-%d): the database refused them",
                self.session_pk, len(self.rows), self.rows[0]["seq"], self.rows[-1]["seq"],
            )  # fmt: skip


def _why(error: BaseException) -> str:
    """An error's type and the first line of its message, short enough for a note."""
    lines = str(error).strip().splitlines()
    message = lines[0][:200] if lines else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _placeholder(row: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """The row that stands, under the same seq, for a frame the database refused: a visible error."""
    seq = row["seq"]
    message = f"frame {seq} could not be stored: {_why(error)}"
    frame = Frame("state", "local", seq=seq, note=message, verdicts=[Verdict("not-stored", "error", message)])
    wall, mono = row.get("wall"), row.get("mono")
    if isinstance(wall, int | float) and isinstance(mono, int | float):
        frame.wall, frame.mono = float(wall), float(mono)  # where the frame was, on the timeline
    return frame_row(frame, 0)
