"""The embedded set-up's channel layer (inspector/layers.py): Channels' own, its clean-up paced. The
first test fails when Channels' layer changes: re-check the subclass against the new code (and its
figures in docs/bench.md) before updating the fingerprint."""

from __future__ import annotations

import hashlib
import inspect
import time

import pytest
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer as ChannelsInMemoryChannelLayer
from django.conf import settings

from inspector.layers import InMemoryChannelLayer


def test_channels_layer_is_the_code_the_subclass_was_written_against() -> None:
    source = inspect.getsource(ChannelsInMemoryChannelLayer)  # Channels 4.3.2
    assert hashlib.sha256(source.encode()).hexdigest()[:16] == "aa69668efe7fe2dd", (
        "channels.layers.InMemoryChannelLayer changed: re-check inspector/layers.py against it"
    )


def test_the_embedded_set_up_uses_it() -> None:
    shared = "channels_redis.core.RedisChannelLayer"
    expected = shared if settings.REDIS_URL else "inspector.layers.InMemoryChannelLayer"
    assert settings.CHANNEL_LAYERS["default"]["BACKEND"] == expected


async def test_the_in_memory_layer_paces_its_clean_up_but_still_expires_messages() -> None:
    layer = InMemoryChannelLayer(expiry=-1, capacity=1)  # every message is expired once sent
    await layer.send("stale", {"type": "x"})
    layer._cleaned = time.monotonic()  # it has just cleaned: the next second's sends do not look
    await layer.group_send("nobody", {"type": "y"})
    with pytest.raises(ChannelFull):
        await layer.send("stale", {"type": "x"})  # the expired message still takes the only place
    layer._cleaned = float("-inf")  # a second later
    await layer.group_send("nobody", {"type": "y"})
    await layer.send("stale", {"type": "z"})  # the expired one went
    assert (await layer.receive("stale"))["type"] == "z"
