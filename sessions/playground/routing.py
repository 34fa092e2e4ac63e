"""The tools of a chat's sessions as one list for the model, and the way back from the name the model
calls to the session and MCP tool that run it. Pure functions: no database, no runtime."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

__all__ = ["Route", "combine", "prefix_for", "unique_prefixes"]

SEPARATOR = "__"
MAX_PREFIX = 20
_NOT_PREFIX = re.compile(r"[^a-z0-9]+")


@dataclasses.dataclass(frozen=True)
class Route:
    """Where a tool the model sees runs: the session (its primary key) and the MCP tool's own name."""

    session_id: int
    mcp_name: str
    tool: dict[str, Any]


def prefix_for(server_name: str, fallback: str) -> str:
    """A short name for a session's tools: its server's name (its last part after a slash, as in
    ``mcp-servers/everything``) in lower-case letters, digits and ``_``."""
    last = server_name.rstrip("/").rsplit("/", 1)[-1]
    slug = _NOT_PREFIX.sub("_", last.lower()).strip("_")[:MAX_PREFIX].strip("_")
    return slug or fallback


def unique_prefixes(names: list[str]) -> list[str]:
    """Prefixes from server names, numbered from the second of a kind (two sessions of one server)."""
    seen: Counter[str] = Counter()
    prefixes = []
    for number, name in enumerate(names, start=1):
        base = prefix_for(name, f"s{number}")
        seen[base] += 1
        prefixes.append(base if seen[base] == 1 else f"{base}{seen[base]}")
    return prefixes


def combine(
    listings: list[tuple[int, str, list[dict[str, Any]]]],
) -> tuple[list[dict[str, Any]], dict[str, Route]]:
    """One tool list from each session's listing (``(session_id, prefix, tools)``), and each offered
    name's route. A name one session alone offers stays as it is; a name two sessions offer becomes
    ``prefix__name`` for each, so the model can tell them apart and every call reaches its session."""
    counts = Counter(
        tool["name"]
        for _, _, tools in listings
        for tool in {str(t.get("name")): t for t in tools if isinstance(t.get("name"), str)}.values()
    )
    offered: list[dict[str, Any]] = []
    routes: dict[str, Route] = {}
    for session_id, prefix, tools in listings:
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str) or not name:
                continue
            shown = f"{prefix}{SEPARATOR}{name}" if counts[name] > 1 else name
            if shown in routes:
                continue  # a session listing a name twice: its first is the one offered
            routes[shown] = Route(session_id, name, tool)
            offered.append({**tool, "name": shown})
    return offered, routes
