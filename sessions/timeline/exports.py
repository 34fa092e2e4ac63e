"""A session's exports: JSON Lines (every frame), one self-contained HTML file, and a CLI collection.

**JSON Lines**: one ``Frame.to_dict()`` record a line, byte for byte (see sessions/frames.py).

**HTML**: open it in any browser, with nothing installed.

The file carries the session's facts, its conformance summary and every frame (a ``<details>`` each:
verdicts, note, transport, pretty JSON or the raw text), with the app's stylesheet inlined. It holds no
script and a Content-Security-Policy that forbids loading anything, so whatever a server sent stays
inert text even if the file is opened from disk.

Both are streamed a batch of frames at a time (``Batches``): at most ``CHUNK`` frames and, past the
first, ``CHUNK_BYTES`` of their bytes, so a 100,000-frame session (or one of 16 MB answers) never sits
in memory whole. A batch is read as values (no model instances), written in one go and sent as one
ASGI message; what its frames become is byte for byte what a frame read as a model instance became
(``sessions.frames.record_line``, the export's frame template; the tests hold them to it).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.staticfiles import finders
from django.db import connection, connections
from django.db.models import TextField
from django.db.models.functions import Cast
from django.template.loader import render_to_string

from sessions.frames import (
    RECORD_FIELDS,
    message_of,
    record_text,
    rpc_id_json,
    transport_json,
    verdicts_json,
)
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Note
from sessions.timeline import conformance
from sessions.timeline.export_html import HTML_FIELDS, LONGEST_KEPT, FrameHtml, Memo
from sessions.timeline.queries import request_of
from sessions.timeline.redaction import Redactor
from sessions.timeline.seams import Seams

# Which of the session's frames an export holds (a share's scope): a queryset of TimelineFrame.
Frames = Any

CHUNK = 500  # frames in a batch, at most
CHUNK_BYTES = 256 * 1024  # their stored bytes, at most (a batch holds at least one frame, however big)
PLAN = 5000  # frames whose sizes are read at a time, to cut the batches (but on SQLite)
# The JSON columns are read as their stored text: most are written out as they are.
JSON_AS_TEXT = {"transport": Cast("transport", TextField()), "verdicts": Cast("verdicts", TextField())}


@cache
def stylesheet() -> str:
    found = finders.find("inspector/app.css")
    return Path(found).read_text() if isinstance(found, str) else ""


def _frames(session: McpSession, frames: Frames | None) -> Frames:
    return TimelineFrame.objects.filter(session=session) if frames is None else frames


class Batches:
    """A session's frames (or a share's) in seq order, a batch at a time, each a list of value tuples
    of ``fields`` (``seq`` first, ``raw`` among them; ``transport`` and ``verdicts`` as stored JSON text).

    A batch is at most ``CHUNK`` frames and, past its first, ``CHUNK_BYTES`` of their bytes; each is a
    query of its own (a frame recorded meanwhile comes in a later one), its SQL made once and run again
    with the batch's bounds (``_Ranged``): building it anew for each batch cost more than reading its
    rows. On SQLite, which reads a row only when it is taken, the rows after the last batch's are taken
    until the next would go past ``CHUNK_BYTES``, then the query ends (the frame that did not fit is read
    again, first in the next batch). Elsewhere (a PostgreSQL cursor holds every row of its query once
    run) the frames' sizes are read first, ``PLAN`` at a time, to cut the batches, each then read by its
    seq range (on SQLite that second pass over the table is what the taking saves). Call
    ``next`` in a thread (it queries).
    """

    def __init__(self, frames: Frames, fields: tuple[str, ...]) -> None:
        names = [f"{name}_text" if name in JSON_AS_TEXT else name for name in fields]
        texts = {f"{name}_text": JSON_AS_TEXT[name] for name in fields if name in JSON_AS_TEXT}
        self.frames = frames
        self.rows = frames.annotate(**texts).values_list(*names)
        self.ranged = _Ranged.of(self.rows.filter(seq__gt=_AFTER, seq__lte=_LAST).order_by("seq"))
        self.stepped = None
        if self.ranged is not None and _steps(self.ranged.db):
            self.stepped = _Ranged.of(self.rows.filter(seq__gt=_AFTER).order_by("seq")[:CHUNK])
        self.raw = fields.index("raw")
        self.after = 0
        self.plan: deque[tuple[int, int]] = deque()

    def next(self) -> list[tuple[Any, ...]]:
        """The next batch; ``[]`` when every frame has been read."""
        if self.stepped is None:
            return self._planned()
        batch: list[tuple[Any, ...]] = []
        total = 0
        raw = self.raw
        with self.stepped.rows(self.after) as rows:
            for row in rows:
                total += len(row[raw])
                if batch and total > CHUNK_BYTES:
                    break
                batch.append(row)
        if batch:
            self.after = batch[-1][0]
        return batch

    def _planned(self) -> list[tuple[Any, ...]]:
        """The next batch, cut by the sizes read ahead."""
        if not self.plan:
            sizes = self.frames.filter(seq__gt=self.after).order_by("seq").values_list("seq", "size")
            self.plan.extend(sizes[:PLAN])
            if not self.plan:
                return []
        last, total = self.plan.popleft()
        count = 1
        while self.plan and count < CHUNK and total + self.plan[0][1] <= CHUNK_BYTES:
            last, size = self.plan.popleft()
            total += size
            count += 1
        if self.ranged is None:
            rows = list(self.rows.filter(seq__gt=self.after, seq__lte=last).order_by("seq"))
        else:
            with self.ranged.rows(self.after, last) as read:
                rows = list(read)
        self.after = last
        return rows


def _steps(db: str) -> bool:
    """Whether the database reads a query's rows as they are taken (SQLite), not all when it is run."""
    return connections[db].vendor == "sqlite"


