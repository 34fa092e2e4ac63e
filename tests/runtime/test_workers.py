"""Hosted engine workers: a worker that stops beating has its live sessions marked lost.

(tests/hosted/test_hosted.py kills a real worker process with SIGKILL and watches its session go lost.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.utils import timezone
from support.teams import ateam_of, team_of
from support.web import fresh_layer

from sessions.models import EngineWorker, McpSession, TimelineFrame
from sessions.runtime import client, workers
from sessions.runtime.messages import RUNTIME_CHANNEL, FramesStored, StartSession, StateChanged, decode_event

pytestmark = pytest.mark.django_db


@pytest.fixture
async def layer() -> AsyncIterator[Any]:
    async with fresh_layer() as layer:
        yield layer


def _session(owner: User, name: str, worker: str, status: str = "ready") -> McpSession:
    return McpSession.objects.create(
        owner=owner,
        team=team_of(owner),
        name=name,
        config={},
        status=status,
        worker=worker,
        worker_channel=f"{name}!x",
    )


@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
def test_the_sessions_of_a_silent_worker_are_marked_lost_and_no_others() -> None:
    owner = User.objects.create_user("erin")
    now = timezone.now()
    EngineWorker.objects.create(name="dead:1:a", last_seen=now - timedelta(seconds=10))
    EngineWorker.objects.create(name="alive:2:b", last_seen=now)
    orphan = _session(owner, "orphan", "dead:1:a")
    fine = _session(owner, "fine", "alive:2:b")
    ended = _session(owner, "ended", "dead:1:a", status="closed")

    lost = workers.reap()
    assert [s.pk for s in lost] == [orphan.pk]
    orphan.refresh_from_db()
    fine.refresh_from_db()
    ended.refresh_from_db()
    assert orphan.status == "lost" and orphan.worker_channel == "" and orphan.ended is not None
    assert (
        "dead:1:a stopped answering" in orphan.status_note
        and "frames up to its last write" in orphan.status_note
    )
    assert fine.status == "ready" and ended.status == "closed"
    assert list(EngineWorker.objects.values_list("name", flat=True)) == ["alive:2:b"]
    assert workers.reap() == []

    workers.beat("alive:2:b")  # a beat refreshes the row, and a new name registers
    workers.beat("new:3:c")
    assert EngineWorker.objects.count() == 2
    workers.retire("new:3:c")
    assert not EngineWorker.objects.filter(name="new:3:c").exists()


@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
def test_loading_pages_marks_nothing_lost(client: Client) -> None:
    owner = User.objects.create_user("frank")
    EngineWorker.objects.create(name="dead:1:a", last_seen=timezone.now() - timedelta(seconds=10))
    orphan = _session(owner, "orphan", "dead:1:a")
    client.force_login(owner)
    assert client.get("/").status_code == 200
    assert client.get(f"/s/{orphan.public_id}/").status_code == 200
    orphan.refresh_from_db()
    assert orphan.status == "ready"  # GET changes nothing; the reaper (below) or a worker does it


@pytest.mark.django_db(transaction=True)
@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
async def test_a_web_process_reaper_marks_a_dead_workers_sessions_lost_and_tells_their_pages(
    layer: Any,
) -> None:
    owner = await User.objects.acreate(username="grace")
    await EngineWorker.objects.acreate(name="dead:1:a", last_seen=timezone.now() - timedelta(seconds=10))
    orphan = await McpSession.objects.acreate(
        owner=owner,
        team=await ateam_of(owner),
        name="orphan",
        config={},
        status="ready",
        worker="dead:1:a",
        worker_channel="orphan!x",
    )
    watcher = await layer.new_channel()
    await layer.group_add(orphan.group_name, watcher)
    lost = await workers.reap_and_tell()
    assert [s.pk for s in lost] == [orphan.pk]
    assert decode_event(await layer.receive(watcher)) == StateChanged("lost")
    await orphan.arefresh_from_db()
    assert orphan.status == "lost"


# --- a session that no worker takes -----------------------------------------------------------------


async def _watch(layer: Any, session: McpSession) -> str:
    watcher = await layer.new_channel()
    await layer.group_add(session.group_name, watcher)
    return watcher


async def _nothing_on(layer: Any, channel: str) -> bool:
    """Nothing is waiting on ``channel`` (sent before the call: a short wait suffices)."""
    try:
        await asyncio.wait_for(layer.receive(channel), 0.2)
    except TimeoutError:
        return True
    return False


@pytest.mark.django_db(transaction=True)
@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
async def test_with_no_worker_alive_a_new_session_fails_at_once_and_says_how_to_start_one(layer: Any) -> None:
    owner = await User.objects.acreate(username="heidi")
    await EngineWorker.objects.acreate(name="dead:1:a", last_seen=timezone.now() - timedelta(seconds=10))
    session = await McpSession.objects.acreate(owner=owner, team=await ateam_of(owner), name="s", config={})
    watcher = await _watch(layer, session)
    await client.start_session(session)
    assert session.status == "failed" and "manage.py run_engine_worker" in session.status_note
    stored = await McpSession.objects.aget(pk=session.pk)
    assert stored.status == "failed" and stored.status_note == session.status_note
    assert stored.last_seq == 1 and stored.ended is not None and not stored.is_live
    frame = await TimelineFrame.objects.aget(session=session)
    assert (frame.seq, frame.kind, frame.note) == (1, "state", session.status_note)
    frames = decode_event(await layer.receive(watcher))
    assert isinstance(frames, FramesStored) and (frames.first, frames.last) == (1, 1)
    assert decode_event(await layer.receive(watcher)) == StateChanged("failed", session.status_note)
    assert await _nothing_on(layer, RUNTIME_CHANNEL)  # no worker will find a stale StartSession later


@pytest.mark.django_db(transaction=True)
@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
async def test_with_a_worker_alive_a_session_asks_for_it_and_notes_when(layer: Any) -> None:
    owner = await User.objects.acreate(username="ivan")
    await EngineWorker.objects.acreate(name="alive:1:a", last_seen=timezone.now())
    session = await McpSession.objects.acreate(owner=owner, team=await ateam_of(owner), name="s", config={})
    await client.start_session(session)
    assert await layer.receive(RUNTIME_CHANNEL) == StartSession(session.pk).encode()
    stored = await McpSession.objects.aget(pk=session.pk)
    assert stored.status == "starting" and stored.last_seq == 0
    assert [p["state"] for p in stored.phases] == ["starting"]
    assert stored.phases[0]["note"] == "waiting for an engine worker"


@pytest.mark.django_db(transaction=True)
@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
async def test_a_start_no_worker_took_within_three_beats_fails_and_its_pages_are_told(layer: Any) -> None:
    owner = await User.objects.acreate(username="judy")
    now = timezone.now()
    await EngineWorker.objects.acreate(name="alive:1:a", last_seen=now)
    await EngineWorker.objects.acreate(name="dead:2:b", last_seen=now - timedelta(seconds=10))

    def asked(seconds_ago: float) -> list[dict[str, Any]]:
        return [{"state": "starting", "note": "waiting", "wall": now.timestamp() - seconds_ago}]

    untaken = await McpSession.objects.acreate(
        owner=owner, team=await ateam_of(owner), name="untaken", config={}, phases=asked(10)
    )
    # A reconnect of a session its dead worker once ran: the new start was never taken, so it failed
    # (not "lost": that worker had nothing to do with this start).
    again = await McpSession.objects.acreate(
        owner=owner,
        team=await ateam_of(owner),
        name="again",
        config={},
        worker="dead:2:b",
        last_seq=5,
        phases=asked(10),
    )
    waiting = await McpSession.objects.acreate(
        owner=owner, team=await ateam_of(owner), name="waiting", config={}, phases=asked(0.1)
    )
    taken = await McpSession.objects.acreate(
        owner=owner, team=await ateam_of(owner), name="taken", config={}, status="connecting",
        worker="alive:1:a", worker_channel="taken!x", phases=asked(10),
    )  # fmt: skip
    watcher = await _watch(layer, untaken)
    ended = await workers.reap_and_tell()
    assert sorted(s.pk for s in ended) == sorted([untaken.pk, again.pk])
    for session, seq in ((untaken, 1), (again, 6)):
        await session.arefresh_from_db()
        assert session.status == "failed" and session.last_seq == seq
        assert "no engine worker took this session within 3 s (3 heartbeats)" in session.status_note
        frame = await TimelineFrame.objects.aget(session=session)
        assert (frame.seq, frame.kind, frame.note) == (seq, "state", session.status_note)
    frames = decode_event(await layer.receive(watcher))
    assert isinstance(frames, FramesStored) and frames.rows[0]["note"] == untaken.status_note
    assert decode_event(await layer.receive(watcher)) == StateChanged("failed", untaken.status_note)
    await waiting.arefresh_from_db()
    await taken.arefresh_from_db()
    assert waiting.status == "starting" and taken.status == "connecting"
    assert await workers.reap_and_tell() == []  # each is failed once


@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0)
def test_the_worker_healthcheck_passes_only_while_a_worker_here_beats() -> None:
    with pytest.raises(CommandError, match="no engine worker on this machine"):
        call_command("run_engine_worker", "--check")
    here = workers.new_name()
    EngineWorker.objects.create(name="elsewhere:1:a", last_seen=timezone.now())
    EngineWorker.objects.create(name=here, last_seen=timezone.now() - timedelta(seconds=10))
    with pytest.raises(CommandError):
        call_command("run_engine_worker", "--check")  # stale here, fresh only on another machine
    workers.beat(here)
    call_command("run_engine_worker", "--check")


@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
def test_a_web_process_beating_for_its_tap_sessions_is_no_engine_worker_and_its_death_is_said() -> None:
    owner = User.objects.create_user("heidi")
    workers.beat("web-host:7:d:web", EngineWorker.Role.WEB)  # fresh, but takes no session to start
    waiting = _session(owner, "waiting", "", status="starting")
    McpSession.objects.filter(pk=waiting.pk).update(worker_channel="")  # asked, not taken
    failed = workers.ask_for_worker(waiting.pk)
    assert failed is not None and failed.session.status_note == workers.NO_WORKER
    EngineWorker.objects.filter(name="web-host:7:d:web").update(
        last_seen=timezone.now() - timedelta(seconds=10)
    )
    tapped = _session(owner, "tapped", "web-host:7:d:web")
    assert [s.pk for s in workers.reap()] == [tapped.pk]
    tapped.refresh_from_db()
    assert tapped.status == "lost"
    assert tapped.status_note.startswith(
        "the web process that recorded this tap session web-host:7:d:web stopped answering"
    )
