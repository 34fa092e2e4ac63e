"""Extra live fragments derived from new timeline rows (e.g. subscription markers, log lines).

The consumer calls ``fragments`` with the rows of every live batch it shows; each feature adds
the out-of-band HTML it wants swapped into the page.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.template.loader import render_to_string

from sessions.models import McpSession, wall_time
from sessions.web.logs import LOG_LINES, log_line
from sessions.web.resources import marker_id

__all__ = ["fragments"]

# Previews stop after 300 characters: when the JSON is cut short, pick the fields out by pattern.
_STRING_FIELD = r'"{}"\s*:\s*"((?:[^"\\]|\\.)*)"'


def _params(preview: str) -> dict[str, Any] | None:
    try:
        message = json.loads(preview)
    except ValueError:
        return None
    params = message.get("params") if isinstance(message, dict) else None
    return params if isinstance(params, dict) else None


def _field(preview: str, name: str) -> str | None:
    match = re.search(_STRING_FIELD.format(re.escape(name)), preview)
    if match is None:
        return None
    try:
        value = json.loads(f'"{match.group(1)}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _cut_params(preview: str) -> dict[str, Any]:
    """Return the string params a cut-short preview still shows (data: whatever text there is)."""
    params: dict[str, Any] = {}
    for name in ("uri", "level", "logger"):
        value = _field(preview, name)
        if value is not None:
            params[name] = value
    data = _field(preview, "data")
    if data is None:
        cut = re.search(r'"data"\s*:\s*"?(.*)$', preview)
        data = f"{cut.group(1)}…" if cut else "…"
    params["data"] = data
    return params


def fragments(session: McpSession, rows: list[dict[str, Any]], panel: str | None = None) -> list[str]:
    """Return HTML fragments (hx-swap-oob) to send after these rows; no database access here.

    ``panel`` is the panel the tab shows (None: it has not said). Log lines go only to a tab showing
    the Logging panel, which reads the newest ones afresh when opened, and at most the newest
    ``LOG_LINES`` of a batch (the panel keeps no more): a flood is not rendered to be thrown away.
    """
    updates: list[dict[str, Any]] = []
    lines: list[dict[str, Any]] = []
    methods = {"notifications/resources/updated"}
    if panel in (None, "logging"):
        methods.add("notifications/message")
        logged = [r for r in rows if r.get("method") == "notifications/message"]
        if len(logged) > LOG_LINES:
            rows = [r for r in rows if r.get("method") != "notifications/message"] + logged[-LOG_LINES:]
    for row in rows:
        if row.get("direction") != "in" or row.get("kind") != "message":
            continue
        method = row.get("method")
        if method not in methods:
            continue
        preview = str(row.get("preview") or "")
        params = _params(preview)
        if params is None:
            params = _cut_params(preview)
        # The stored columns hold the whole URI and the level, whatever the preview cut off.
        params.update({k: row[k] for k in ("uri", "level") if row.get(k)})
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str):
                updates.append(
                    {"uri": uri, "marker": marker_id(uri), "time": wall_time(row["wall"]), "seq": row["seq"]}
                )
        else:
            lines.append(log_line(params, row["wall"], row["seq"]))
    out: list[str] = []
    if updates:
        context = {"updates": updates, "session": session}
        out.append(render_to_string("sessions/resources/_updates_live.html", context))
    if lines:
        out.append(render_to_string("sessions/resources/_log_live.html", {"log_lines": lines}))
    return out
