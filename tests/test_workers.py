"""Hosted engine workers: a worker that stops beating has its live sessions marked lost.

(tests/test_hosted.py kills a real worker process with SIGKILL and watches its session go lost.)
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone
from support.teams import ateam_of, team_of

from sessions.models import EngineWorker, McpSession
from sessions.runtime import workers
from sessions.runtime.messages import StateChanged, decode_event

pytestmark = pytest.mark.django_db


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
async def test_a_web_process_reaper_marks_a_dead_workers_sessions_lost_and_tells_their_pages() -> None:
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
    layer = get_channel_layer()
    watcher = await layer.new_channel()
    await layer.group_add(orphan.group_name, watcher)
    lost = await workers.reap_and_tell()
    assert [s.pk for s in lost] == [orphan.pk]
    assert decode_event(await layer.receive(watcher)) == StateChanged("lost")
    await orphan.arefresh_from_db()
    assert orphan.status == "lost"
