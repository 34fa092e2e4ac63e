"""The hosted set-up's channel layer: channels-redis's, which heals when Redis drops its connections and
keeps this deployment's channels and groups apart from another's on the same Redis.

- **Receives outlive the connection.** channels-redis raises a ``ConnectionError`` out of ``receive``
  when Redis drops its connection (a restart, ``CLIENT KILL``, a failover), which ended every receive
  loop of an engine worker (its runtime's, each session owner's) while its heartbeat went on: commands
  sat unread. Here a receive that fails waits for this process's one reconnection (Redis pinged with a
  growing pause), which also adds this process's channels to their groups again (a restarted Redis has
  none), and then receives again. ``link`` (``sessions/runtime/link.py``) says meanwhile that it is
  down and why: a worker stops beating, a page says "reconnecting to the engine".
- **Sends fail clearly.** A send, group send or group change Redis cannot take raises
  ``ChannelLayerDown`` (a ``ConnectionError``), which views answer with a 503.
- **One deployment's names.** The Redis keys of channels and groups start with the layer's prefix
  (channels-redis prefixes both): ``INSPECTOR_CHANNEL_PREFIX`` when set, else one derived from this
  deployment's database (a random key stored there at first start, and where the database is), read
  once, on the layer's first use.

channels-redis is pinned (pyproject.toml); tests/hosted/test_channel_layer.py runs this against a
Redis of the test's own that it restarts and whose clients it kills.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels_redis.core import RedisChannelLayer as ChannelsRedisChannelLayer
from django.db import connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sessions.models import Deployment
from sessions.runtime.link import ChannelLayerDown, Link
from sessions.runtime.store import in_db_thread

__all__ = ["RedisChannelLayer", "deployment_prefix"]

log = logging.getLogger(__name__)

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)
"""What a dropped or refused connection raises (redis-py's errors, and the socket's own)."""
FIRST_PAUSE = 0.05
LONGEST_PAUSE = 2.0
"""Between pings while Redis does not answer: at once for a killed connection, at most this apart."""


def deployment_prefix() -> str:
    """This deployment's prefix: its database's own key and where the database is, hashed.

    The place keeps apart two deployments whose databases were copied from one another (staging
    restored from production) when they are not at the same address; the key, two that are.
    """
    db = connection.settings_dict
    where = "|".join(str(db.get(k) or "") for k in ("ENGINE", "HOST", "PORT", "NAME"))
    identity = f"{Deployment.own_key()}|{where}"
    return "mcp-inspector:" + hashlib.sha256(identity.encode()).hexdigest()[:16] + ":"


class RedisChannelLayer(ChannelsRedisChannelLayer):
    """channels-redis's layer, reconnecting and re-joining its groups; sends that fail say so."""

    def __init__(self, *, prefix: str = "", **config: Any) -> None:
        super().__init__(prefix=prefix or "unresolved:", **config)
        self._prefix_resolved = bool(prefix)
        self.link = Link()
        self._groups: dict[str, set[str]] = {}
        """This process's channels in each group, joined again after a reconnection."""
        self._reconnecting: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
        self._closings = 0
        """How many times this process closed the connections itself (``close_pools``)."""

    async def _resolve_prefix(self) -> None:
        if self._prefix_resolved:
            return
        # Read once per process; any loop may come first (a sync view's, daphne's).
        prefix = await in_db_thread(deployment_prefix)()
        if not self._prefix_resolved:
            self.prefix, self._prefix_resolved = prefix, True

    # --- receiving ------------------------------------------------------------------------------

    async def receive(self, channel: str) -> dict[str, Any]:
        while True:
            await self._resolve_prefix()
            closings = self._closings
            try:
                message: dict[str, Any] = await super().receive(channel)
            except UNREACHABLE as exc:
                if self._closings != closings:
                    raise  # this process closed the connections itself (a stop, a flush): not an outage
                self.link.down(_why(exc))
                await self._reconnected()
                continue
            return message

    async def _reconnected(self) -> None:
        """Wait for this loop's one reconnection, starting it if none runs."""
        loop = asyncio.get_running_loop()
        task = self._reconnecting.get(loop)
        if task is None or task.done():
            task = loop.create_task(self._reconnect(), name="channel-layer-reconnect")
            self._reconnecting[loop] = task
        await asyncio.shield(task)  # a receive cancelled meanwhile leaves the others' reconnection be

    async def _reconnect(self) -> None:
        pause = FIRST_PAUSE
        while True:
            try:
                for index in range(self.ring_size):
                    await self.connection(index).ping()
                await self._join_again()
            except UNREACHABLE as exc:
                self.link.down(_why(exc))
                await asyncio.sleep(pause)
                pause = min(pause * 2, LONGEST_PAUSE)
                continue
            if not self.link.up:
                log.warning("the channel layer reconnected after: %s", self.link.problem)
            self.link.restored()
            return

    async def _join_again(self) -> None:
        for group, channels in list(self._groups.items()):
            for channel in list(channels):
                await super().group_add(group, channel)

    # --- sending and groups -----------------------------------------------------------------

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        await self._again_once(lambda: super(RedisChannelLayer, self).send(channel, message))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        await self._again_once(lambda: super(RedisChannelLayer, self).group_send(group, message))

    async def group_add(self, group: str, channel: str) -> None:
        self._groups.setdefault(group, set()).add(channel)  # joined again once Redis is back, if not now
        await self._again_once(lambda: super(RedisChannelLayer, self).group_add(group, channel))

    async def group_discard(self, group: str, channel: str) -> None:
        channels = self._groups.get(group)
        if channels is not None:
            channels.discard(channel)
            if not channels:
                del self._groups[group]
        await self._again_once(lambda: super(RedisChannelLayer, self).group_discard(group, channel))

    async def flush(self) -> None:
        await self._resolve_prefix()
        self._groups.clear()
        await super().flush()

    async def close_pools(self) -> None:
        self._closings += 1
        await super().close_pools()

    async def _again_once(self, operation: Callable[[], Awaitable[None]]) -> None:
        """Do ``operation``, once more on a new connection if Redis had closed the pooled one (it was
        restarted while that connection sat idle); ``ChannelLayerDown`` if it fails again."""
        await self._resolve_prefix()
        try:
            await operation()
            return
        except UNREACHABLE:
            pass  # redis-py dropped the dead connection: the next command takes a new one
        try:
            await operation()
        except UNREACHABLE as exc:
            raise ChannelLayerDown(_why(exc)) from exc


def _why(exc: BaseException) -> str:
    return f"Redis: {exc}" if str(exc) else f"Redis: {type(exc).__name__}"
