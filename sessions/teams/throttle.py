"""Password guessing, slowed down: so many failed logins per username and per client address in a window.

The counters live in Django's cache, which every web process shares in the hosted set-up (Redis). An
attempt is counted before its password is checked (a reservation, taken atomically), so however many
arrive at once, no more than the limit get their password checked; a right password gives its
reservation back. A username is counted whether or not an account has it, and a refusal reads the same
either way, so the limit tells nobody which usernames exist.
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import logging
import unicodedata
from dataclasses import dataclass, replace

from django.conf import settings
from django.contrib.auth.forms import UsernameField
from django.core.cache import cache

log = logging.getLogger(__name__)

__all__ = [
    "REFUSAL",
    "INVITATION_REFUSAL",
    "Counter",
    "LoginThrottle",
    "Throttle",
    "address_group",
    "sign_up_throttle",
    "username_key",
]

REFUSAL = "Too many failed logins. Wait {minutes} minutes, then try again."
ADDRESS_REFUSAL = "Too many failed attempts from your address. Wait {minutes} minutes, then try again."
INVITATION_REFUSAL = (
    "This invitation has had too many failed attempts to make an account. Ask a team admin for a new one."
)


@functools.cache
def unreachable() -> tuple[type[Exception], ...]:
    """What a cache that cannot be reached raises: the hosted set-up keeps the counters in Redis; the
    local one in memory, which cannot fail, and it does not import Redis's client to say so."""
    if "redis" not in settings.CACHES["default"]["BACKEND"].lower():
        return (OSError,)
    from redis.exceptions import ConnectionError as RedisDown
    from redis.exceptions import TimeoutError as RedisSlow

    return (RedisDown, RedisSlow, OSError)


def _key(kind: str, value: str) -> str:
    # Hashed: a username or an address is not kept in the cache as typed, and any length fits a key.
    return f"login-failures:{kind}:{hashlib.sha256(value.encode()).hexdigest()}"


def username_key(username: str) -> str:
    """The username as the login form hands it to the account lookup, case-folded: every spelling that
    can log in as one account (full-width, ligatures, other letter cases) is counted as one."""
    # The login form's own field (it strips and applies NFKC), so the key follows Django's normalisation.
    normalised = str(UsernameField().to_python(username))
    return unicodedata.normalize("NFKC", normalised.casefold())


def address_group(address: str) -> str:
    """The client address as one counter: IPv4 as it is, IPv6 by its /64 (one site's whole network, as a
    host is handed one), an IPv4-mapped IPv6 as its IPv4; anything else as written, lower-cased."""
    text = address.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]  # "[v6]" or "[v6]:port", as some proxies write it
    elif text.count(":") == 1:
        text = text.split(":")[0]  # "v4:port"
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address.strip().casefold()
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


@dataclass(frozen=True)
class Counter:
    """One count of failures: its cache key, how many it allows, for how long it keeps them, and what a
    refused attempt is told (``{minutes}`` for the window)."""

    key: str
    limit: int
    window: int
    refusal: str = REFUSAL
    status: int = 429
    """What a refused attempt is answered: 429, or 503 when nothing can be counted."""

    def message(self) -> str:
        return self.refusal.format(minutes=max(1, round(self.window / 60)))


UNCOUNTED = Counter(
    "",
    0,
    5,
    "Logins are paused for a moment: the store that counts failed logins cannot be reached. Try again soon.",
    status=503,
)


class Throttle:
    """Failure counters that one attempt reserves a place in, all or none, before its secret is checked."""

    def __init__(self, *counters: Counter) -> None:
        self.counters = counters
        self.reserved = False

    def reserve(self) -> Counter | None:
        """Count this attempt as failed now, before its secret is checked; the counter that refuses it
        (with nothing counted) when one is already at its limit, else None to go on."""
        taken: list[Counter] = []
        try:
            for counter in self.counters:
                taken.append(counter)
                if _incr(counter) > counter.limit:
                    for held in taken:
                        _decr(held)
                    return counter
        except unreachable() as exc:
            # Refused rather than unlimited: while the counters cannot be kept, no guess is checked.
            log.warning("the login limits cannot be counted, refusing: %s", exc)
            return UNCOUNTED
        self.reserved = True
        return None

    def release(self) -> None:
        """The attempt did not fail (or its secret was never checked): give its places back."""
        if self.reserved:
            self.reserved = False
            for counter in self.counters:
                _decr(counter)


def _incr(counter: Counter) -> int:
    # add() opens the window at the first failure; incr() is atomic in Redis and in the local cache.
    for _ in range(3):
        cache.add(counter.key, 0, timeout=counter.window)
        try:
            count = int(cache.incr(counter.key))
        except ValueError:
            continue  # the counter expired between add and incr: open a new window
        if count == 1:
            # Redis's INCR of a key that expired just after its existence check makes it without expiry.
            cache.touch(counter.key, counter.window)
        return count
    # The cache drops the key as soon as it is made: it counts nothing, so neither can we.
    return 1


def _decr(counter: Counter) -> None:
    try:
        count = int(cache.decr(counter.key))
    except ValueError:
        return  # expired (or cleared by a success) meanwhile: nothing left to give back
    except unreachable() as exc:
        log.warning("a login limit's place could not be given back: %s", exc)  # it counts one more
        return
    if count <= 0:
        # As above: a DECR after expiry makes a key without expiry, which must not outlive the window.
        cache.touch(counter.key, counter.window)


def _window() -> int:
    return max(1, int(settings.INSPECTOR_LOGIN_WINDOW))


def _address_counter(address: str) -> Counter:
    return Counter(
        _key("address", address_group(address)), settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS, _window()
    )


class LoginThrottle(Throttle):
    """The failed-login counters of one attempt: its username's and its client address's."""

    def __init__(self, username: str, address: str) -> None:
        self.user = Counter(
            _key("user", username_key(username)), settings.INSPECTOR_LOGIN_FAILURES_PER_USER, _window()
        )
        self.address = _address_counter(address)
        super().__init__(self.user, self.address)

    def succeeded(self) -> None:
        """A right password clears its username's count and gives back the address's place (the address's
        earlier failures stay: it may be guessing others)."""
        if self.reserved:
            _decr(self.address)
        self.reserved = False
        try:
            cache.delete(self.user.key)
        except unreachable() as exc:
            log.warning("a login limit could not be cleared: %s", exc)  # it runs out by itself


def sign_up_throttle(invitation_id: int, lifetime: int, address: str) -> Throttle:
    """Failed attempts to make an account with an invitation, each of which tells whether a username is
    taken: so many over the invitation's whole life, and from one address (counted with its logins)."""
    invitation = Counter(
        _key("invitation", str(invitation_id)),
        settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS,
        max(1, lifetime),
        INVITATION_REFUSAL,
    )
    return Throttle(invitation, replace(_address_counter(address), refusal=ADDRESS_REFUSAL))
