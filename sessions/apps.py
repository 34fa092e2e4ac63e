"""App configuration for MCP sessions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


def keep_sqlite_private(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Make a SQLite database, its -wal and its -shm files readable by their owner only (0600).

    SQLite creates the file with the umask's mode (world-readable, usually) when the first
    connection opens it, before anything is written; this runs as each connection opens, so the
    file is closed to others before the first row is stored. SQLite gives -wal and -shm files it
    creates later the database file's mode.
    """
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict["NAME"])
    if name == ":memory:" or name.startswith("file:"):
        return
    for path in (Path(name), Path(f"{name}-wal"), Path(f"{name}-shm")):
        try:
            info = path.stat()
        except FileNotFoundError:
            continue
        # Only what we own: a file an administrator set up for us stays as they made it.
        if info.st_uid == os.getuid() and info.st_mode & 0o077:
            path.chmod(0o600)


class SessionsConfig(AppConfig):
    """MCP sessions; labelled apart from django.contrib.sessions, which owns "sessions"."""

    name = "sessions"
    label = "mcp_sessions"
    verbose_name = "MCP sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        connection_created.connect(keep_sqlite_private, dispatch_uid="mcp_sessions.keep_sqlite_private")