# Bounds no frame range holds, put in a batch's query to find where its bounds go among its parameters.
_AFTER, _LAST = -7_340_029_118_911, -7_340_029_118_917


class _Ranged:
    """A batch's query (the frames with ``after < seq``, and ``seq <= last`` if it has that bound, in
    seq order), its SQL made once: each batch runs it with its own bounds, its rows as the database
    gives them (no converter would change them, or ``of`` says None)."""

    def __init__(self, db: str, sql: str, params: list[Any], places: list[int]) -> None:
        self.db, self.sql, self.params, self.places = db, sql, params, places

    @classmethod
    def of(cls, query: Frames) -> _Ranged | None:
        """``query``, made with ``_AFTER`` (and ``_LAST``) for its bounds, to be run by bounds; None if
        it can only be run as a queryset (a parameter of its own is like a bound)."""
        compiler = query.query.get_compiler(using=query.db)
        sql, params = compiler.as_sql()
        params = list(params)
        bounds = [bound for bound in (_AFTER, _LAST) if bound in params]
        if _AFTER not in bounds or any(params.count(bound) != 1 for bound in bounds):
            return None
        if compiler.get_converters([column for column, _, _ in compiler.select]):
            return None  # values a converter changes: the queryset's way
        return cls(query.db, sql, params, [params.index(bound) for bound in bounds])

    @contextmanager
    def rows(self, *bounds: int) -> Iterator[Iterator[tuple[Any, ...]]]:
        """The rows within ``bounds``, read as they are taken; the query ends with the block."""
        params = list(self.params)
        for place, bound in zip(self.places, bounds, strict=True):
            params[place] = bound
        with connections[self.db].cursor() as cursor:
            cursor.execute(self.sql, params)
            yield iter(cursor)


def _stored_verdicts(stored: str | None) -> Any:
    return json.loads(stored) if stored and stored != "[]" else []


