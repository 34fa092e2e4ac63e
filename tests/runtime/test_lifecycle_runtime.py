"""The lifecycle bar of real sessions: a start-up that fails ends failed (never "starting…" for
ever), and a reconnect is a second connection after a closed phase."""

from __future__ import annotations

import html as html_text
import re
import sys
from typing import Any

import pytest
from support.teams import ateam_of
from support.web import live_runtime, logged_in_client, make_user, start_session, stdio_config, wait_until

from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


async def _ended(user: Any, config: dict[str, Any]) -> McpSession:
    session = await McpSession.objects.acreate(
        owner=user, team=await ateam_of(user), name=config["name"], config=config
    )
    await client.start_session(session)

    def ended() -> McpSession | None:
        session.refresh_from_db()
        return session if session.status in ("failed", "closed") and not session.worker_channel else None

    return await wait_until(ended, what="the session ended")


def _states(html: str) -> list[str]:
    return re.findall(r'<rect class="phase [^"]*" data-state="([a-z]+)"', html)


@pytest.mark.parametrize(
    "command, args, why",
    [
        ("/nonexistent/mcp-server", [], "cannot start '/nonexistent/mcp-server'"),
        # Which the engine notices first, the exit or stdout closing, is a race: any note will do.
        (sys.executable, ["-c", "import sys; sys.exit(3)"], ""),
    ],
    ids=["no such command", "exits at once"],
)
async def test_a_start_up_that_fails_shows_a_failed_phase_not_starting(
    command: str, args: list[str], why: str
) -> None:
    user = await make_user()
    web = await logged_in_client(user)
    async with live_runtime():
        session = await _ended(user, stdio_config(command, args))
    assert session.status == "failed"
    page = await web.get(f"/s/{session.public_id}/panel/overview")
    html = page.content.decode()
    states = _states(html)
    assert states[-1] == "failed", states
    assert "starting…" not in html
    notes = re.findall(
        r'<li class="phase-item phase-failed[^"]*">.*?<span class="muted phase-note">(.*?)</span>', html, re.S
    )
    assert notes[-1].strip() and why in html_text.unescape(notes[-1]), notes  # the failure, said


async def test_a_config_the_engine_cannot_use_fails_with_no_frame_and_still_shows_failed() -> None:
    user = await make_user()
    web = await logged_in_client(user)
    async with live_runtime():
        # A transport the engine does not know: the owner fails it before the engine records a frame.
        session = await _ended(user, stdio_config("x", [], transport="telepathy"))
    assert session.status == "failed" and session.last_seq == 0
    html = (await web.get(f"/s/{session.public_id}/panel/overview")).content.decode()
    assert _states(html) == ["starting", "failed"]
    assert "cannot connect" in html


async def test_a_reconnect_shows_the_closed_phase_and_a_second_connection(everything_stdio: dict) -> None:
    user = await make_user()
    web = await logged_in_client(user)
    async with live_runtime():
        session = await start_session(user, stdio_config(**everything_stdio))
        await client.call(session, m.Disconnect())
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "closed", what="closed")
        assert (await web.post(f"/s/{session.public_id}/reconnect")).status_code in (204, 302)
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "ready", what="ready again")
        html = (await web.get(f"/s/{session.public_id}/panel/overview")).content.decode()
    states = _states(html)
    first_ready = states.index("ready")
    assert states[first_ready + 1 : first_ready + 4] == ["closing", "closed", "connecting"], states
    assert states[-1] == "ready", states
    assert 'data-runs="2"' in html
    assert "↻ connection 2" in html
