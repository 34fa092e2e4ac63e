"""Limits: how much one session may record, and how many live sessions a team may run.

A session counts its frames and their bytes (what the timeline stores of each: ``Frame.raw``) across
reconnects. The frame that reaches ``INSPECTOR_MAX_SESSION_FRAMES`` or ``INSPECTOR_MAX_SESSION_BYTES``
is stored like every frame before it; then one ``state`` frame says which limit and its value, and the
session ends: what the engine receives after it is not recorded. 0 means no limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from sessions.engine import Frame

__all__ = [
    "LimitReached",
    "SessionBudget",
]


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


def _bytes(count: int) -> str:
    """A byte count as a person reads it: ``1 GiB``, ``1.5 MiB``, ``4,000 bytes``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.4g} {unit} ({count:,} bytes)"
    return f"{count:,} bytes"
