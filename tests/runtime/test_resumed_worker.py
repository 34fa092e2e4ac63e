"""A worker that stops (SIGSTOP, a long pause) and resumes after its sessions were declared lost changes
nothing of them and stores nothing more in them: its owners find out at their next write and stop.

No process: a paused worker is one whose heartbeat the reaper found stale, and nothing in its event loop
runs meanwhile; resuming is its owners going on as if nothing had happened. That is what happens here,
with the worker's runtime in the test's event loop, talking to a scripted server.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import override_settings
from django.utils import timezone
from support.teams import ateam_of
from support.web import fresh_layer, make_user, stdio_config, wait_until

from sessions.engine.testing import ScriptedTransport
from sessions.models import EngineWorker, McpSession, TimelineFrame
from sessions.runtime import owner as owner_module
from sessions.runtime import workers
from sessions.runtime.host import Runtime

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "paused:1:a"


def _log(i: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}}


@override_settings(INSPECTOR_EMBEDDED_RUNTIME=False, INSPECTOR_WORKER_HEARTBEAT=1.0)
async def test_a_resumed_worker_leaves_a_session_declared_lost_as_it_was_and_stores_nothing_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    transports: list[ScriptedTransport] = []

    def scripted(target: Any) -> ScriptedTransport:
        transports.append(ScriptedTransport(handshake=True))
        return transports[-1]

    monkeypatch.setattr(owner_module, "make_transport", scripted)
    async with fresh_layer() as layer:
        alice = await make_user()
        session = await McpSession.objects.acreate(
            owner=alice, team=await ateam_of(alice), name="paused", config=stdio_config("x", [])
        )
        await EngineWorker.objects.acreate(name=WORKER, last_seen=timezone.now())
        runtime = Runtime(layer, worker=WORKER)
        runtime.start(session.pk)
        task = runtime.tasks[session.pk]
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "ready")
        [server] = transports
        server.server_sends(_log(1))
        logged = TimelineFrame.objects.filter(session=session, method="notifications/message")
        await wait_until(logged.exists)

        # The worker stops beating (it is paused): three beats later the reaper declares its sessions lost.
        stale = timezone.now() - timedelta(seconds=10)
        await EngineWorker.objects.filter(name=WORKER).aupdate(last_seen=stale)
        assert [s.pk for s in await database_sync_to_async(workers.reap)()] == [session.pk]
        declared = await McpSession.objects.aget(pk=session.pk)
        assert declared.status == "lost"

        # It resumes: its server goes on talking, then the connection ends as a stopped worker's would.
        for i in range(2, 12):
            server.server_sends(_log(i))
        await wait_until(lambda: task.done())
        assert runtime.owners == {}

    after = await McpSession.objects.aget(pk=session.pk)
    assert (after.status, after.status_note, after.ended) == ("lost", declared.status_note, declared.ended)
    assert (after.last_seq, after.phases, after.worker_channel) == (declared.last_seq, declared.phases, "")
    assert await TimelineFrame.objects.filter(session=session, seq__gt=declared.last_seq).acount() == 0
    assert server.closed  # its owner stopped, and closed the connection
