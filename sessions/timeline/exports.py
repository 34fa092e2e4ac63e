"""A session's exports: JSON Lines (every frame), one self-contained HTML file, and a CLI collection.

**JSON Lines**: one ``Frame.to_dict()`` record a line, byte for byte (see sessions/frames.py).

**HTML**: open it in any browser, with nothing installed.

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

from sessions.frames import message_of, pretty_json, record_line
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Note
from sessions.timeline import conformance
from sessions.timeline.queries import request_of
from sessions.timeline.redaction import Redactor

# Which of the session's frames an export holds (a share's scope): a queryset of TimelineFrame.
Frames = Any

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


def _frames(session: McpSession, frames: Frames | None) -> Frames:
    return TimelineFrame.objects.filter(session=session) if frames is None else frames


def _head(session: McpSession, redactor: Redactor | None, frames: Frames | None) -> str:
    shown = session if redactor is None else redactor.session(session)
    context: dict[str, Any] = {"session": shown, "css": stylesheet(), "redacted": redactor is not None}
    report = conformance.report(session, frames)
    if redactor is not None:
        for row in report["verdict_rows"]:
            row["example"] = redactor.text(row["example"])
    context.update(report)
    return render_to_string("sessions/export/head.html", context)


def _chunk(
    session: McpSession, after: int, redactor: Redactor | None, frames: Frames | None
) -> tuple[str, int | None]:
    rows = list(_frames(session, frames).filter(seq__gt=after).order_by("seq")[:CHUNK])
    if not rows:
        return "", None
    shown = rows if redactor is None else [redactor.frame(r) for r in rows]
    views = [frame_view(r) for r in shown]
    notes = _notes(session, rows[0].seq, rows[-1].seq)
    for item in views:
        item["notes"] = notes.get(item["f"].seq, [])
        if redactor is not None:
            for note in item["notes"]:
                note.text = redactor.text(note.text)  # in this file only: a note is never saved here
    html = render_to_string("sessions/export/frames.html", {"frames": views})
    return html, rows[-1].seq


def _notes(session: McpSession, first: int, last: int) -> dict[int, list[Note]]:
    """The notes on frames ``first``..``last`` by frame, each thread's replies right after its first note."""
    found = Note.objects.filter(session=session, frame_seq__gte=first, frame_seq__lte=last)
    notes = list(found.select_related("author"))
    by_thread: dict[int, list[Note]] = {}
    for note in notes:
        by_thread.setdefault(note.reply_to_id or note.pk, []).append(note)
    by_frame: dict[int, list[Note]] = {}
    for note in notes:
        if note.reply_to_id is None:
            by_frame.setdefault(note.frame_seq, []).extend(by_thread[note.pk])
    return by_frame


async def document(
    session: McpSession, redactor: Redactor | None = None, frames: Frames | None = None
) -> AsyncIterator[str]:
    """The HTML file; with a ``redactor``, everything in it redacted; with ``frames``, only those."""
    yield await database_sync_to_async(_head)(session, redactor, frames)
    after: int | None = 0
    while after is not None:
        html, after = await database_sync_to_async(_chunk)(session, after, redactor, frames)
        if html:
            yield html
    yield "</ol>\n</main>\n</body>\n</html>\n"


async def jsonl_lines(
    session: McpSession, redactor: Redactor | None = None, frames: Frames | None = None
) -> AsyncIterator[str]:
    """Every frame of the session (or of ``frames``) as JSON Lines, read a chunk at a time; with a
    ``redactor``, each frame's bytes, transport, note and verdicts redacted (it still opens as a session)."""
    after = 0
    while True:
        rows = [r async for r in _frames(session, frames).filter(seq__gt=after).order_by("seq")[:CHUNK]]
        if not rows:
            return
        # One ASGI message per chunk, not per line: a message (and a socket write) per frame cost
        # more than making the line.
        yield "".join(record_line(row if redactor is None else redactor.frame(row)) for row in rows)
        after = rows[-1].seq


def collection(
    session: McpSession, redactor: Redactor | None = None, frames: Frames | None = None
) -> dict[str, Any]:
    """The session's requests as a collection for ``mcp-inspector --cli --collection``: record, then regress.

    A session's requests as a collection for ``mcp-inspector --cli --collection``: record, then regress.

    Every request the person sent (not the lifecycle's own, nor a stateless retry) becomes a step with
    the expectations its answer met: an error, or a result with the same ``isError`` and — when the
    answer broke no rule — ``"verdicts": "clean"``. Run against a new build of the server in CI, the
    collection fails where the new build answers differently. Result values are left out on purpose
    (times, ids and counts change from run to run): add ``result`` or ``contains`` by hand where a value
    matters.
    """
    chosen = _frames(session, frames)
    requests = chosen.filter(direction="out", rpc_kind="request").order_by("seq")
    answers = {
        frame.pair_seq: frame
        for frame in chosen.filter(
            direction="in", rpc_kind__in=("result", "error"), pair_seq__isnull=False
        ).only("pair_seq", "rpc_kind", "raw", "worst")
    }
    steps = []
    for frame in requests:
        if frame.note.startswith("retry of request"):
            continue  # the original request stands for the whole input-required exchange
        raw = bytes(frame.raw) if redactor is None else redactor.raw(bytes(frame.raw))
        request = request_of(frame, raw)
        answer = answers.get(frame.seq)
        if request is None or answer is None:
            continue
        method, params = request
        expect: dict[str, Any] = {}
        if answer.rpc_kind == "error":
            expect["error"] = True
        else:
            result = message_of(answer.raw).get("result")
            if method == "tools/call" and isinstance(result, dict):
                expect["isError"] = bool(result.get("isError", False))
            if answer.worst not in ("error", "warning"):
                expect["verdicts"] = "clean"
        label = (params or {}).get("name") or (params or {}).get("uri")
        step: dict[str, Any] = {
            "name": f"#{frame.seq} {method}{f' {label}' if label else ''}",
            "method": method,
        }
        if params is not None:
            step["params"] = params
        step["expect"] = expect
        steps.append(step)
    label = session.server_label if redactor is None else redactor.text(session.server_label)
    about = f"the requests of session {session.public_id} ({label}, {session.protocol_version})"
    return {"about": about, "steps": steps}
