"""Password guessing, slowed down: so many failed logins per username and per client address in a window.

The counters live in Django's cache, which every web process shares in the hosted set-up (Redis). A
username is counted whether or not an account has it, and a refusal reads the same either way, so the
limit tells nobody which usernames exist.
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.cache import cache

__all__ = ["REFUSAL", "LoginThrottle"]

REFUSAL = "Too many failed logins. Wait {minutes} minutes, then try again."


def _key(kind: str, value: str) -> str:
    # Hashed: a username or an address is not kept in the cache as typed, and any length fits a key.
    return f"login-failures:{kind}:{hashlib.sha256(value.encode()).hexdigest()}"


class LoginThrottle:
    """The failed-login counters of one attempt: its username's and its client address's."""

    def __init__(self, username: str, address: str) -> None:
        self.user_key = _key("user", username.strip().casefold())
        self.address_key = _key("address", address)
        self.limits = {
            self.user_key: settings.INSPECTOR_LOGIN_FAILURES_PER_USER,
            self.address_key: settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS,
        }

    @staticmethod
    def window() -> int:
        return max(1, int(settings.INSPECTOR_LOGIN_WINDOW))

    def refusal(self) -> str | None:
        """The message to refuse this attempt with, before checking its password; None to go on."""
        counts = cache.get_many(list(self.limits))
        if any(int(counts.get(key) or 0) >= limit for key, limit in self.limits.items()):
            return REFUSAL.format(minutes=max(1, round(self.window() / 60)))
        return None

    def failed(self) -> None:
        """Count a failed attempt against the username and the address (the window starts at the first)."""
        for key in self.limits:
            cache.add(key, 0, timeout=self.window())
            try:
                cache.incr(key)
            except ValueError:
                # The counter expired between add and incr: this failure opens a new window.
                cache.set(key, 1, timeout=self.window())

    def succeeded(self) -> None:
        """A right password clears its username's count (the address's stays: it may be guessing others)."""
        cache.delete(self.user_key)
