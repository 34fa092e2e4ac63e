"""The login sessions' cache on Redis, read past while Redis is away.

Django's ``cached_db`` sessions read the cache first and fill it after a miss; with Redis down that
fill raised, and every page answered 500 until Redis was back. Here a read Redis cannot answer is a
miss (the database has every session) and a fill it cannot take is skipped; a delete still raises, so
a login ended while Redis is away is never left valid in the cache.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["SessionCache"]

log = logging.getLogger(__name__)

UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError)


class SessionCache(RedisCache):
    """Django's Redis cache, whose reads miss and fills are skipped while Redis cannot be reached."""

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        try:
            return super().get(key, default, version)
        except UNREACHABLE as exc:
            log.warning("the session cache is unreachable, reading the database: %s", exc)
            return default

    def set(self, key: Any, value: Any, timeout: Any = None, version: int | None = None) -> None:
        try:
            super().set(key, value, timeout, version)
        except UNREACHABLE as exc:
            log.warning("the session cache is unreachable, not filled: %s", exc)
