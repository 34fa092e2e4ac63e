"""A database that refuses writes for a while (a full disk): what is held stays bounded, what is lost is
counted and recorded as a gap, viewers hear both live; a session declared lost gets nothing more.

A real Recorder on the in-memory channel layer and the test database; the full disk is injected by
wrapping ``store_frames`` as the recorder sees it (tests/runtime/test_disk_full.py fills a real one).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.db import OperationalError
from support.teams import ateam_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.runtime import messages as m
from sessions.runtime import recorder as recorder_module
from sessions.runtime import storage
from sessions.runtime.recorder import Recorder

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 10.0
FULL = "database or disk is full"
real_store = recorder_module.store_frames


def row(seq: int) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": seq}}
    raw = json.dumps(message).encode()
    frame = Frame("message", "in", raw, seq=seq, message=message, rpc_kind="notification")
    return frame_row(frame, 0)


class Disk:
    """``store_frames`` as the recorder sees it, on a disk the test fills and frees."""

    def __init__(self) -> None:
        self.full = False
        self.refused = asyncio.Event()
        self.takes_gaps_only = False

    async def store(self, session_pk: int, batch: list[dict[str, Any]], *guard: Any) -> None:
        gaps_only = all((r["transport"] or {}).get("state") == "not-stored" for r in batch)
        if self.full and not (self.takes_gaps_only and gaps_only):
            self.refused.set()
            raise OperationalError(FULL)
        await real_store(session_pk, batch, *guard)


class Recorded:
    def __init__(self, session: McpSession, recorder: Recorder, channel: str) -> None:
        self.session, self.recorder, self.channel = session, recorder, channel
        self.layer = recorder.layer

    async def next_event(self, kind: type[m.Event], check: Any = lambda e: True) -> Any:
        async with asyncio.timeout(WAIT):
            while True:
                event = m.decode_event(await self.layer.receive(self.channel))
                if isinstance(event, kind) and check(event):
                    return event

    async def stored(self) -> list[TimelineFrame]:
        return [f async for f in TimelineFrame.objects.filter(session=self.session).order_by("seq")]


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    disk = Disk()
    monkeypatch.setattr(recorder_module, "store_frames", disk.store)
    monkeypatch.setattr(recorder_module, "REPORT_EVERY", 0.05)
    return disk


async def _recorded(owner_channel: str = "", **disowned: Any) -> Recorded:
    owner = await User.objects.acreate(username="alice")
    session = await McpSession.objects.acreate(
        owner=owner, team=await ateam_of(owner), name="disk", status="ready", worker_channel=owner_channel
    )
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(session.group_name, channel)
    recorder = Recorder(session.pk, session.group_name, layer, owner_channel=owner_channel, **disowned)
    recorder.RETRY_DELAYS = (0.0, 0.01)
    recorder.max_held = (5, 1 << 30)
    recorder.start()
    return Recorded(session, recorder, channel)


@pytest.fixture
async def recorded(disk: Disk) -> AsyncIterator[Recorded]:
    recorded = await _recorded()
    yield recorded
    disk.full = False
    async with asyncio.timeout(WAIT):
        await recorded.recorder.close()


async def test_while_the_disk_is_full_what_is_held_is_bounded_lost_frames_are_counted_and_viewers_hear_both(
    recorded: Recorded, disk: Disk
) -> None:
    recorded.recorder.add(row(1))
    await recorded.next_event(m.FramesStored)
    disk.full = True
    for seq in range(2, 5):
        recorded.recorder.add(row(seq))
    async with asyncio.timeout(WAIT):
        await disk.refused.wait()
    for seq in range(5, 21):  # 2..6 are held (the bound is 5), 7..20 lost
        recorded.recorder.add(row(seq))
    assert recorded.recorder.lost == 14
    assert len(recorded.recorder.rows) == 6  # the five held and the gap's marker
    told = await recorded.next_event(m.StorageChanged, lambda e: e.lost == 14)
    assert told == m.StorageChanged("disk full", 6, 14)
    assert [f.seq for f in await recorded.stored()] == [1]

    disk.full = False  # space freed: at the next attempt the held frames, then the gap, go in
    cleared = await recorded.next_event(m.StorageChanged, lambda e: not e.failing)
    assert cleared.lost == 14
    recorded.recorder.add(row(21))
    await recorded.next_event(m.FramesStored, lambda e: e.last == 21)
    frames = await recorded.stored()
    assert [f.seq for f in frames] == [1, 2, 3, 4, 5, 6, 7, 21]
    gap = frames[6]
    note = "14 frames not stored (disk full): seq 7-20"
    assert (gap.kind, gap.note, gap.worst) == ("state", note, "error")
    assert gap.transport == {"state": "not-stored", "first": 7, "last": 20, "count": 14}
    assert gap.verdicts == [{"code": "not-stored", "severity": "error", "message": note}]
    assert (await McpSession.objects.aget(pk=recorded.session.pk)).last_seq == 21


async def test_a_backlog_queued_past_the_bound_when_writes_start_failing_is_lost_as_one_gap(
    recorded: Recorded, disk: Disk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder_module, "MAX_BATCH", 3)
    disk.full = True
    for seq in range(1, 13):  # a flood's backlog: queued before the first write is even tried
        recorded.recorder.add(row(seq))
    async with asyncio.timeout(WAIT):
        await disk.refused.wait()
    assert [r["seq"] for r in recorded.recorder.rows] == [1, 2, 3, 4, 5, 6]  # five held, the gap's marker
    assert recorded.recorder.lost == 7
    disk.full = False
    await recorded.next_event(m.FramesStored, lambda e: e.last >= 6)
    frames = await recorded.stored()
    assert [f.seq for f in frames] == [1, 2, 3, 4, 5, 6]
    assert frames[-1].note == "7 frames not stored (disk full): seq 6-12"
    assert (await McpSession.objects.aget(pk=recorded.session.pk)).last_seq == 12


async def test_frames_still_held_at_close_on_a_full_disk_become_one_gap_when_that_much_can_be_written(
    recorded: Recorded, disk: Disk
) -> None:
    disk.full = disk.takes_gaps_only = True
    for seq in range(1, 10):
        recorded.recorder.add(row(seq))
    async with asyncio.timeout(WAIT):
        await disk.refused.wait()
        await recorded.recorder.close()
    [gap] = await recorded.stored()
    assert gap.seq == 1 and gap.note == "9 frames not stored (disk full): seq 1-9"
    assert recorded.recorder.ending_note("the inspector stopped") == (
        "the inspector stopped; 9 frames not stored (disk full): recorded as a gap in the timeline"
    )
    assert (await McpSession.objects.aget(pk=recorded.session.pk)).last_seq == 9


async def test_when_not_even_the_gap_can_be_written_at_close_the_ending_note_says_so(
    recorded: Recorded, disk: Disk
) -> None:
    disk.full = True
    for seq in range(1, 4):
        recorded.recorder.add(row(seq))
    async with asyncio.timeout(WAIT):
        await disk.refused.wait()
        await recorded.recorder.close()
    assert await recorded.stored() == []
    assert recorded.recorder.ending_note("stopped") == (
        "stopped; 3 frames not stored (disk full): the database took not even a note of it"
    )
    told = await recorded.next_event(m.StorageChanged, lambda e: e.lost == 3)
    assert told.failing == "disk full" and told.held == 0


async def test_a_session_declared_lost_gets_no_frame_more_and_its_owner_is_told(disk: Disk) -> None:
    told: list[bool] = []
    recorded = await _recorded("owner!abc", disowned=lambda: told.append(True))
    recorder = recorded.recorder
    try:
        recorder.add(row(1))
        await recorded.next_event(m.FramesStored)
        # Declared lost while this owner's process was stopped (the reaper's write), then it resumes.
        await McpSession.objects.filter(pk=recorded.session.pk).aupdate(status="lost", worker_channel="")
        for seq in range(2, 6):
            recorder.add(row(seq))
        async with asyncio.timeout(WAIT):
            while not told:
                await asyncio.sleep(0.01)
        recorder.add(row(6))
        assert recorder.rows == [] and recorder.disowned and told == [True]
    finally:
        async with asyncio.timeout(WAIT):
            await recorder.close()
    assert [f.seq for f in await recorded.stored()] == [1]
    session = await McpSession.objects.aget(pk=recorded.session.pk)
    assert (session.status, session.last_seq) == ("lost", 1)


@pytest.mark.parametrize(
    ("error", "full"),
    [
        (OperationalError("database or disk is full"), True),
        (OperationalError("disk I/O error"), False),
        (OSError(28, "No space left on device"), True),
        (OperationalError('could not extend file "base/16384/16411": No space left on device'), True),
        (OperationalError("database is locked"), False),
    ],
)
def test_a_full_disk_is_told_apart_from_other_refusals(error: Exception, full: bool) -> None:
    assert storage.is_full(error) is full
    assert (storage.cause(error) == "disk full") is full
