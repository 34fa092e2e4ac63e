"""What to call a session wherever one is picked or listed among others (search results, Compare)."""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import urlsplit

from django.utils import dateformat, timezone

from sessions.models import McpSession

__all__ = ["session_label", "session_target"]

TARGET_CHARS = 48


def _short(text: str) -> str:
    return text if len(text) <= TARGET_CHARS else text[: TARGET_CHARS - 1] + "…"


def session_target(session: McpSession) -> str:
    """The transport and what it reached: ``stdio node index.js``, ``http 127.0.0.1:3001/mcp``.

    Paths are cut to their last part, and a URL loses its password and query (where keys hide).
    """
    config = session.config if isinstance(session.config, dict) else {}
    if session.is_imported:
        return _short(session.name)  # the file it was opened from
    transport = str(config.get("transport") or session.transport_name or "")
    if transport == "stdio":
        words = [str(config.get("command") or ""), *(str(a) for a in config.get("args") or [])]
        shown = " ".join(PurePosixPath(w).name if "/" in w else w for w in words if w)
        return _short(f"stdio {shown}".strip())
    try:
        parts = urlsplit(str(config.get("url") or ""))
        where = (parts.hostname or "") + (f":{parts.port}" if parts.port else "") + parts.path
    except ValueError:  # a port out of range: the URL as a person typed it is no use here
        where = ""
    return _short(f"{transport} {where}".strip())


def session_label(session: McpSession) -> str:
    """One line that tells a session from the others of its server: title, target, start, status, id."""
    started = dateformat.format(timezone.localtime(session.created), "Y-m-d H:i:s")
    status = "recording" if session.is_imported else session.status
    parts = [session.server_label, session_target(session), started, status, session.public_id.hex[:8]]
    return " · ".join(p for p in parts if p)
