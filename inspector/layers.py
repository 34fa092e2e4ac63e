"""The in-memory channel layer of the embedded set-up, with its clean-up paced.

Channels' ``InMemoryChannelLayer`` looks through every channel and every group for expired messages
and memberships on every ``receive`` and every ``send`` to a group. Each live session's owner waits
on a channel of its own, so with thousands of live sessions each of those went through thousands of
queues: a tool call, and opening or stopping sessions, slowed with their number (docs/bench.md,
"Workarounds: what went, what stayed"). Here the same clean-up runs at most once every
``CLEAN_EVERY`` seconds: a message still expires (60 s unread, as before) and a membership after a
day, just up to a second later. Channels is pinned (pyproject.toml), and tests/project/test_layers.py fails
when its layer's code changes.
"""

from __future__ import annotations

import time

from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer

__all__ = ["InMemoryChannelLayer"]

CLEAN_EVERY = 1.0


class InMemoryChannelLayer(ChannelsInMemoryChannelLayer):
    """Channels' in-memory layer, cleaning expired messages and memberships once a second at most."""

    _cleaned = float("-inf")

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now - self._cleaned < CLEAN_EVERY:
            return
        self._cleaned = now
        super()._clean_expired()
