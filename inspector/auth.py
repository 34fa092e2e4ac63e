"""Login by a one-time token printed in the terminal, and keeping that token out of logs.

`mcp-inspector` issues the token when it starts and prints a URL carrying it; the token page
exchanges it, once, for a session cookie. The token lives only in this process, and only as its
SHA-256 digest: the server that printed the URL is the one that checks it, a crashed run leaves
nothing behind that could be replayed, and a restart issues a fresh token.

This module imports no models, so settings.LOGGING can load the log filter before apps are ready.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
from typing import TYPE_CHECKING

from django import forms

from sessions.env import envsecret

if TYPE_CHECKING:
    pass

__all__ = [
    "LoginToken",
    "RedactQueryStrings",
    "TokenForm",
    "login_token",
    "strip_query_string",
    "strip_share_tokens",
]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class LoginToken:
    """A token that logs in exactly once: issued at start, burnt by the first successful redeem."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digest: bytes | None = None
        self._issued = False

    def issue(self) -> str:
        """Arm a new token (INSPECTOR_TOKEN, or a random one) and return it; forget any earlier one."""
        token = envsecret("INSPECTOR_TOKEN") or secrets.token_urlsafe(32)
        with self._lock:
            self._digest = _digest(token)
            self._issued = True
        return token

    def redeem(self, candidate: str) -> bool:
        """Tell whether candidate is the armed token, burning the token if it is."""
        with self._lock:
            if not self._issued:
                # `manage.py runserver` never runs our entry point; INSPECTOR_TOKEN arms it there.
                fixed = envsecret("INSPECTOR_TOKEN")
                self._digest = _digest(fixed) if fixed else None
                self._issued = True
            if self._digest is None:
                return False
            # Compare digests of equal length in constant time: timing reveals nothing about the token.
            if not hmac.compare_digest(_digest(candidate), self._digest):
                return False
            self._digest = None
            return True


# The one token of this process.
login_token = LoginToken()


class TokenForm(forms.Form):
    """The token to exchange for a session, and where to go afterwards."""

    token = forms.CharField(max_length=512)
    next = forms.CharField(max_length=2000, required=False)


# A "?" that follows a URL path, up to the next space or quote: the query string.
_QUERY_STRING = re.compile(r"""(/[^\s"'?]*)\?[^\s"'<>]+""")


def strip_query_string(text: str) -> str:
    """Replace the query strings of the URLs in text with "?[redacted]"."""
    # A function, not a "\\1" template: expanding a template imports a module, which fails when
    # a last log line comes while the interpreter shuts down.
    return _QUERY_STRING.sub(lambda match: match.group(1) + "?[redacted]", text)


# A token in a path: a share link's (/shared/<token>/, /ws/shared/<token>/, a chat's or an eval run's
# /shared-item/<token>/), a tap endpoint's (/tap/<token>/).
_SHARE_TOKEN = re.compile(r"(/shared/|/shared-item/|/tap/)[^\s/\"'?<>]+")


def strip_share_tokens(text: str) -> str:
    """Replace the tokens of share links and tap endpoints in text with "[redacted]"."""
    return _SHARE_TOKEN.sub(lambda match: match.group(1) + "[redacted]", text)


class RedactQueryStrings(logging.Filter):
    """Drop query strings from log messages (they can carry the login token or a server's API key),
    and share links' tokens from their paths."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            # A malformed record: let the handler report it as it would without us.
            return True
        redacted = strip_share_tokens(strip_query_string(message))
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
