"""A process's link to its channel layer's server, a worker's health and a view's answer while it is
down. (tests/hosted/test_channel_layer.py drops a real Redis under the hosted set-up.)"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.http import HttpResponse
from django.test import RequestFactory, override_settings
from django.utils import timezone
from support.teams import team_of

from inspector.engine_down import EngineDownMiddleware
from sessions.models import EngineWorker, McpSession
from sessions.runtime import workers
from sessions.runtime.link import ChannelLayerDown, Link


async def test_a_link_wakes_what_waits_when_it_goes_down_and_when_it_comes_back() -> None:
    link = Link()
    waiting = asyncio.ensure_future(link.changed(link.changes))
    await asyncio.sleep(0)
    assert not waiting.done()
    link.down("Redis: Connection closed by server.")
    link.down("Redis: Error 111 connecting")  # still the same outage: no second change
    seen = await asyncio.wait_for(waiting, 1)
    assert not link.up and link.problem == "Redis: Error 111 connecting" and link.outages == 1
    back = asyncio.ensure_future(link.changed(seen))
    link.restored()
    assert await asyncio.wait_for(back, 1) == seen + 1
    assert link.up and link.problem == "" and link.last_problem == "Redis: Error 111 connecting"


@pytest.mark.django_db
@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0)
def test_a_worker_that_cannot_receive_commands_is_unhealthy_and_says_why_and_so_do_its_lost_sessions() -> (
    None
):
    here = workers.new_name()
    workers.beat(here)
    call_command("run_engine_worker", "--check")
    workers.unwell(here, "Redis: Connection refused")
    with pytest.raises(
        CommandError, match=f"engine worker {here} cannot receive commands: Redis: Connection"
    ):
        call_command("run_engine_worker", "--check")
    workers.beat(here)  # back: beating clears it
    call_command("run_engine_worker", "--check")

    owner = User.objects.create_user("alice")
    session = McpSession.objects.create(
        owner=owner,
        team=team_of(owner),
        name="s",
        config={},
        status="ready",
        worker=here,
        worker_channel="c!x",
    )
    workers.unwell(here, "Redis: Connection refused")
    EngineWorker.objects.filter(name=here).update(last_seen=timezone.now() - timedelta(seconds=10))
    assert [s.pk for s in workers.reap()] == [session.pk]
    session.refresh_from_db()
    assert (
        session.status == "lost"
        and "cannot receive commands: Redis: Connection refused" in session.status_note
    )


def test_a_view_that_meets_the_channel_layer_down_answers_503_with_why() -> None:
    middleware = EngineDownMiddleware(lambda request: HttpResponse())
    request = RequestFactory().post("/s/x/request")
    answer = middleware.process_exception(request, ChannelLayerDown("Redis: Connection refused"))
    assert answer is not None and answer.status_code == 503 and answer["Retry-After"]
    assert "channel layer is down (Redis: Connection refused)" in answer.content.decode()
    assert middleware.process_exception(request, ValueError("other")) is None
