"""Where the app keeps its data, and keeping it private. No Django here: the CLI uses it too."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_dir", "private_dir", "user_data_dir"]


def user_data_dir() -> Path:
    """Return the directory for users' application data: $XDG_DATA_HOME, or ~/.local/share."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative value is invalid and must be ignored.
    return Path(xdg) if os.path.isabs(xdg) else Path.home() / ".local" / "share"


def data_dir() -> Path:
    """The app's data folder: ``INSPECTOR_DATA_DIR`` (``~`` expanded), else mcp-inspector in the user's."""
    return Path(os.environ.get("INSPECTOR_DATA_DIR") or user_data_dir() / "mcp-inspector").expanduser()


def private_dir(path: Path) -> None:
    """Create the directory for the owner alone (0700), or take group and others' access away."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _owner_only(path, 0o700)


def _owner_only(path: Path, mode: int) -> None:
    """Take group and others' access to path away (to mode), if we own it and they have any."""
    info = path.stat()
    # Only what we own: an INSPECTOR_DATA_DIR an administrator made for us stays as they set it.
    if info.st_uid == os.getuid() and info.st_mode & 0o077:
        path.chmod(mode)
