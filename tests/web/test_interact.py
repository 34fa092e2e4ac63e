"""The session switcher's list, and a tab's running call cards finished over its socket (no polling)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from channels.db import database_sync_to_async
from support.teams import ateam_of, team_of
from support.web import fresh_layer, logged_in_client, make_user, receive_until, session_communicator

from sessions.frames import SUMMARY_FIELDS
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.switcher import SHOWN, switcher_entries

pytestmark = pytest.mark.django_db(transaction=True)


def _frame(session: McpSession, seq: int, direction: str, rpc_kind: str, message: dict[str, Any]) -> None:
    raw = json.dumps(message).encode()
    TimelineFrame.objects.create(
        session=session, seq=seq, kind="message", direction=direction, wall=0.0, mono=0.0,
        method=message.get("method", ""), rpc_id=json.dumps(message["id"]), rpc_kind=rpc_kind,
        raw=raw, size=len(raw), preview=raw.decode()[:300],
    )  # fmt: skip


def test_the_switcher_lists_the_teams_live_sessions_first_then_the_newest_others_at_most_twenty() -> None:
    from django.contrib.auth.models import User

    alice, bob = User.objects.create_user("alice"), User.objects.create_user("bob")
    team = team_of(alice)
    old = [McpSession.objects.create(team=team, name=f"old {n}", status="closed") for n in range(SHOWN + 3)]
    lost = McpSession.objects.create(team=team, name="lost one", status="lost")
    recording = McpSession.objects.create(
        team=team, name="a file", status="closed", recording_sha256="ab" * 32
    )
    live = McpSession.objects.create(team=team, name="live one", status="ready")
    McpSession.objects.create(team=team_of(bob), name="bob's", status="ready")

    entries = switcher_entries(team.pk, current=lost.public_id)
    assert len(entries) == SHOWN
    assert [e.name for e in entries[:4]] == ["live one", "a file", "lost one", f"old {len(old) - 1}"]
    assert [e.state for e in entries[:4]] == ["live", "recording", "lost", "ended"]
    assert [e.current for e in entries[:4]] == [False, False, True, False]
    assert "bob's" not in {e.name for e in entries}
    assert live.public_id == entries[0].public_id and recording.public_id == entries[1].public_id


async def test_the_switcher_fragment_marks_this_session_and_is_hidden_from_other_teams() -> None:
    alice, bob = await make_user("alice"), await make_user("bob")
    here = await McpSession.objects.acreate(team=await ateam_of(alice), name="here <b>", status="ready")
    await McpSession.objects.acreate(team=await ateam_of(alice), name="there", status="failed")
    await McpSession.objects.acreate(team=await ateam_of(bob), name="bob's", status="ready")
    client = await logged_in_client(alice)
    response = await client.get(f"/s/{here.public_id}/switcher")
    page = response.content.decode()
    assert response.status_code == 200
    assert f'href="/s/{here.public_id}/" class="switcher-entry state-live" aria-current="page"' in page
    assert "here &lt;b&gt;" in page and "there" in page and "failed" in page and "bob's" not in page
    other = await logged_in_client(bob)
    assert (await other.get(f"/s/{here.public_id}/switcher")).status_code == 404


async def test_a_tab_asking_about_its_running_cards_gets_the_finished_ones_and_later_the_rest() -> None:
    async with fresh_layer():
        alice = await make_user("alice")
        session = await McpSession.objects.acreate(
            team=await ateam_of(alice), name="s", status="ready", last_seq=3
        )
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}}
        await database_sync_to_async(_frame)(session, 1, "out", "request", call)
        result = {"content": [{"type": "text", "text": "seven <done>"}]}
        await database_sync_to_async(_frame)(
            session, 2, "in", "result", {"jsonrpc": "2.0", "id": 7, "result": result}
        )
        await database_sync_to_async(_frame)(session, 3, "out", "request", {**call, "id": 8})
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/?after=3&first=1")
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        await communicator.send_to(text_data=json.dumps({"action": "calls", "ids": [7, 8, "9", True, -1]}))
        seen = await receive_until(communicator, 'id="call-7-body"', timeout=10)
        assert 'id="call-7-state" class="call-state" hx-swap-oob="true"' in seen
        assert "seven &lt;done&gt;" in seen and 'data-call-class="call"' in seen
        assert 'id="call-8-body"' not in seen  # still running: nothing to finish yet

        # Call 8's answer is stored later: the batch that says so finishes its card in this tab.
        answer = {"jsonrpc": "2.0", "id": 8, "error": {"code": -32000, "message": "eight failed"}}
        await database_sync_to_async(_frame)(session, 4, "in", "error", answer)
        from channels.layers import get_channel_layer

        from sessions.runtime import messages as m

        stored = await TimelineFrame.objects.aget(session=session, seq=4)
        row = {name: getattr(stored, name) for name in SUMMARY_FIELDS}
        await get_channel_layer().group_send(session.group_name, m.encode_event(m.FramesStored(4, 4, [row])))
        seen = await receive_until(communicator, 'id="call-8-body"', timeout=10)
        assert "eight failed" in seen and 'data-call-class="call failed"' in seen
        await communicator.disconnect()
