"""Where a person is signed in: a ``LoginSession`` per browser, recorded at login and dropped at logout,
so the account page can list them and end the others (their Django sessions deleted from the store)."""

from __future__ import annotations

import getpass
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest

from sessions.teams.models import LoginSession

__all__ = [
    "LoginError",
    "client_address",
    "end_login",
    "end_other_logins",
    "follow_new_key",
    "forget_login",
    "live_logins",
    "record_login",
]


class LoginError(ValueError):
    """A login session that cannot be ended this way (the current one: log out instead)."""


def _store(session_key: str | None = None) -> SessionBase:
    engine = import_module(settings.SESSION_ENGINE)
    store: SessionBase = engine.SessionStore(session_key)
    return store


def client_address(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or what the last ``INSPECTOR_PROXIES`` proxies say it was."""
    address = str(request.META.get("REMOTE_ADDR") or "")
    proxies = int(getattr(settings, "INSPECTOR_PROXIES", 0) or 0)
    if proxies > 0:
        # Each proxy appends the address it was reached from; only the ones our proxies added are trusted.
        forwarded = [p.strip() for p in str(request.META.get("HTTP_X_FORWARDED_FOR") or "").split(",")]
        forwarded = [p for p in forwarded if p]
        if len(forwarded) >= proxies:
            address = forwarded[-proxies]
    return address[:100]


def _alive(session_key: str) -> bool:
    """Whether the session store still holds this session, unexpired."""
    store = _store(session_key)
    store.load()
    # A missing or expired session leaves the store without a key.
    return store.session_key is not None


def record_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """user_logged_in: remember this browser's session; forget the person's sessions that ended meanwhile."""
    session = getattr(request, "session", None)
    if request is None or session is None:
        return
    if session.session_key is None:
        # login() after a flush leaves the new session unsaved until the response: save it for its key.
        session.save()
    key = str(session.session_key)
    stale = [row.pk for row in LoginSession.objects.filter(user_id=user.pk) if not _alive(row.session_key)]
    LoginSession.objects.filter(pk__in=stale).delete()
    LoginSession.objects.update_or_create(
        session_key=key,
        defaults={
            "user_id": user.pk,
            "address": client_address(request),
            "user_agent": str(request.META.get("HTTP_USER_AGENT") or "")[:300],
        },
    )


def forget_login(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    """user_logged_out: this browser is no longer signed in."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        LoginSession.objects.filter(session_key=key).delete()


def follow_new_key(old_key: str | None, new_key: str | None) -> None:
    """This browser's session got a new key (``cycle_key``, as a password change does): its login row
    follows, so it stays listed and can be ended from elsewhere."""
    if old_key and new_key and old_key != new_key:
        LoginSession.objects.filter(session_key=old_key).update(session_key=new_key)


def live_logins(user_id: int) -> list[LoginSession]:
    """The person's login sessions that are still signed in, newest first."""
    return [row for row in LoginSession.objects.filter(user_id=user_id) if _alive(row.session_key)]


def _end(row: LoginSession) -> None:
    _store(row.session_key).delete()
    row.delete()


def end_other_logins(user_id: int, current_key: str | None) -> int:
    """Sign the person out everywhere but this browser; how many sessions ended."""
    rows = LoginSession.objects.filter(user_id=user_id).exclude(session_key=current_key or "")
    ended = 0
    for row in rows:
        _end(row)
        ended += 1
    return ended


def end_login(user_id: int, login_id: int, current_key: str | None) -> LoginSession:
    """End one of the person's other login sessions; ``LoginSession.DoesNotExist`` if it is not theirs."""
    row = LoginSession.objects.get(pk=login_id, user_id=user_id)
    if row.session_key == current_key:
        raise LoginError("That is this browser: use Log out to end it.")
    _end(row)
    return row


def local_user() -> Any:
    """The local mode's one person, named after the OS account, created the first time."""
    from django.contrib.auth import get_user_model

    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        # No USER/LOGNAME and no passwd entry for this uid (some containers).
        name = "local"
    user, created = get_user_model().objects.get_or_create(username=name[:150])
    if created:
        # Only the token logs this user in; it has no password to guess.
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return user
