"""Replay against… in the web: a session's conversation sent again as a new live session (to a saved
server or the session's own), and the side-by-side view of the replay beside its recording. Real SDK
servers; the next build (``--next``) has planted changes, as the CLI's replay tests use."""

from __future__ import annotations

import html
import re
import shlex
from typing import Any

import pytest
from channels.db import database_sync_to_async
from support.teams import ateam_of
from support.web import (
    live_runtime,
    logged_in_client,
    make_user,
    request,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.models import McpSession, ServerConfig

pytestmark = pytest.mark.django_db(transaction=True)


async def recorded_session(user: Any, sdk_stdio: dict) -> McpSession:
    """A live session that listed the tools and called echo and add."""
    session = await start_session(user, stdio_config(sdk_stdio["command"], sdk_stdio["args"], name="sdk"))
    assert "result" in await request(session, "tools/list", {})
    assert "result" in await request(session, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert "result" in await request(session, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    return session


async def replayed(client: Any, session: McpSession, target: str, **fields: str) -> tuple[McpSession, str]:
    """Replay ``session`` against ``target`` (a new one's ``fields``); the replay once ended, and its
    side-by-side page."""
    response = await client.post(f"/s/{session.public_id}/replay/start", {"target": target, **fields})
    assert response.status_code == 302, response.content.decode()
    replay = await McpSession.objects.aget(replay_of=session)
    assert response["Location"] == f"/s/{replay.public_id}/replayed"
    ended = await wait_until(lambda: McpSession.objects.filter(pk=replay.pk, status="closed").first())
    page = (await client.get(response["Location"])).content.decode()
    return ended, page


def steps_of(page: str) -> list[str]:
    """Each step's summary line, as text."""
    lines = re.findall(r"<summary><span class=\"replay-step-number\">(.*?)</summary>", page, re.S)
    return [" ".join(html.unescape(re.sub(r"<[^>]+>|\s+", " ", line)).split()) for line in lines]


@pytest.mark.slow
async def test_a_replay_against_the_next_build_shows_each_change_beside_the_recording(
    sdk_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        session = await recorded_session(alice, sdk_stdio)
        form = (await client.get(f"/s/{session.public_id}/replay")).content.decode()
        assert '<option value="own" selected>' in form and "csrfmiddlewaretoken" in form
        nxt = await ServerConfig.objects.acreate(
            team=await ateam_of(alice), name="next build", command=sdk_stdio["command"],
            args=[*sdk_stdio["args"], "--next"],
        )  # fmt: skip
        assert (
            f'<option value="{nxt.pk}">Saved server: next build</option>'
            in (await client.get(f"/s/{session.public_id}/replay")).content.decode()
        )
        # Timing is left out: a loaded machine makes a step "slower" (tests/replay holds that rule).
        replay, page = await replayed(client, session, str(nxt.pk), no_latency="on")
        assert replay.status_note == "replay finished: 3 of 3 requests answered"
        assert replay.server_id == nxt.pk and replay.name == "Replay of sdk"
        # It opened as the recorded client did, and sent the recorded requests in their order.
        assert replay.client_capabilities == session.client_capabilities
        steps = steps_of(page)
        assert steps[0].startswith("0 initialize unchanged") and steps[1].startswith("1 tools/list 2 changes")
        assert steps[2].startswith("2 tools/call echo 2 changes")
        assert re.search(r"4 steps, [23] changed", page)
        # A change: its rule, its path and both values, escaped.
        assert '<code class="replay-path">$.result.tools[?(@.name==&quot;needs_login&quot;)]</code>' in page
        echo = page[page.index('id="step-2"') : page.index('id="step-3"')]
        assert '<pre class="d-del">hi</pre>' in echo and '<pre class="d-add">hi!</pre>' in echo
        assert "notifications/message" not in echo  # its log line is gone, but nothing ties one to a call
        # Both sides of each step, each linking to its frame in its own session.
        assert (
            f'href="/s/{session.public_id}/?frame=' in echo and f'href="/s/{replay.public_id}/?frame=' in echo
        )
        # The summary on top counts the changes by kind.
        rules = page[page.index('class="fp-table replay-rules"') : page.index("</table>")]
        assert "<td>value changed</td><td>2</td>" in rules and "<td>removed</td><td>1</td>" in rules
        # The replay's own page links to this view; the recording's offers Replay against….
        assert (
            f'href="/s/{replay.public_id}/replayed"'
            in (await client.get(f"/s/{replay.public_id}/")).content.decode()
        )
        assert (
            f'href="/s/{session.public_id}/replay"'
            in (await client.get(f"/s/{session.public_id}/")).content.decode()
        )


@pytest.mark.slow
async def test_a_replay_against_the_sessions_own_server_changes_nothing(sdk_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        session = await recorded_session(alice, sdk_stdio)
        await request(session, "ping", {})
        replay, page = await replayed(client, session, "own")
        assert replay.status_note == "replay finished: 4 of 4 requests answered"
        # The machine's load is not the server's speed: only "slower" may differ.
        rules = re.findall(r'<span class="verdict sev-warning">([a-z ]+)</span></td>', page)
        assert set(rules) <= {"slower"}, rules
        assert page.count("<details>") + page.count("<details open>") == 5


async def test_a_replay_needs_a_target_it_may_start_and_a_conversation() -> None:
    alice = await make_user()
    client = await logged_in_client(alice)
    team = await ateam_of(alice)
    empty = await McpSession.objects.acreate(team=team, owner=alice, name="empty", config={}, status="closed")
    response = await client.post(f"/s/{empty.public_id}/replay/start", {"target": "own"})
    assert response.status_code == 400 and "has no initialize" in response.content.decode()
    page = (await client.get(f"/s/{empty.public_id}/replay")).content.decode()
    assert "cannot be replayed" in page and "<form" not in page.split('class="replay-page"')[1]
    assert (await client.get(f"/s/{empty.public_id}/replayed")).status_code == 404


@database_sync_to_async
def _frames(session: McpSession, lines: list[bytes]) -> None:
    import json

    from sessions.frames import frame_from_record, frame_row
    from sessions.models import TimelineFrame

    for number, line in enumerate(lines, 1):
        frame = frame_from_record(json.loads(line), number)
        TimelineFrame.objects.create(session=session, **frame_row(frame, 0))


INITIALIZE = (
    b'{"seq": 1, "kind": "message", "direction": "out", "rpc_kind": "request", "method": "initialize",'
    b' "rpc_id": 0, "raw": "{\\"jsonrpc\\": \\"2.0\\", \\"id\\": 0, \\"method\\": \\"initialize\\",'
    b' \\"params\\": {\\"protocolVersion\\": \\"2025-11-25\\", \\"capabilities\\": {}}}"}'
)
PING = (
    b'{"seq": 2, "kind": "message", "direction": "out", "rpc_kind": "request", "method": "ping",'
    b' "rpc_id": 1, "raw": "{\\"jsonrpc\\": \\"2.0\\", \\"id\\": 1, \\"method\\": \\"ping\\"}"}'
)


async def test_a_recording_replays_only_against_a_saved_server_of_its_team() -> None:
    alice, dave = await make_user(), await make_user("dave")
    client = await logged_in_client(alice)
    team = await ateam_of(alice)
    recording = await McpSession.objects.acreate(
        team=team, owner=alice, name="rec", config={}, status="closed", recording_sha256="0" * 64
    )
    await _frames(recording, [INITIALIZE, PING])
    page = (await client.get(f"/s/{recording.public_id}/replay")).content.decode()
    assert '<option value="own"' not in page and '<option value="new" selected>' in page
    response = await client.post(f"/s/{recording.public_id}/replay/start", {"target": "own"})
    assert response.status_code == 400 and "no server of its own" in response.content.decode()
    elsewhere = await ServerConfig.objects.acreate(team=await ateam_of(dave), name="dave's", command="x")
    response = await client.post(f"/s/{recording.public_id}/replay/start", {"target": str(elsewhere.pk)})
    assert response.status_code == 400 and "No such saved server" in response.content.decode()
    for hostile in ("", "1e3", "٣", "9" * 40):
        response = await client.post(f"/s/{recording.public_id}/replay/start", {"target": hostile})
        assert response.status_code == 400, hostile
    assert not await McpSession.objects.filter(replay_of=recording).aexists()


async def test_a_viewer_sees_the_choice_but_is_not_offered_to_start_nor_may_start() -> None:
    from sessions.teams.models import Membership, Role

    alice, carol = await make_user(), await make_user("carol")
    team = await ateam_of(alice)
    await Membership.objects.acreate(team=team, user=carol, role=Role.VIEWER)
    session = await McpSession.objects.acreate(
        team=team, owner=alice, name="s", config={"command": "x"}, status="closed"
    )
    viewer = await logged_in_client(carol)
    page = (await viewer.get(f"/s/{session.public_id}/replay")).content.decode()
    assert "your role here is viewer" in page
    assert 'name="target"' not in page
    assert (await viewer.post(f"/s/{session.public_id}/replay/start", {"target": "own"})).status_code == 403


@pytest.mark.slow
async def test_a_replay_against_a_new_target_reports_the_planted_changes_and_may_leave_latency_out(
    planted_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        session = await start_session(
            alice, stdio_config(planted_stdio["command"], planted_stdio["args"], name="planted")
        )
        for method, params in [
            ("tools/list", {}),
            ("tools/call", {"name": "hello", "arguments": {}}),
            ("tools/call", {"name": "divide", "arguments": {"a": 6, "b": 3}}),
            ("tools/call", {"name": "wait", "arguments": {}}),
        ]:
            assert "result" in await request(session, method, params)
        command = shlex.join([planted_stdio["command"], *planted_stdio["args"], "--build", "B"])
        replay, page = await replayed(
            client, session, "new", transport="stdio", command=command, env="PLANTED=1", no_latency="on"
        )
        assert replay.status_note == "replay finished: 4 of 4 requests answered"
        assert (replay.server_id, replay.replay_latency) == (None, False)
        assert replay.config["args"][-2:] == ["--build", "B"] and replay.config["env"] == {"PLANTED": "1"}
        found = re.findall(
            r'<td><span class="verdict sev-warning">([a-zA-Z ]+)</span></td>\s*<td><code class="replay-path">'
            r"([^<]+)</code>",
            page,
        )
        assert [(rule, html.unescape(path)) for rule, path in found] == [
            ("removed", "$.result.capabilities.prompts"),
            ("required changed", '$.result.tools[?(@.name=="greet")].inputSchema.required'),
            ("removed", '$.result.tools[?(@.name=="retired")]'),
            ("added", '$.result.tools[?(@.name=="fresh")]'),
            ("value changed", "$.result.content[0].text"),
            ("isError changed", "$.result.isError"),
        ]  # the wait step, half a second slower, is not counted: the person said timing is noise here
        assert "Note: a step that became slower is not counted as a change." in page
        assert f"against a new target, <code>{html.escape(command)}</code>" in page
        assert steps_of(page)[4].startswith("4 tools/call wait unchanged")


async def test_a_new_target_is_held_to_the_connect_forms_rules() -> None:
    alice = await make_user()
    client = await logged_in_client(alice)
    session = await McpSession.objects.acreate(
        team=await ateam_of(alice), owner=alice, name="s", config={"command": "x"}, status="closed"
    )
    await _frames(session, [INITIALIZE, PING])
    for fields, why in [
        ({"transport": "stdio", "command": ""}, "a stdio server needs a command"),
        ({"transport": "http", "url": "ftp://x"}, "an HTTP server needs an http:// or https:// URL"),
        ({"transport": "stdio", "command": "srv", "env": "NOEQUALS"}, "expected KEY=value"),
        ({"transport": "carrier pigeon", "command": "srv"}, "Select a valid choice"),
    ]:
        response = await client.post(f"/s/{session.public_id}/replay/start", {"target": "new", **fields})
        assert response.status_code == 400, fields
        assert why in html.unescape(response.content.decode()), fields
    assert not await McpSession.objects.filter(replay_of=session).aexists()


@pytest.mark.slow
async def test_a_stateless_session_replays_statelessly(planted_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        config = stdio_config(
            planted_stdio["command"], planted_stdio["args"], name="planted", protocol_version="2026-07-28"
        )
        session = await start_session(alice, config)
        assert session.mode == "stateless"
        assert "result" in await request(session, "tools/call", {"name": "hello", "arguments": {}})
        replay, page = await replayed(client, session, "own", no_latency="on")
        assert replay.status_note == "replay finished: 1 of 1 requests answered"
        assert (replay.mode, replay.protocol_version) == ("stateless", "2026-07-28")
        # Each session opened its own stream for change notifications: not a step of the conversation.
        assert [step.split(" ")[:4] for step in steps_of(page)] == [
            ["0", "server/discover", "unchanged", "–"],
            ["1", "tools/call", "hello", "unchanged"],
        ]