class Records:
    """A frame's values (``RECORD_FIELDS``) as its JSON Lines record; with a ``redactor``, redacted as
    ``Redactor.frame`` redacts a stored frame."""

    def __init__(self, redactor: Redactor | None, seams: Seams | None = None) -> None:
        self.redactor = redactor
        self.seams = seams
        # SQLite keeps a JSON column as json.dumps wrote it: it can be copied (PostgreSQL rewrites it).
        self.verbatim = connection.vendor == "sqlite"
        self.transport = Memo(self._transport, LONGEST_KEPT)
        self.text = Memo(redactor.text if redactor is not None else str)  # methods, ids: they come back

    def _transport(self, stored: str) -> str:
        """The stored transport details, redacted, as the record writes them."""
        redactor = self.redactor
        if redactor is None or not stored or stored[0] != "{":
            return transport_json(stored, self.verbatim)
        shown = redactor.transport(json.loads(stored))
        return json.dumps(shown, ensure_ascii=False) if isinstance(shown, dict) else "{}"

    def all(self, rows: list[tuple[Any, ...]]) -> list[str]:
        """The records of a batch of frames, their bytes and transport details redacted together
        (``Redactor.raws``, ``Redactor.plains``: most of what they look for is in none)."""
        if self.redactor is None:
            return [self.record(row, bytes(row[5]), True) for row in rows]
        raws = [bytes(row[5]) for row in rows]
        if self.seams is not None:  # seq, kind, direction, method, raw
            raws = self.seams.raws(rows, (0, 1, 2, 9, 5))
        raws = self.redactor.raws(raws)
        seen = self.transport.knows  # transport details redacted already (no rule left them): as they were
        plain = iter(self.redactor.plains([row[6] or "" for row in rows if not seen(row[6])]))
        plains = [not seen(row[6]) and next(plain) for row in rows]
        return [self.record(*shown) for shown in zip(rows, raws, plains, strict=True)]

    def record(self, row: tuple[Any, ...], raw: bytes, plain: bool) -> str:
        """A frame's record, its bytes ``raw`` (redacted already, if they are); ``plain``: no rule
        changes its transport details."""
        (
            seq, kind, direction, wall, mono, _, transport, parse_error, rpc_kind, method, rpc_id,
            verdicts, pair_seq, latency_ms, note,
        ) = row  # fmt: skip
        redactor = self.redactor
        if redactor is None or plain:
            transport = transport_json(transport, self.verbatim)
        else:
            transport = self.transport(transport)
        if redactor is None:
            shown = verdicts_json(_stored_verdicts(verdicts)) if verdicts != "[]" else "[]"
            rpc_id = rpc_id_json(rpc_id)
        else:
            if verdicts == "[]":
                shown = "[]"
            else:
                value = _stored_verdicts(verdicts)
                shown = verdicts_json(redactor.value(value if isinstance(value, list) else []))
            rpc_id, method = rpc_id_json(self.text(rpc_id)), self.text(method)
            parse_error = parse_error and redactor.text(parse_error)
            note = note and redactor.text(note)
        return record_text(
            seq, kind, direction, wall, mono, raw, transport, parse_error, rpc_kind, method, rpc_id,
            shown, pair_seq, latency_ms, note,
        )  # fmt: skip


async def _ahead(make: Callable[[], str]) -> AsyncIterator[str]:
    """What ``make()`` gives, in a thread, until it gives ""; the next made while this one is sent."""
    pending = asyncio.ensure_future(sync_to_async(make)())
    try:
        while text := await pending:
            pending = asyncio.ensure_future(sync_to_async(make)())
            yield text
    finally:
        pending.cancel()  # the download ended early: what is being made is not wanted


async def jsonl_lines(
    session: McpSession, redactor: Redactor | None = None, frames: Frames | None = None
) -> AsyncIterator[str]:
    """Every frame of the session (or of ``frames``) as JSON Lines, a batch at a time; with a
    ``redactor``, each frame's bytes, transport, note and verdicts redacted (it still opens as a session)."""
    batches = Batches(_frames(session, frames), RECORD_FIELDS)
    write = Records(redactor, _seams(session, redactor))

    def lines() -> str:
        return "".join(write.all(batches.next()))

    async for text in _ahead(lines):
        yield text  # one ASGI message a batch: a message (and a socket write) per frame cost more


def _seams(session: McpSession, redactor: Redactor | None) -> Seams | None:
    return None if redactor is None else Seams(session, redactor.forms)


def _head(session: McpSession, redactor: Redactor | None, frames: Frames | None) -> str:
    shown = session if redactor is None else redactor.session(session)
    context: dict[str, Any] = {"session": shown, "css": stylesheet(), "redacted": redactor is not None}
    report = conformance.report(session, frames)
    if redactor is not None:
        for row in report["verdict_rows"]:
            row["example"] = redactor.text(row["example"])
    context.update(report)
    return render_to_string("sessions/export/head.html", context)


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


def _page(session: McpSession, batches: Batches, write: FrameHtml, redactor: Redactor | None) -> str:
    """The next batch of frames as the file's list items ("" when there are no more)."""
    rows = batches.next()
    if not rows:
        return ""
    notes = _notes(session, rows[0][0], rows[-1][0])
    if redactor is not None:
        for thread in notes.values():
            for note in thread:
                note.text = redactor.text(note.text)  # in this file only: a note is never saved here
    return write.all(rows, notes) + "\n"


async def document(
    session: McpSession, redactor: Redactor | None = None, frames: Frames | None = None
) -> AsyncIterator[str]:
    """The HTML file; with a ``redactor``, everything in it redacted; with ``frames``, only those."""
    yield await sync_to_async(_head)(session, redactor, frames)
    batches = Batches(_frames(session, frames), HTML_FIELDS)
    write = FrameHtml(redactor, _seams(session, redactor))
    async for html in _ahead(lambda: _page(session, batches, write, redactor)):
        yield html
    yield "</ol>\n</main>\n</body>\n</html>\n"


def collection(
    session: McpSession, redactor: Redactor | None = None, frames: Frames | None = None
) -> dict[str, Any]:
    """The session's requests as a collection for ``mcp-inspector --cli --collection``: record, then regress.

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
