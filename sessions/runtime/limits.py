"""Limits: how much one session may record.

A session counts its frames and their bytes (what the timeline stores of each: ``Frame.raw``) across
reconnects. The frame that reaches ``INSPECTOR_MAX_SESSION_FRAMES`` or ``INSPECTOR_MAX_SESSION_BYTES``
is stored like every frame before it; then one ``state`` frame says which limit and its value, and the
session ends: what the engine receives after it is not recorded. 0 means no limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from sessions.engine import Frame

__all__ = [
    "LimitReached",
    "SessionBudget",
    "SessionLimits",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LimitReached:
    """The limit a session reached: the setting that sets it, its value, and what to tell a person."""

    setting: str
    value: int
    message: str

    def frame(self, seq: int) -> Frame:
        """The ``state`` frame that ends the session's timeline, numbered ``seq`` by the engine's count."""
        transport = {"state": "limit", "limit": self.setting, "value": self.value}
        return Frame("state", "local", seq=seq, transport=transport, note=self.message)


@dataclass(slots=True)
class SessionBudget:
    """How much a session has recorded against its limits (0: none)."""

    max_frames: int
    max_bytes: int
    frames: int = 0
    size: int = 0
    """The bytes recorded so far."""

    @classmethod
    def from_settings(cls, frames: int = 0, size: int = 0) -> SessionBudget:
        """The current settings' limits, with what the session already holds."""
        return cls(settings.INSPECTOR_MAX_SESSION_FRAMES, settings.INSPECTOR_MAX_SESSION_BYTES, frames, size)

    def count(self, size: int) -> LimitReached | None:
        """Count one recorded frame of ``size`` bytes; the limit it reached, if it did."""
        self.frames += 1
        self.size += size
        return self.reached()

    def reached(self) -> LimitReached | None:
        """The limit the session has reached (a session that reached one may record nothing more)."""
        if self.max_frames and self.frames >= self.max_frames:
            return LimitReached(
                "INSPECTOR_MAX_SESSION_FRAMES",
                self.max_frames,
                f"the session reached its limit of {self.max_frames:,} frames "
                "(INSPECTOR_MAX_SESSION_FRAMES): ended, every frame up to the limit is kept",
            )
        if self.max_bytes and self.size >= self.max_bytes:
            return LimitReached(
                "INSPECTOR_MAX_SESSION_BYTES",
                self.max_bytes,
                f"the session reached its limit of {_bytes(self.max_bytes)} of frames "
                "(INSPECTOR_MAX_SESSION_BYTES): ended, every frame up to the limit is kept",
            )
        return None


class SessionLimits:
    """A live session's limits: it counts each frame recorded, and ends the session at a limit."""

    __slots__ = ("_record", "_stop", "budget", "limited", "session_pk")

    def __init__(
        self, session_pk: int, record: Callable[[Callable[[int], Frame]], None], stop: Callable[[str], None]
    ) -> None:
        self.session_pk = session_pk
        self._record = record
        """Records the frame the callable makes from the next sequence number of the engine's count."""
        self._stop = stop
        self.budget = SessionBudget(0, 0)
        self.limited = False
        """The session reached a limit: it is ending, and records nothing more."""

    def start(self, frames: int, size: int) -> None:
        """Take the current settings' limits, with what the session already holds (it may be a reconnect)."""
        self.budget = SessionBudget.from_settings(frames=frames, size=size)

    def end_if_full(self) -> bool:
        """End the session if it already holds all it may (a reconnect); whether it did."""
        if (reached := self.budget.reached()) is None:
            return False
        self.end(reached)
        return True

    def count(self, size: int) -> None:
        """Count one frame recorded, of ``size`` bytes; the session ends if it reached a limit."""
        if (reached := self.budget.count(size)) is not None:
            self.end(reached)

    def end(self, reached: LimitReached) -> None:
        """Every frame so far is recorded; one more says which limit was reached, then the session ends."""
        self.limited = True
        self._record(reached.frame)
        log.warning("session %s ended: %s", self.session_pk, reached.message)
        self._stop(reached.message)


def _bytes(count: int) -> str:
    """A byte count as a person reads it: ``1 GiB``, ``1.5 MiB``, ``4,000 bytes``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.4g} {unit} ({count:,} bytes)"
    return f"{count:,} bytes"
