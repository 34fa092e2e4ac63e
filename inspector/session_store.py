"""Login sessions: Django's ``cached_db``, which keeps a login in the cache alone when the disk is full.

Locally the cache is this process's memory and the one-time token dies with the process anyway, so a
login the database cannot take lasts as long as the process, which is as long as its token would have.
Hosted, a login must be in the database (its ``LoginSession`` row is how it is listed and ended), so
the database's refusal stands there: the request is answered 503 (``StorageFullMiddleware``).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.sessions.backends import cached_db
from django.contrib.sessions.backends.base import UpdateError
from django.core.cache import caches
from django.db import DatabaseError

from sessions.runtime import storage

__all__ = ["SessionStore"]

log = logging.getLogger(__name__)


def _cache_only(error: Exception) -> bool:
    return not settings.INSPECTOR_HOSTED and storage.is_full(error)


class SessionStore(cached_db.SessionStore):
    """``cached_db``: the cache before the database; locally, the cache alone while the disk is full."""

    def save(self, must_create: bool = False) -> None:
        try:
            super().save(must_create)
        except (DatabaseError, UpdateError) as error:  # UpdateError: a DatabaseError, said otherwise
            if not _cache_only(error):
                raise
            log.warning("the disk is full: this login is kept in memory only, until the inspector stops")
            cache = caches[settings.SESSION_CACHE_ALIAS]
            cache.set(self.cache_key, dict(self.items()), self.get_expiry_age())

    def delete(self, session_key: Any = None) -> None:
        try:
            super().delete(session_key)
        except (DatabaseError, UpdateError) as error:  # UpdateError: a DatabaseError, said otherwise
            if not _cache_only(error):
                raise
            key = session_key or self.session_key or ""
            caches[settings.SESSION_CACHE_ALIAS].delete(self.cache_key_prefix + key)
