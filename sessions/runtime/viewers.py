"""A live session's viewers: how many tabs watch it, and the idle timer that ends it when none does.

Each tab's consumer tells the owner when it starts and stops watching (``Viewer``, +1 or -1). With no
viewer, the session ends after ``INSPECTOR_IDLE_TIMEOUT`` seconds (0: never); a viewer coming back
before then keeps it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from django.conf import settings

__all__ = ["Viewers"]


class Viewers:
    """The count of a session's viewers, and the timer armed while it is 0."""

    __slots__ = ("_idle", "_stop", "count")

    def __init__(self, stop: Callable[[str], None]) -> None:
        self._stop = stop
        """Ends the session, saying why."""
        self.count = 0
        self._idle: asyncio.TimerHandle | None = None

    def changed(self, delta: int) -> None:
        """A tab started (+1) or stopped (-1) watching."""
        self.count += delta
        self.arm()

    def arm(self) -> None:
        """Start the idle timer again if nobody watches (and the setting has one); stop it otherwise."""
        self.disarm()
        timeout = settings.INSPECTOR_IDLE_TIMEOUT
        if self.count <= 0 and timeout > 0:
            self._idle = asyncio.get_running_loop().call_later(
                timeout, self._stop, f"no viewer for {timeout:g} s (INSPECTOR_IDLE_TIMEOUT)"
            )

    def disarm(self) -> None:
        """Stop the idle timer: the session is ending, or someone watches."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    @property
    def idle(self) -> bool:
        """Whether the idle timer is running."""
        return self._idle is not None
