"""Working on a session together: presence, attribution, the activity log and notes on frames.

alice (admin) and bob (operator) are in team A, carol is a viewer there. The fast tests use a closed
session with stored frames and the in-memory channel layer; the slow ones a live server-everything.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.test import AsyncClient
from support.paths import REPO
from support.processes import free_port, start_http_server
from support.web import (
    finish,
    frames_when,
    live_runtime,
    logged_in_client,
    session_communicator,
    start_session,
    stdio_config,
    wait_for_tool,
    wait_until,
    waiting_review,
)

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.runtime import messages as m
from sessions.teams.models import Activity, Membership, Note, Role, Team
from sessions.web.together import Roster

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 10.0


# --- presence: the roster each tab keeps --------------------------------------------------------


EXPIRY = 45.0


def _event(kind: str, channel: str, user_id: int, name: str) -> m.Presence:
    return m.Presence(kind, channel, user_id, name)


def test_a_person_with_several_tabs_is_watching_once_until_their_last_tab_leaves() -> None:
    roster = Roster()
    assert roster.heard(_event("join", "tab-1", 1, "alice"), now=0)
    assert roster.heard(_event("join", "tab-2", 2, "bob"), now=0)
    assert not roster.heard(_event("join", "tab-3", 2, "bob"), now=0), "bob's second tab changes nothing"
    assert roster.people() == [(1, "alice"), (2, "bob")]
    assert not roster.heard(_event("leave", "tab-2", 2, "bob"), now=1)
    assert roster.heard(_event("leave", "tab-3", 2, "bob"), now=1)
    assert roster.people() == [(1, "alice")]


def test_a_tab_whose_process_died_expires_while_the_others_that_beat_stay() -> None:
    roster = Roster(expiry=EXPIRY)
    roster.heard(_event("join", "alive", 1, "alice"), now=0)
    roster.heard(_event("here", "dead", 2, "bob"), now=0)  # its process dies: it never says leave
    roster.heard(_event("beat", "alive", 1, "alice"), now=EXPIRY - 1)
    assert not roster.prune(now=EXPIRY - 0.5)
    assert roster.prune(now=EXPIRY + 0.5)
    assert roster.people() == [(1, "alice")]
    # A beat from a tab never heard joining (its join went to a process started later) adds it.
    assert roster.heard(_event("beat", "late", 3, "carol"), now=EXPIRY + 1)


# --- a closed session with frames, three people -------------------------------------------------


@database_sync_to_async
def _team() -> tuple[dict[str, User], McpSession]:
    team = Team.objects.create(name="team A")
    people = {}
    for name, role in (("alice", Role.ADMIN), ("bob", Role.OPERATOR), ("carol", Role.VIEWER)):
        people[name] = User.objects.create_user(name)
        Membership.objects.create(team=team, user=people[name], role=role)
    session = McpSession.objects.create(
        team=team, owner=people["alice"], name="shared", config={}, status="closed", last_seq=3
    )
    rows = []
    for seq in (1, 2, 3):
        body = {"jsonrpc": "2.0", "id": seq, "method": "tools/list"}
        frame = Frame("message", "out", json.dumps(body).encode(), message=body)
        frame.seq, frame.method, frame.rpc_id, frame.rpc_kind = seq, "tools/list", seq, "request"
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)
    return people, session


async def _until(communicator: Any, wanted: str, timeout: float = WAIT) -> str:
    """The next fragment the socket sends that contains ``wanted`` (earlier ones are skipped)."""
    async with asyncio.timeout(timeout):
        while True:
            fragment = await communicator.receive_from(timeout=timeout)
            if wanted in fragment:
                return str(fragment)


async def _watch(user: User, session: McpSession) -> Any:
    communicator = await session_communicator(user, f"/ws/sessions/{session.public_id}/")
    connected, _ = await communicator.connect(timeout=WAIT)
    assert connected
    return communicator


def _watchers(fragment: str) -> list[str]:
    return re.findall(r'<span class="watcher-name">([^<]*)</span>', fragment)


async def test_each_tab_shows_who_is_watching_and_a_closed_tab_leaves_the_list(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, session = await _team()
    alice = await _watch(people["alice"], session)
    assert _watchers(await _until(alice, 'id="presence"')) == ["alice"]
    bob = await _watch(people["bob"], session)
    assert _watchers(await _until(alice, 'id="presence"')) == ["alice", "bob"]
    # The newcomer hears of those already watching from their answers to its join.
    seen: list[str] = []
    while seen != ["alice", "bob"]:
        seen = _watchers(await _until(bob, 'id="presence"'))
    bob_again = await _watch(people["bob"], session)  # a second tab of bob's
    await _until(bob_again, 'class="watcher-name">bob<')
    await bob.disconnect()
    await bob_again.disconnect()
    # bob's first tab leaving changed no one's list; his last one does.
    assert _watchers(await _until(alice, 'id="presence"')) == ["alice"]
    await alice.disconnect()


async def test_a_note_pinned_by_bob_reaches_alices_open_tab_escaped_and_is_in_the_frame_and_export(
    settings: Any,
) -> None:
    settings.INSPECTOR_HOSTED = True
    people, session = await _team()
    alice = await _watch(people["alice"], session)
    bob = await logged_in_client(people["bob"])
    text = "progress after cancel <script>alert(1)</script>"
    response = await bob.post(f"/s/{session.public_id}/notes", {"frame": "2", "text": text})
    assert response.status_code == 200
    body = response.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert" not in body
    note = await Note.objects.aget(session=session)
    assert (note.frame_seq, note.author_id, note.text) == (2, people["bob"].pk, text)

    # In the order they happened: the activity entry, then the timeline row's marker and the thread.
    entry = await _until(alice, "beforeend:#activity-list")
    assert "bob" in entry and "pinned a note" in entry
    marker = await _until(alice, 'id="notes-2" hx-swap-oob="true"')
    assert "✎1" in marker
    thread = await _until(alice, 'id="thread-list-2"')
    assert f'id="note-{note.pk}"' in thread and "&lt;script&gt;" in thread and "<script>" not in thread

    # A reply to the reply joins the same thread; alice's link opens the frame with the note.
    reply = await bob.post(
        f"/s/{session.public_id}/notes", {"frame": "2", "text": "agreed", "reply_to": str(note.pk)}
    )
    assert reply.status_code == 200
    answer = await Note.objects.aget(session=session, text="agreed")
    deeper = await bob.post(
        f"/s/{session.public_id}/notes", {"frame": "2", "text": "+1", "reply_to": str(answer.pk)}
    )
    assert deeper.status_code == 200
    assert await Note.objects.filter(session=session, reply_to=note).acount() == 2

    reader = await logged_in_client(people["alice"])
    page = (await reader.get(f"/s/{session.public_id}/?frame=2")).content.decode()
    assert f'id="note-{note.pk}"' in page and f'?frame=2#note-{note.pk}"' in page
    assert 'id="notes-2"' in page and "✎3" in page  # the timeline row's marker
    frame = (await reader.get(f"/s/{session.public_id}/frames/2")).content.decode()
    assert "agreed" in frame and "Pin a note on frame 2" in frame

    export = await reader.get(f"/s/{session.public_id}/export.html")
    html = "".join([chunk.decode() async for chunk in export.streaming_content])
    finish(export)
    assert f'id="note-{note.pk}"' in html and "&lt;script&gt;alert(1)" in html and "<script>" not in html
    await alice.disconnect()


async def test_a_viewer_reads_notes_but_cannot_pin_one(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    people, session = await _team()
    await Note.objects.acreate(session=session, frame_seq=1, author=people["bob"], text="look here")
    carol = await logged_in_client(people["carol"])
    frame = (await carol.get(f"/s/{session.public_id}/frames/1")).content.decode()
    assert "look here" in frame and "Pin a note" not in frame and "you can read them" in frame
    response = await carol.post(f"/s/{session.public_id}/notes", {"frame": "1", "text": "mine"})
    assert response.status_code == 403
    assert await Note.objects.filter(session=session).acount() == 1


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"frame": "2", "text": "   "}, 422, "Write something first"),
        ({"frame": "99", "text": "x"}, 422, "There is no frame 99"),
        ({"frame": "2", "text": "x" * 10_001}, 422, "at most 10000 characters"),
        ({"frame": "2", "text": "x", "reply_to": "999999"}, 422, "not on this frame"),
        ({"text": "x"}, 400, "frame is required"),
        ({"frame": "two", "text": "x"}, 400, "frame must be a whole number"),
    ],
)
async def test_a_note_that_cannot_be_pinned_says_why_and_keeps_the_text(
    settings: Any, fields: dict[str, str], status: int, says: str
) -> None:
    settings.INSPECTOR_HOSTED = True
    people, session = await _team()
    bob = await logged_in_client(people["bob"])
    response = await bob.post(f"/s/{session.public_id}/notes", fields)
    assert response.status_code == status
    assert says in response.content.decode()
    assert not await Note.objects.filter(session=session).aexists()


# --- attribution against a live server ----------------------------------------------------------


@pytest.mark.slow
async def test_requests_answers_and_connecting_are_attributed_to_the_person(
    settings: Any, everything_stdio: dict
) -> None:
    async with live_runtime():
        people, _ = await _team()
        config = stdio_config(everything_stdio["command"], everything_stdio["args"])
        live = await start_session(people["alice"], config)
        await wait_for_tool(live, "trigger-sampling-request")
        alice = await _watch(people["alice"], live)
        bob = await logged_in_client(people["bob"])

        # bob's request: the activity names him with the request's frame; the frame's detail says so.
        echo = {"name": "echo", "arguments": {"message": "hi"}}
        response = await bob.post(
            f"/s/{live.public_id}/request", {"method": "tools/call", "params": json.dumps(echo)}
        )
        assert response.status_code == 200
        sent = await wait_until(
            lambda: Activity.objects.filter(session=live, action="sent", detail="tools/call").first()
        )
        assert sent.user_id == people["bob"].pk
        request = (await frames_when(live, seq=sent.frame_seq))[0]
        assert (request.direction, request.rpc_kind, request.method) == ("out", "request", "tools/call")
        entry = await _until(alice, f'id="activity-{sent.pk}"')
        assert "bob" in entry and "tools/call" in entry
        detail = (await bob.get(f"/s/{live.public_id}/frames/{sent.frame_seq}")).content.decode()
        assert "Sent by <strong>bob</strong>" in detail

        # bob answers a sampling card: the response frame says so, and alice's tab shows who answered.
        sampling = {"name": "trigger-sampling-request", "arguments": {"prompt": "Tea?", "maxTokens": 5}}
        response = await bob.post(
            f"/s/{live.public_id}/request", {"method": "tools/call", "params": json.dumps(sampling)}
        )
        assert response.status_code == 200  # a running call card: it waits for a person
        review = await waiting_review(live, "sampling/createMessage")
        await _until(alice, f'id="review-{review.pk}"')
        answer = {"text": "Tea.", "model": "human", "stop_reason": "endTurn"}
        response = await bob.post(f"/s/{live.public_id}/reviews/{review.pk}/sampling", answer)
        assert response.status_code == 200
        ended = await _until(alice, f'id="review-{review.pk}-ended"')
        assert "Answered by <strong>bob</strong>" in ended
        frames = await frames_when(live, direction="out", rpc_kind="result", method="sampling/createMessage")
        assert frames and frames[-1].note == "edited and answered by bob"  # the reply differs from the start
        assert await Activity.objects.filter(session=live, action="answered", user=people["bob"]).aexists()

        # A refusal names who refused, on the error frame the client sent.
        response = await bob.post(
            f"/s/{live.public_id}/request", {"method": "tools/call", "params": json.dumps(sampling)}
        )
        assert response.status_code == 200
        second = await waiting_review(live, "sampling/createMessage")
        response = await bob.post(f"/s/{live.public_id}/reviews/{second.pk}/reject")
        assert response.status_code == 200
        refused = await wait_until(
            lambda: TimelineFrame.objects.filter(
                session=live, direction="out", rpc_kind="error", method="sampling/createMessage"
            ).first()
        )
        assert refused.note == "rejected by bob"

        # Disconnecting and reconnecting are attributed too.
        response = await bob.post(f"/s/{live.public_id}/disconnect")
        assert response.status_code < 400
        await wait_until(lambda: McpSession.objects.get(pk=live.pk).status in ("closed", "failed"))
        response = await bob.post(f"/s/{live.public_id}/reconnect")
        assert response.status_code < 400
        actions = [
            a async for a in Activity.objects.filter(session=live).values_list("action", "user__username")
        ]
        assert ("disconnected", "bob") in actions and ("reconnected", "bob") in actions
        await wait_until(lambda: McpSession.objects.get(pk=live.pk).status == "ready")
        await bob.post(f"/s/{live.public_id}/disconnect")
        await alice.disconnect()
        await wait_until(lambda: McpSession.objects.get(pk=live.pk).status in ("closed", "failed"))


async def test_the_activity_tab_lists_who_did_what_newest_last(settings: Any) -> None:
    people, session = await _team()
    client = AsyncClient()
    await client.aforce_login(people["carol"])
    await Activity.objects.acreate(session=session, user=people["alice"], action="connected")
    await Activity.objects.acreate(
        session=session, user=people["bob"], action="sent", detail="tools/<b>list</b>", frame_seq=3
    )
    panel = (await client.get(f"/s/{session.public_id}/panel/activity")).content.decode()
    assert 'id="activity-list"' in panel
    assert panel.index("connected") < panel.index("tools/&lt;b&gt;list&lt;/b&gt;") < panel.index("frame 3")


# --- presence across web processes (PostgreSQL and Redis) ---------------------------------------

REDIS_DB = 10  # test_hosted.py uses 12 to 14

# Run against the hosted database: alice and bob in one team, a session of theirs, both signed in.
HOSTED_WORLD = """
import django
django.setup()
from django.contrib.auth.models import User
from django.test import Client
from sessions.models import McpSession
from sessions.teams.models import Membership, Role, Team
team = Team.objects.create(name="team A")
cookies = []
for name in ("alice", "bob"):
    user = User.objects.create_user(name)
    Membership.objects.create(team=team, user=user, role=Role.OPERATOR)
    client = Client()
    client.force_login(user)
    cookies.append(client.cookies["mcp_inspector_session"].value)
