"""The recorder: frames into the database in batches, off the traffic's path, then to the viewers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, ClassVar

from channels.layers import BaseChannelLayer
from django.conf import settings
from django.db import OperationalError

from sessions.engine import Frame, Verdict
from sessions.frames import answers, frame_row, summary
from sessions.runtime import storage
from sessions.runtime.messages import Event, FramesStored, LiveRows, StorageChanged, encode_event
from sessions.runtime.store import Disowned, store_frames

__all__ = ["Recorder"]

log = logging.getLogger(__name__)

TAIL = 200  # rows a live batch carries at most: viewers in follow mode never show more
MAX_BATCH = 2000
NOT_STORED = "not-stored"  # the state of a gap's marker frame, and the code of its verdict
REPORT_EVERY = 1.0  # seconds between the live counts viewers get while storage fails


class Recorder:
    """Write frames to the database in batches, off the traffic's path, then tell the viewers.

    Frames are published only after they are stored, so a viewer that catches up from the
    database and then follows the group never misses one.

    Nothing is lost: a batch the database refuses is retried after short delays, holding it and
    every later frame in order; if it still fails, its frames go one at a time, and a frame the
    database refuses even alone is replaced, under its seq, by a placeholder that says why. If the
    database takes nothing at all, the frames wait and are tried again until it answers, or until
    ``close()``, which makes a last attempt and logs which frames were not stored.

    Memory stays bounded: while writes fail, at most ``INSPECTOR_MAX_HELD_FRAMES`` frames (and
    ``INSPECTOR_MAX_HELD_BYTES`` of their bytes) are held; each frame past that is lost, and a run of
    lost frames is recorded as one ``not-stored`` gap, a state frame under the first lost frame's seq,
    stored in its place once the database takes writes again. Viewers hear how many frames are held
    and lost every second while it lasts (``StorageChanged``), and when it ends.

    With ``owner_channel`` it writes only while the session is still that owner's: once it is not
    (declared lost while the process was stopped, then resumed), it drops what it holds, stores
    nothing more, and calls ``disowned``.
    """

    RETRY_DELAYS: ClassVar[tuple[float, ...]] = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)
    """Seconds between attempts at a refused batch (or frame); the last one also paces an outage."""

    def __init__(
        self,
        session_pk: int,
        group: str,
        layer: BaseChannelLayer,
        *,
        owner_channel: str = "",
        disowned: Callable[[], None] | None = None,
    ) -> None:
        self.session_pk = session_pk
        self.group = group
        self.layer = layer
        self.owner_channel = owner_channel
        self._on_disowned = disowned
        self.disowned = False
        self.rows: list[dict[str, Any]] = []  # not stored yet, in seq order
        self.stored_seq = 0
        self.max_held = (settings.INSPECTOR_MAX_HELD_FRAMES, settings.INSPECTOR_MAX_HELD_BYTES)
        self._held_bytes = 0
        self.failing = ""  # why the database refuses writes now ("" while it takes them)
        self.lost = 0  # frames lost so far, past the bound on what is held
        self._gap: _Gap | None = None  # the run of lost frames still growing, its marker the last row
        self._reporter: asyncio.Task[None] | None = None
        self.unstored: tuple[int, str, bool] | None = None
        """At close, when frames were left: how many, why, and whether a gap was stored for them."""
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
        if self.disowned:
            return
        if self.failing and (len(self.rows) >= self.max_held[0] or self._held_bytes >= self.max_held[1]):
            self._lose(row)
            return
        self.rows.append(row)
        self._held_bytes += row["size"]
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
        while self.rows and not self._abandoned and not self.disowned:
            # The batch stays at the head of rows until it is stored: later frames queue behind it.
            batch = self.rows[:MAX_BATCH]
            error = await self._try(batch)
            if self.disowned:
                return
            if error is None:
                await self._done(batch)
            else:
                await self._recover(batch, error)
                if self.disowned or self._abandoned:
                    return
            self._recovered()

    async def _done(self, stored: list[dict[str, Any]]) -> None:
        """``stored`` (the head of rows, or placeholders in their place) is in the database: tell everyone."""
        if not stored:
            return
        self._held_bytes -= sum(r["size"] for r in self.rows[: len(stored)])
        del self.rows[: len(stored)]
        self.stored_seq = _covered(stored[-1])
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
        if self._gap is not None and rows and rows[-1] is self._gap.marker:
            self._seal()  # what it says is final once it may be written: later losses open a gap of their own
        try:
            await store_frames(self.session_pk, rows, self.owner_channel, _covered(rows[-1]))
        except Disowned:
            self._disown()
            return None
        except Exception as exc:
            self._fail(exc)
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
                if self.disowned:
                    return
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
                    if self.disowned:
                        return
                    stored += batch[index:]
                    break
            closing = self._closing
            row = batch[index]
            kept = await self._store_alone(row)
            if self.disowned:
                return
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
                    "the database takes no frame of session %s (%s): holding up to %d frames from seq %d, "
                    "trying again every %g s",
                    self.session_pk, _why(error), self.max_held[0], row["seq"], self._last_delay,
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
            if self.disowned:
                return row
            # An OperationalError is the database's state more often than the frame's (locked, gone):
            # try the frame again first, so that the attempt that finds the database free stores it.
            if not isinstance(error, OperationalError):
                break
            await self._pause(delay)
            error = await self._try([row])
        if error is None or self.disowned:
            return row
        if storage.is_full(error):
            return None  # not the frame's fault: it is held (within the bound) until there is room
        placeholder = _placeholder(row, error)
        if await self._try([placeholder]) is not None:
            return None
        log.error(
            "frame %d of session %s (%s %s %s, %s bytes) could not be stored (%s): a placeholder stands in",
            row["seq"], self.session_pk, row.get("kind"), row.get("direction"), row.get("method") or "-",
            row.get("size"), _why(error),
        )  # fmt: skip
        return placeholder

    # --- when storage fails for a while: held, lost, told ----------------------------------------

    def _fail(self, error: BaseException) -> None:
        """A write was refused: from now on what is held is bounded, and viewers hear of it."""
        if not self.failing:
            self._trim()
        self.failing = storage.cause(error)
        if self._reporter is None and not self._closing:
            self._reporter = asyncio.create_task(self._report(), name=f"recorder-report-{self.session_pk}")

    def _recovered(self) -> None:
        """Writes succeed again: the gap so far is final, and viewers hear that it is over."""
        if not self.failing:
            return
        if self._gap is not None:
            self._seal()
        self.failing = ""
        if self._reporter is not None:
            self._reporter.cancel()
            self._reporter = None
            self._tell(StorageChanged("", len(self.rows), self.lost))

    def _trim(self) -> None:
        """Writes just started failing: what was queued past the bound (a flood's backlog) is lost too.

        Never the rows a write in flight may hold (the first ``MAX_BATCH``): they stay until it ends.
        """
        frames, size = self.max_held
        keep, held = 0, 0
        for row in self.rows:
            if keep >= max(frames, MAX_BATCH) or (keep >= MAX_BATCH and held >= size):
                break
            keep, held = keep + 1, held + row["size"]
        dropped = self.rows[keep:]
        if not dropped:
            return
        del self.rows[keep:]
        self._held_bytes = held
        for row in dropped:
            if count := _gap_count(row):  # an earlier gap not stored yet: its frames join this one
                self.lost -= count
                self._lose(row, count, _covered(row))
            else:
                self._lose(row)

    def _lose(self, row: dict[str, Any], count: int = 1, last: int = 0) -> None:
        """A frame past the bound on what is held: counted in the open gap, whose marker is the last row."""
        self.lost += count
        if self._gap is None:
            self._gap = _Gap(row, self.failing)
            self.rows.append(self._gap.marker)
            self._wake.set()
        self._gap.last = last or row["seq"]
        self._gap.count += count

    def _seal(self) -> None:
        """Write what the open gap's marker says (it is about to be stored, or no more frames join it)."""
        gap, self._gap = self._gap, None
        if gap is not None:
            gap.marker.update(_gap_row(gap.marker, gap.last, gap.count, self.failing or gap.why))

    def _disown(self) -> None:
        """The session is not this owner's any more: hold nothing, store nothing, tell the owner once."""
        if self.disowned:
            return
        self.disowned = True
        log.warning(
            "session %s is no longer this process's (declared lost?): %d frames it held are dropped",
            self.session_pk, len(self.rows),
        )  # fmt: skip
        self.rows.clear()
        self._held_bytes = 0
        self._gap = None
        if self._on_disowned is not None:
            self._on_disowned()

    async def _report(self) -> None:
        """While writes fail, tell viewers how many frames are held and lost, every ``REPORT_EVERY``."""
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                await asyncio.sleep(REPORT_EVERY)
                self._tell(StorageChanged(self.failing, len(self.rows), self.lost))

    def _tell(self, event: Event) -> None:
        """Publish to the session's group without waiting (a channel layer that fails is not ours to fix)."""

        async def send() -> None:
            with contextlib.suppress(Exception):
                await self.layer.group_send(self.group, encode_event(event))

        asyncio.ensure_future(send())

    def ending_note(self, reason: str) -> str:
        """The session's status note at its end: ``reason``, and what was not stored, if anything."""
        unstored = self.unstored
        if not unstored:
            return reason
        count, why, recorded = unstored
        where = "recorded as a gap in the timeline" if recorded else "the database took not even a note of it"
        return f"{reason}; {count} frames not stored ({why}): {where}"

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
        if self._reporter is not None:
            self._reporter.cancel()
        if self.rows and not self.disowned:
            await self._last_gap()
        elif self._reporter is not None:
            self._tell(StorageChanged("", 0, self.lost))

    async def _last_gap(self) -> None:
        """The database took the frames still held at close: one ``not-stored`` gap stands for them all."""
        if self._gap is not None:
            self._seal()
        first, last = self.rows[0]["seq"], _covered(self.rows[-1])
        count = sum(_gap_count(r) or 1 for r in self.rows)
        why = self.failing or "the database refused them"
        marker = _gap_row(self.rows[0], last, count, why)
        try:
            await store_frames(self.session_pk, [marker], self.owner_channel, last)
        except Exception:
            recorded = False
        else:
            recorded = True
        self.lost += sum(1 for r in self.rows if not _gap_count(r))
        self.unstored = (count, why, recorded)
        log.critical(
            "session %s closed with %d frames NOT STORED (seq %d-%d): the database refused them (%s); %s",
            self.session_pk, count, first, last, why,
            "a not-stored gap stands for them" if recorded else "not even a gap could be stored",
        )  # fmt: skip
        self._tell(StorageChanged(why, 0, self.lost))


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


class _Gap:
    """A run of lost frames still growing: its marker row (the last held row), last seq and count."""

    __slots__ = ("count", "last", "marker", "why")

    def __init__(self, first: dict[str, Any], why: str) -> None:
        self.marker = _gap_row(first, first["seq"], 0, why)
        self.last = first["seq"]
        self.count = 0
        self.why = why


def _gap_row(first: dict[str, Any], last: int, count: int, why: str) -> dict[str, Any]:
    """The state frame standing, under the seq of ``first``, for ``count`` lost frames up to ``last``."""
    seq = first["seq"]
    span = f"seq {seq}" if last == seq else f"seq {seq}-{last}"
    message = f"{count} frames not stored ({why or 'the database refused them'}): {span}"
    transport = {"state": NOT_STORED, "first": seq, "last": last, "count": count}
    verdict = Verdict(NOT_STORED, "error", message)
    frame = Frame("state", "local", seq=seq, note=message, transport=transport, verdicts=[verdict])
    wall, mono = first.get("wall"), first.get("mono")
    if isinstance(wall, int | float) and isinstance(mono, int | float):
        frame.wall, frame.mono = float(wall), float(mono)
    return frame_row(frame, 0)


def _gap_count(row: dict[str, Any]) -> int:
    """How many frames a gap's marker stands for (0 for any other row)."""
    transport = row.get("transport")
    if row.get("kind") == "state" and isinstance(transport, dict) and transport.get("state") == NOT_STORED:
        return int(transport.get("count") or 0)
    return 0


def _covered(row: dict[str, Any]) -> int:
    """The last seq a row accounts for: its own, or the last of the frames a gap's marker stands for."""
    if _gap_count(row):
        return int(row["transport"]["last"])
    return int(row["seq"])
