"""A session as one self-contained HTML file: open it in any browser, with nothing installed.

The file carries the session's facts, its conformance summary and every frame (a ``<details>`` each:
verdicts, note, transport, pretty JSON or the raw text), with the app's stylesheet inlined. It holds no
script and a Content-Security-Policy that forbids loading anything, so whatever a server sent stays
inert text even if the file is opened from disk. It is rendered in chunks and streamed, so a
100,000-frame session never sits in memory whole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string

from sessions import report
from sessions.models import McpSession, TimelineFrame
from sessions.timeline import pretty_json

CHUNK = 500
BODY_LIMIT = 64 * 1024  # characters of each frame's body in the file; the JSONL export has them all


@cache
def stylesheet() -> str:
    found = finders.find("inspector/app.css")
    return Path(found).read_text() if isinstance(found, str) else ""


def frame_view(row: TimelineFrame) -> dict[str, Any]:
    raw = bytes(row.raw)
    pretty = pretty_json(raw)
    body = pretty or raw.decode("utf-8", errors="replace")
    return {
        "f": row,
        "body": body[:BODY_LIMIT],
        "cut": len(body) > BODY_LIMIT,
        "pretty": bool(pretty),
        "transport": json.dumps(row.transport, indent=2, ensure_ascii=False) if row.transport else "",
    }


def _head(session: McpSession) -> str:
    context: dict[str, Any] = {"session": session, "css": stylesheet()}
    context.update(report.panel_context(session, "conformance", None))
    return render_to_string("sessions/export/head.html", context)


def _chunk(session: McpSession, after: int) -> tuple[str, int | None]:
    rows = list(TimelineFrame.objects.filter(session=session, seq__gt=after).order_by("seq")[:CHUNK])
    if not rows:
        return "", None
    html = render_to_string("sessions/export/frames.html", {"frames": [frame_view(r) for r in rows]})
    return html, rows[-1].seq


async def document(session: McpSession) -> AsyncIterator[str]:
    yield await database_sync_to_async(_head)(session)
    after: int | None = 0
    while after is not None:
        html, after = await database_sync_to_async(_chunk)(session, after)
        if html:
            yield html
    yield "</ol>\n</main>\n</body>\n</html>\n"