session = McpSession.objects.create(team=team, owner=user, name="watched", config={}, status="closed")
print(session.public_id, *cookies)
"""


async def _watchers_over(socket: Any, wanted: list[str]) -> None:
    """Read the socket's fragments until its "watching now" list is ``wanted``."""
    async for fragment in socket:
        if 'id="presence"' in fragment and _watchers(fragment) == wanted:
            return


@pytest.mark.slow
async def test_presence_spans_web_processes_and_a_dead_processs_tabs_expire(tmp_path: Path) -> None:
    from websockets.asyncio.client import connect as ws_connect

    database = f"mcp_together_{uuid.uuid4().hex[:8]}"
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-q", "-c"]
    subprocess.run([*psql, f"CREATE DATABASE {database}"], check=True, timeout=30, capture_output=True)
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "INSPECTOR_TOKEN")},
        "DB": "postgres",
        "DB_NAME": database,
        "DB_USER": "postgres",
        "DB_HOST": "127.0.0.1",
        "DB_PORT": "5432",
        "REDIS_URL": f"redis://127.0.0.1:6379/{REDIS_DB}",
        "INSPECTOR_DATA_DIR": str(tmp_path),
        "INSPECTOR_EMBEDDED_RUNTIME": "false",
        "INSPECTOR_PRESENCE_HEARTBEAT": "0.3",
        "DJANGO_SETTINGS_MODULE": "inspector.settings",
        "PYTHONPATH": str(REPO),
    }
    try:
        subprocess.run(
            ["redis-cli", "-n", str(REDIS_DB), "flushdb"], check=False, timeout=10, capture_output=True
        )
        manage = [sys.executable, "manage.py", "migrate", "-v", "0"]
        subprocess.run(manage, cwd=REPO, env=env, check=True, timeout=120)
        world = subprocess.run(
            [sys.executable, "-c", HOSTED_WORLD],
            env=env,
            check=True,
            timeout=60,
            capture_output=True,
            text=True,
        )
        public_id, alice_cookie, bob_cookie = world.stdout.split()
        ports = [free_port(), free_port()]
        argv = [str(Path(sys.executable).with_name("mcp-inspector")), "--no-browser", "--port"]
        with (
            start_http_server([*argv, str(ports[0])], ports[0], env=env),
            start_http_server([*argv, str(ports[1])], ports[1], env=env) as second,
        ):

            def socket(port: int, cookie: str) -> Any:
                return ws_connect(
                    f"ws://127.0.0.1:{port}/ws/sessions/{public_id}/",
                    origin=f"http://127.0.0.1:{port}",  # type: ignore[arg-type]
                    additional_headers={"Cookie": f"mcp_inspector_session={cookie}"},
                )

            async with asyncio.timeout(30), socket(ports[0], alice_cookie) as alice:
                await _watchers_over(alice, ["alice"])
                bob = await socket(ports[1], bob_cookie)
                # alice (on the first process) hears bob join on the second, and bob hears alice.
                await _watchers_over(alice, ["alice", "bob"])
                await _watchers_over(bob, ["alice", "bob"])
                # bob's process dies without a word: his tab leaves alice's list within a few beats.
                second.kill()
                second.wait(timeout=10)
                await _watchers_over(alice, ["alice"])
    finally:
        subprocess.run(
            [*psql, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"], timeout=30, capture_output=True
        )
