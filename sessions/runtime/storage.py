"""What a database error says about the storage behind it: a full disk is told apart from the rest."""

from __future__ import annotations

import errno

__all__ = ["cause", "is_full"]

# SQLite's "database or disk is full" (SQLITE_FULL), PostgreSQL's disk_full class (53100, "could not
# extend file", "No space left on device").
_FULL_TEXTS = ("disk is full", "no space left on device", "could not extend file")
_FULL_STATES = {"53100"}


def is_full(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) says the storage is full."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if {getattr(current, "sqlstate", None), getattr(current, "pgcode", None)} & _FULL_STATES:
            return True
        if any(text in str(current).lower() for text in _FULL_TEXTS):
            return True
        current = current.__cause__ or current.__context__
    return False


def cause(error: BaseException) -> str:
    """A short reason for a failed write: "disk full", or the error's type and first line."""
    if is_full(error):
        return "disk full"
    lines = str(error).strip().splitlines()
    message = lines[0][:200] if lines else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
