"""A Redis cache for tests that share Redis's databases with other tests running beside them."""

from __future__ import annotations

import uuid
from typing import Any

from django.core.cache.backends.redis import RedisCache

# No hosted test's Redis database (they use 2 to 15): flushing it would end their logins.
DATABASE = "redis://127.0.0.1:6379/1"


class PrefixedRedisCache(RedisCache):
    """Django's Redis cache whose clear() forgets this cache's own keys, not the whole database (which
    Django's does with FLUSHDB, under other tests' counters)."""

    def clear(self) -> None:
        client = self._cache.get_client(None, write=True)  # type: ignore[attr-defined]
        keys = list(client.scan_iter(match=f"{self.key_prefix}:*"))
        if keys:
            client.delete(*keys)


def shared_redis_cache() -> dict[str, Any]:
    """CACHES for a test that counts through Redis, as web processes sharing one do: its own key prefix."""
    return {
        "default": {
            "BACKEND": "support.caches.PrefixedRedisCache",
            "LOCATION": DATABASE,
            "KEY_PREFIX": f"test-{uuid.uuid4().hex}",
        }
    }
