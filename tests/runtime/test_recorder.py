"""The recorder loses nothing: a batch the database refuses is retried, split, or marked missing.

A real Recorder on the in-memory channel layer and the test database; failures are injected by
wrapping ``store_frames`` as the recorder sees it. Retry delays are zeros: nothing here sleeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db import DataError, OperationalError, connection, transaction
from support.teams import ateam_of, team_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.runtime import messages as m
from sessions.runtime import recorder as recorder_module
from sessions.runtime.recorder import Recorder
from sessions.timeline.queries import TimelineFilter, page_of_rows

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 10.0  # every wait is bounded; none should come near it

Store = Callable[..., Awaitable[None]]
real_store = recorder_module.store_frames


def row(seq: int) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": seq}}
    frame = Frame(
        "message",
        "in",
        json.dumps(message).encode(),
        seq=seq,
        message=message,
        rpc_kind="notification",
        method="notifications/message",
    )
    return frame_row(frame, 0)


class Session:
    """A recorded session with its recorder running, and a viewer's channel in its group."""

    def __init__(self, session: McpSession, recorder: Recorder, channel: str) -> None:
        self.session = session
        self.recorder = recorder
        self.channel = channel
        self.layer = recorder.layer

    def add(self, seqs: Iterable[int]) -> None:
        for seq in seqs:
            self.recorder.add(row(seq))

    async def events_until(self, last: int) -> list[m.FramesStored]:
        """The FramesStored events a viewer receives, up to the one that ends at ``last``."""
        events: list[m.FramesStored] = []
        async with asyncio.timeout(WAIT):
            while not events or events[-1].last < last:
                event = m.decode_event(await self.layer.receive(self.channel))
                if isinstance(event, m.FramesStored):
                    events.append(event)
        return events

    async def stored(self) -> list[TimelineFrame]:
        return [f async for f in TimelineFrame.objects.filter(session=self.session).order_by("seq")]


@pytest.fixture
async def recorded() -> AsyncIterator[Session]:
    owner = await User.objects.acreate(username="alice")
    session = await McpSession.objects.acreate(owner=owner, team=await ateam_of(owner), name="recorder test")
    layer = get_channel_layer()
    assert layer is not None
    channel = await layer.new_channel()
    await layer.group_add(session.group_name, channel)
    recorder = Recorder(session.pk, session.group_name, layer)
    recorder.RETRY_DELAYS = (0.0,) * 6  # the schedule's length, without its waits
    recorder.start()
    try:
        yield Session(session, recorder, channel)
    finally:
        async with asyncio.timeout(WAIT):
            await recorder.close()
        await layer.group_discard(session.group_name, channel)


def no_gap(events: list[m.FramesStored], last: int) -> None:
    """Viewers were told of frames 1..last, each once, in order."""
    spans = [(e.first, e.last) for e in events]
    assert spans[0][0] == 1, spans
    assert all(after[0] == before[1] + 1 for before, after in zip(spans, spans[1:], strict=False)), spans
    assert spans[-1][1] == last, spans
    rows = [r["seq"] for e in events for r in e.rows]
    assert rows == list(range(1, last + 1))


def locked_first(times: int, then: Callable[[], None] = lambda: None) -> Store:
    """store_frames refusing the first ``times`` calls ("database is locked"), calling ``then`` each time."""
    calls = 0

    async def store(session_pk: int, batch: list[dict[str, Any]], *guard: Any) -> None:
        nonlocal calls
        calls += 1
        if calls <= times:
            then()
            raise OperationalError("database is locked")
        await real_store(session_pk, batch, *guard)

    return store


