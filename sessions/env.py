"""Typed readers for settings that come from environment variables."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

__all__ = [
    "SECRET_VARIABLES",
    "envbool",
    "envfloat",
    "envint",
    "envsecret",
    "envstr",
    "secret_variables",
    "fernet_keys",
    "stored_secret_key",
]

# Every variable the app reads with envsecret (tests/runtime/test_server_env.py checks the list is
# complete): none of them, nor its _FILE twin, is ever handed to a server the app starts.
SECRET_VARIABLES = (
    "SECRET_KEY",
    "DB_PASSWORD",
    "REDIS_URL",
    "INSPECTOR_LLM_API_KEY",
    "INSPECTOR_LLM_MODELS",
    "INSPECTOR_TOKEN",
    "INSPECTOR_SECRET_KEYS",
    "INSPECTOR_OIDC_CLIENT_SECRET",
)

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def envstr(name: str, default: str) -> str:
    """Return the variable's value, or the default when it is unset or empty."""
    return os.environ.get(name) or default


def envbool(name: str, default: bool) -> bool:
    """Return the variable as a boolean; accept 1/0, true/false, yes/no, on/off."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of true/false, yes/no, on/off, 1/0; got {raw!r}")


def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return the variable as an integer (at least ``minimum``, when given)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer; got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {raw!r}")
    return value


def envfloat(name: str, default: float) -> float:
    """Return the variable as a positive number."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number; got {raw!r}") from None
    if not value > 0:
        raise ImproperlyConfigured(f"{name} must be more than 0; got {raw!r}")
    return value


def envsecret(name: str, default: str = "") -> str:
    """Return a secret from NAME, or from the file named by NAME_FILE (Docker/Kubernetes secrets)."""
    value = os.environ.get(name, "")
    file_name = os.environ.get(f"{name}_FILE", "")
    if value and file_name:
        raise ImproperlyConfigured(f"Set either {name} or {name}_FILE, not both")
    if file_name:
        try:
            # Secret files usually end with a newline that is not part of the secret.
            return Path(file_name).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE: cannot read {file_name!r}: {exc}") from None
    return value or default


def secret_variables() -> frozenset[str]:
    """The names of the app's secrets in the environment: each of SECRET_VARIABLES and its _FILE twin."""
    return frozenset(SECRET_VARIABLES) | {f"{name}_FILE" for name in SECRET_VARIABLES}


def stored_secret_key(path: Path, generate: Callable[[], str] = get_random_secret_key) -> str:
    """Return the secret key kept at path, generating and saving it on first use."""
    try:
        existing = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        existing = ""
    if existing:
        return existing
    key = generate()
    # Create with owner-only permissions; the key signs sessions and CSRF tokens, or encrypts secrets.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key + "\n")
    return key


def fernet_keys(name: str, text: str) -> list[str]:
    """Split comma- or line-separated Fernet keys (newest first); refuse one that is not a key."""
    keys = [key.strip() for key in text.replace("\n", ",").split(",") if key.strip()]
    for number, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            # Never the value itself: it may be a real key with a typo.
            raise ImproperlyConfigured(
                f"{name}: key number {number} is not a Fernet key (32 bytes, url-safe base64); "
                "make one with: python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'"
            ) from None
    return keys
