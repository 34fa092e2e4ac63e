"""The stateless 2026-07-28 revision in the web runtime: the mode shown, input answered by a person."""

from __future__ import annotations

import asyncio
import re
import sys
from typing import Any

import pytest
from support.paths import SERVERS
from support.web import (
    live_runtime,
    logged_in_client,
    make_user,
    request,
    start_session,
    stdio_config,
    wait_until,
    waiting_review,
)

from sessions.engine import LISTEN_ACKNOWLEDGED as ACK
from sessions.models import McpSession, PendingReview, TimelineFrame
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.web.resources import marker_id

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

STATELESS_SERVER = [str(SERVERS / "sdk_stateless.py"), "stdio"]


async def test_a_stateless_session_answers_an_input_required_call_through_a_review() -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(
            sys.executable, STATELESS_SERVER, protocol_version="2026-07-28", mode="stateless"
        )
        session = await start_session(alice, config)
        assert session.mode == "stateless" and session.protocol_version == "2026-07-28"
        client = await logged_in_client(alice)
        page = (await client.get(f"/s/{session.public_id}/")).content.decode()
        assert "stateless" in page
        call = asyncio.ensure_future(
            request(session, "tools/call", {"name": "confirm_name", "arguments": {"greeting": "Hi"}}, wait=30)
        )
        review = await waiting_review(session, "elicitation/create")
        assert review.params["message"] == "Who is there?"
        answer = await client.post(
            f"/s/{session.public_id}/reviews/{review.pk}/answer",
            {"result": '{"action": "accept", "content": {"name": "Ada"}}'},
        )
        assert answer.status_code == 200
        outcome = await asyncio.wait_for(call, 30)
        assert "Ada" in str(outcome["result"])
        assert await PendingReview.objects.filter(pk=review.pk, status="answered").aexists()


async def test_auto_mode_falls_back_to_the_handshake_and_says_why(everything_stdio: dict[str, Any]) -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(everything_stdio["command"], everything_stdio["args"], mode="auto")
        session = await start_session(alice, config)
        assert session.mode == "handshake" and session.protocol_version == "2025-11-25"
        notes = [phase["note"] for phase in session.phases]
        assert any(note.startswith("handshake: server/discover failed") for note in notes), notes
        await client.call(session, m.Disconnect())
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "closed")


async def test_a_stateless_subscription_rides_subscriptions_listen_and_updates_arrive_live() -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(
            sys.executable, STATELESS_SERVER, protocol_version="2026-07-28", mode="stateless"
        )
        session = await start_session(alice, config)
        client = await logged_in_client(alice)
        base = f"/s/{session.public_id}/"
        # The owner opens a listen stream for list changes by itself, right after discovery.
        await wait_until(lambda: TimelineFrame.objects.filter(session=session, method=ACK).exists())
        await client.post(base + "list/resources")
        panel = (await client.post(base + "resources/subscribe", {"uri": "info://server"})).content.decode()
        assert 'aria-label="Unsubscribe from info://server"' in panel
        assert "listening" in panel and "updates of 1 resource" in panel
        listens = TimelineFrame.objects.filter(
            session=session, method="subscriptions/listen", direction="out"
        )
        assert await listens.acount() == 2

        await request(session, "tools/call", {"name": "touch", "arguments": {"uri": "info://server"}})
        await wait_until(
            lambda: TimelineFrame.objects.filter(
                session=session, method="notifications/resources/updated"
            ).exists()
        )
        panel = (await client.get(base + "panel/resources")).content.decode()
        assert re.search(rf'id="{marker_id("info://server")}"[^>]*>updated \d\d:\d\d:\d\d', panel)

        panel = (
            await client.post(base + "resources/subscribe", {"uri": "info://server", "action": "unsubscribe"})
        ).content.decode()
        assert 'aria-label="Subscribe to info://server"' in panel and "no resources" in panel
        panel = (await client.post(base + "resources/subscribe", {"action": "listen"})).content.decode()
        assert "listening" in panel and await listens.acount() == 4
        assert not await TimelineFrame.objects.filter(session=session, worst="error").aexists()


async def test_listening_again_is_refused_on_a_handshake_session(everything_stdio: dict[str, Any]) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(
            alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
        )
        client = await logged_in_client(alice)
        response = await client.post(f"/s/{session.public_id}/resources/subscribe", {"action": "listen"})
        assert response.status_code == 400


async def test_panel_actions_speak_the_stateless_revision_and_engine_notes_are_not_phases() -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(
            sys.executable, STATELESS_SERVER, protocol_version="2026-07-28", mode="stateless"
        )
        session = await start_session(alice, config)
        client = await logged_in_client(alice)
        base = f"/s/{session.public_id}/"
        # 2026-07-28 has no logging/setLevel and no ping: the buttons use what it has instead.
        panel = (await client.post(base + "logging/level", {"level": "debug"})).content.decode()
        assert '<option value="debug" selected>' in panel and "failed" not in panel
        pong = (await client.post(base + "ping")).content.decode()
        assert re.search(r"pong in \d+\.\d ms", pong)
        sent = TimelineFrame.objects.filter(session=session, direction="out")
        assert not await sent.filter(method__in=("logging/setLevel", "ping")).aexists()
        assert await sent.filter(method="server/discover").acount() == 2  # connecting, then the ping
        # The level is a note on the timeline, not a step of the lifecycle.
        assert await TimelineFrame.objects.filter(session=session, transport__state="log-level").aexists()
        await session.arefresh_from_db()
        assert "log-level" not in {p["state"] for p in session.phases}
        assert session.status_note.startswith("stateless: server/discover answered")