async def test_a_batch_the_database_refuses_for_a_while_is_stored_later_and_viewers_see_no_gap(
    recorded: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While the first batch keeps failing, the engine goes on producing frames: 10 more each time.
    more = iter(range(11, 41, 10))
    monkeypatch.setattr(
        recorder_module,
        "store_frames",
        locked_first(3, lambda: recorded.add(range((s := next(more)), s + 10))),
    )
    recorded.add(range(1, 11))
    events = await recorded.events_until(40)
    no_gap(events, 40)
    frames = await recorded.stored()
    assert [f.seq for f in frames] == list(range(1, 41))
    assert {f.kind for f in frames} == {"message"}
    assert recorded.recorder.stored_seq == 40
    assert (await McpSession.objects.aget(pk=recorded.session.pk)).last_seq == 40


@pytest.mark.parametrize(
    "error", [DataError("value too long for type character varying(200)"), OperationalError("disk I/O error")]
)
async def test_a_frame_the_database_always_refuses_becomes_a_visible_placeholder_under_its_seq(
    recorded: Session, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    async def refuse_seven(session_pk: int, batch: list[dict[str, Any]], *guard: Any) -> None:
        if any(r["seq"] == 7 and r["kind"] == "message" for r in batch):
            raise error
        await real_store(session_pk, batch, *guard)

    monkeypatch.setattr(recorder_module, "store_frames", refuse_seven)
    recorded.add(range(1, 21))
    events = await recorded.events_until(20)
    no_gap(events, 20)
    frames = await recorded.stored()
    assert [f.seq for f in frames] == list(range(1, 21))
    assert [f.seq for f in frames if f.kind == "message"] == [s for s in range(1, 21) if s != 7]
    missing = frames[6]
    assert (missing.kind, missing.direction, bytes(missing.raw)) == ("state", "local", b"")
    message = f"frame 7 could not be stored: {type(error).__name__}: {error}"
    assert missing.note == message
    assert missing.verdicts == [{"code": "not-stored", "severity": "error", "message": message}]
    assert missing.worst == "error"
    # The violations filter and the live rows show it.
    violations = await asyncio.to_thread(page_of_rows, recorded.session, TimelineFilter(violations=True))
    assert [r["seq"] for r in violations] == [7]
    assert [r["note"] for e in events for r in e.rows if r["seq"] == 7] == [message]


async def test_frames_wait_while_the_database_is_down_and_are_all_stored_when_it_answers(
    recorded: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Long enough to refuse the retries, each frame alone, and its placeholder, several times over.
    monkeypatch.setattr(recorder_module, "store_frames", locked_first(60))
    recorded.add(range(1, 6))
    events = await recorded.events_until(5)
    no_gap(events, 5)
    frames = await recorded.stored()
    assert [(f.seq, f.kind) for f in frames] == [(s, "message") for s in range(1, 6)]


async def test_close_stores_what_is_still_buffered(
    recorded: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "store_frames", locked_first(4))
    recorded.add(range(1, 31))
    async with asyncio.timeout(WAIT):
        await recorded.recorder.close()
    assert [f.seq for f in await recorded.stored()] == list(range(1, 31))
    no_gap(await recorded.events_until(30), 30)
    async with asyncio.timeout(WAIT):
        await recorded.recorder.wait_stored(30)


async def test_close_returns_when_the_database_never_answers_and_says_which_frames_were_not_stored(
    recorded: Session, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def down(session_pk: int, batch: list[dict[str, Any]], *guard: Any) -> None:
        raise OperationalError("unable to open database file")

    monkeypatch.setattr(recorder_module, "store_frames", down)
    recorded.add(range(1, 9))
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger=recorder_module.__name__):
        async with asyncio.timeout(WAIT):
            await recorded.recorder.close()
    assert await recorded.stored() == []
    assert [r["seq"] for r in recorded.recorder.rows] == list(range(1, 9))  # kept, not dropped
    assert any("8 frames" in r.getMessage() and "seq 1-8" in r.getMessage() for r in caplog.records)


async def test_a_held_recorder_keeps_every_frame_and_stores_them_in_one_batch_at_close(
    recorded: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process is stopping: a session's last frames go in one write, not one each; none is lost."""
    batches: list[list[int]] = []

    async def store(session_pk: int, batch: list[dict[str, Any]], *guard: Any) -> None:
        batches.append([r["seq"] for r in batch])
        await real_store(session_pk, batch, *guard)

    monkeypatch.setattr(recorder_module, "store_frames", store)
    recorded.recorder.hold()
    for seq in (1, 2, 3):
        recorded.add([seq])
        for _ in range(5):  # the recorder's task gets its turns: held, it writes nothing
            await asyncio.sleep(0)
    assert batches == []
    async with asyncio.timeout(WAIT):
        await recorded.recorder.close()
    assert batches == [[1, 2, 3]]
    assert [f.seq for f in await recorded.stored()] == [1, 2, 3]
    no_gap(await recorded.events_until(3), 3)


def response(seq: int) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": 7, "result": {"content": []}}
    frame = Frame("message", "in", json.dumps(message).encode(), seq=seq, message=message, rpc_kind="result")
    frame.rpc_id = 7
    return frame_row(frame, 0)


async def test_viewers_hear_a_batch_holds_a_response_even_when_its_row_is_not_among_those_sent(
    recorded: Session,
) -> None:
    # A flood's batch carries only its newest rows; the response a running call card waits for can
    # be older. The tab re-reads its cards only for a batch that holds one.
    recorded.recorder.add(response(1))
    recorded.add(range(2, recorder_module.TAIL + 50))
    last = recorder_module.TAIL + 49
    events = await recorded.events_until(last)
    with_response = [e for e in events if e.first == 1]
    assert with_response and with_response[0].answers
    assert 1 not in [r["seq"] for r in with_response[0].rows]
    recorded.add(range(last + 1, last + 11))
    assert not any(e.answers for e in await recorded.events_until(last + 10))


def test_rows_are_stored_alike_however_many_one_insert_holds(db: None) -> None:
    owner = User.objects.create(username="bob")
    many, single = (
        McpSession.objects.create(owner=owner, team=team_of(owner), name=name) for name in ("many", "single")
    )
    rows = [response(1), *(row(seq) for seq in range(2, 601))]
    rows[5]["verdicts"] = [{"code": "x", "severity": "warning", "message": "100%s of it"}]
    rows[5]["worst"] = "warning"
    rows[6]["raw"] = b"\xff\xfe not UTF-8 %s"
    connection.ensure_connection()
    # SQLite before 3.32 takes 999 parameters at most: fewer rows go in each statement.
    connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    try:
        with transaction.atomic():
            TimelineFrame.insert_rows(many.pk, rows)
    finally:
        connection.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32766)
    for one in rows:
        TimelineFrame.insert_rows(single.pk, [one])
    fields = TimelineFrame._meta.concrete_fields
    columns = [f.attname for f in fields if f.attname not in ("id", "session_id")]
    stored = [list(s.frames.order_by("seq").values_list(*columns)) for s in (many, single)]
    assert len(stored[0]) == 600
    assert stored[0] == stored[1]


def test_insert_rows_stores_what_the_orm_stores_for_the_columns_it_binds_differently(db: None) -> None:
    # On SQLite, insert_rows binds is_error as 0/1, raw as a bytearray and a missing pair_seq or
    # latency_ms as NaN (stored as NULL), where sqlite3 would look for an adapter: the same values.
    owner = User.objects.create(username="carol")
    ours, orm = (
        McpSession.objects.create(owner=owner, team=team_of(owner), name=name) for name in ("ours", "orm")
    )
    rows = [response(1), row(2), row(3), row(4), row(5)]
    rows[0].update(is_error=True, pair_seq=1, latency_ms=0.0)
    rows[1].update(raw=b"", latency_ms=12.5)
    rows[2].update(raw=b"\x00\xff" * (1 << 16))  # longer than what is copied into a bytearray
    rows[3].update(raw=bytes(range(256)), is_error=False, pair_seq=None)
    TimelineFrame.insert_rows(ours.pk, rows)
    TimelineFrame.objects.bulk_create(TimelineFrame(session=orm, **r) for r in rows)
    fields = TimelineFrame._meta.concrete_fields
    columns = [f.attname for f in fields if f.attname not in ("id", "session_id")]
    stored = [list(s.frames.order_by("seq").values_list(*columns)) for s in (ours, orm)]
    assert stored[0] == stored[1]
    assert [bytes(r.raw) for r in ours.frames.order_by("seq")] == [r["raw"] for r in rows]
    table = TimelineFrame._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT typeof(raw), typeof(is_error), typeof(pair_seq), typeof(latency_ms) FROM {table}"
            " WHERE session_id IN (%s, %s) ORDER BY session_id, seq",
            [ours.pk, orm.pk],
        )
        types = cursor.fetchall()
    assert types[:5] == types[5:]
    assert types[1] == ("blob", "integer", "null", "real") and types[4][2:] == ("null", "null")
    assert ours.frames.filter(latency_ms__isnull=True).count() == 3
    assert ours.frames.filter(is_error=True).count() == 1


async def test_a_live_batch_reaches_each_viewer_without_a_copy_of_its_rows(recorded: Session) -> None:
    # The in-memory channel layer deep-copies each message it delivers; a batch's 200 rows cost ~2 ms
    # of the event loop that way. They are made for the event and only read after: none is copied.
    layer = recorded.layer
    second = await layer.new_channel()
    await layer.group_add(recorded.session.group_name, second)
    try:
        recorded.add(range(1, 4))
        async with asyncio.timeout(WAIT):
            first_message = await layer.receive(recorded.channel)
            second_message = await layer.receive(second)
    finally:
        await layer.group_discard(recorded.session.group_name, second)
    assert first_message is not second_message
    assert first_message["rows"] is second_message["rows"]
    assert [r["seq"] for r in first_message["rows"]] == [1, 2, 3]
    assert isinstance(m.decode_event(first_message), m.FramesStored)


def test_a_statement_binds_what_its_rows_share_once_and_stores_each_rows_own_values(db: None) -> None:
    # A flood's rows repeat a dozen texts: a column every row of a statement shares is bound once.
    owner = User.objects.create(username="dave")
    ours, orm = (
        McpSession.objects.create(owner=owner, team=team_of(owner), name=name) for name in ("ours", "orm")
    )
    rows = [row(seq) for seq in range(1, 601)]
    rows[150]["note"] = "one row's note"
    rows[300].update(is_error=True, level="error")
    rows[599]["kind"] = "stderr"  # shared by none of the last statement's rows but one
    TimelineFrame.insert_rows(ours.pk, rows)
    TimelineFrame.objects.bulk_create(TimelineFrame(session=orm, **r) for r in rows)
    fields = TimelineFrame._meta.concrete_fields
    columns = [f.attname for f in fields if f.attname not in ("id", "session_id")]
    stored = [list(s.frames.order_by("seq").values_list(*columns)) for s in (ours, orm)]
    assert len(stored[0]) == 600 and stored[0] == stored[1]
