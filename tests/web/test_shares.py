"""Share links: made by operators from a session's page, opened read-only and redacted by teammates
(a team link) or by anyone (an anyone-link, no account), live while the session runs; revoking or
expiry closes open views at once; exports redacted by default.

alice is the admin of team A and bob an operator there; viola a viewer there; carol has no account.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import secrets
import time
from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import AsyncClient
from django.utils import timezone
from support.teams import ateam_of
from support.web import (
    SHARE_LINK,
    anonymous_communicator,
    finish,
    http_config,
    live_runtime,
    logged_in_client,
    make_share_link,
    make_user,
    receive_until,
    request,
    session_communicator,
    start_session,
    stdio_config,
)

from inspector.auth import RedactQueryStrings, strip_share_tokens
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Membership, Note, Role, Share, ShareOpening, Team, token_digest

pytestmark = pytest.mark.django_db(transaction=True)


# --- helpers ---------------------------------------------------------------------------------


async def _member(name: str, team: Team, role: str) -> User:
    user = await make_user(name)
    await Membership.objects.acreate(team=team, user=user, role=role)
    return user


async def _drain(communicator: WebsocketCommunicator) -> str:
    """Everything the socket sends until it falls quiet."""
    seen = ""
    while not await communicator.receive_nothing(timeout=0.5):
        seen += await communicator.receive_from(timeout=5)
    return seen


async def _closed_within(communicator: WebsocketCommunicator, seconds: float) -> tuple[int, str]:
    """Wait for the socket to close; its close code and what it sent before."""
    sent = ""
    async with asyncio.timeout(seconds):
        while True:
            output = await communicator.receive_output(timeout=seconds)
            if output["type"] == "websocket.close":
                return output.get("code", 1000), sent
            sent += output.get("text", "")


async def _body(response: Any) -> bytes:
    if response.streaming:
        body = b"".join([chunk async for chunk in response.streaming_content])
        finish(response)
        return body
    return bytes(response.content)


def everything(spec: dict, **extra: Any) -> dict[str, Any]:
    return stdio_config(spec["command"], spec["args"], name="everything", **extra)


# --- watching a live session through links, and revoking them ------------------------------------


@pytest.mark.slow
async def test_bob_and_carol_watch_alices_session_live_and_revoking_closes_their_sockets_at_once(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user("alice")
        team = await ateam_of(alice)
        bob = await _member("bob", team, Role.OPERATOR)
        session = await start_session(alice, everything(everything_stdio))
        owner = await logged_in_client(alice)
        team_token = await make_share_link(owner, session, label="for bob")
        anyone_token = await make_share_link(owner, session, audience="anyone", label="for carol")
        assert not await Share.objects.filter(digest__in=[team_token, anyone_token]).aexists()

        # bob opens the team link signed in; carol opens the anyone-link with no account at all.
        bob_client, carol_client = await logged_in_client(bob), AsyncClient()
        assert (await bob_client.get(f"/shared/{team_token}/")).status_code == 200
        assert (await carol_client.get(f"/shared/{anyone_token}/")).status_code == 200
        assert (await carol_client.get(f"/shared/{team_token}/")).status_code == 302  # log in first
        openings = [o async for o in ShareOpening.objects.order_by("at").values("user_id", "address")]
        assert openings[0]["user_id"] == bob.pk and openings[1]["user_id"] is None
        assert openings[1]["address"]  # carol is known by where she came from

        bob_socket = await session_communicator(bob, f"/ws/shared/{team_token}/")
        carol_socket = anonymous_communicator(f"/ws/shared/{anyone_token}/")
        assert (await bob_socket.connect(timeout=10))[0] and (await carol_socket.connect(timeout=10))[0]
        await _drain(bob_socket)
        await _drain(carol_socket)

        answer = await request(
            session, "tools/call", {"name": "echo", "arguments": {"message": "see-it-live"}}
        )
        seq = answer["response_seq"]
        for socket in (bob_socket, carol_socket):
            seen = await receive_until(socket, f'id="f-{seq}"')
            seen += await _drain(socket)
            assert "see-it-live" in seen and "hx-post" not in seen
            shown = re.findall(r'id="f-(\d+)"', seen)
            assert len(shown) == len(set(shown)), "each new frame is shown once"

        # Revoking each link closes its viewer's socket within a second, saying why.
        for token, socket in ((team_token, bob_socket), (anyone_token, carol_socket)):
            share = await Share.objects.aget(digest=token_digest(token))
            started = time.monotonic()
            response = await owner.post(f"/s/{session.public_id}/shares/{share.pk}/revoke")
            assert response.status_code == 200
            code, sent = await _closed_within(socket, 1.0)
            assert code == 4410 and "revoked" in sent and time.monotonic() - started < 1.0
        gone = await bob_client.get(f"/shared/{team_token}/")
        assert gone.status_code == 410 and "revoked" in gone.content.decode()
        assert (await carol_client.get(f"/shared/{anyone_token}/frames/1")).status_code == 410
        assert (await carol_client.get(f"/shared/{anyone_token}/export")).status_code == 410
        assert not (await anonymous_communicator(f"/ws/shared/{anyone_token}/").connect(timeout=10))[0]


@pytest.mark.slow
async def test_a_viewer_opens_a_team_link_but_cannot_act_by_post_or_by_socket(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user("alice")
        team = await ateam_of(alice)
        viola = await _member("viola", team, Role.VIEWER)
        session = await start_session(alice, everything(everything_stdio))
        token = await make_share_link(await logged_in_client(alice), session)
        share = await Share.objects.aget(digest=token_digest(token))
        client = await logged_in_client(viola)

        assert (await client.get(f"/shared/{token}/")).status_code == 200
        assert (await client.get(f"/s/{session.public_id}/shares")).status_code == 200  # she may read
        for path in ("shares/new", "shares/preview", f"shares/{share.pk}/revoke", "request", "tools/call"):
            data = {
                "method": "tools/call",
                "params": "{}",
                "scope": "all",
                "expiry": "7d",
                "audience": "team",
            }
            response = await client.post(f"/s/{session.public_id}/{path}", data)
            assert response.status_code == 403, path
        for path in ("", "frames/1", "export"):
            assert (await client.post(f"/shared/{token}/{path}", {})).status_code == 405, path
        # She exports redacted; the recording as it is needs an operator.
        assert (await client.get(f"/s/{session.public_id}/export.html?redacted=0")).status_code == 403
        assert (await client.get(f"/s/{session.public_id}/collection.json")).status_code == 200
        assert await Share.objects.acount() == 1 and (await Share.objects.aget()).revoked is None

        # A command on either socket does nothing: after it, a view change is answered, and no
        # request reached the server.
        calls = await TimelineFrame.objects.filter(session=session, method="tools/call").acount()
        command = {
            "action": "request",
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "from-viola"}},
        }
        for path in (f"/ws/shared/{token}/", f"/ws/sessions/{session.public_id}/"):
            socket = await session_communicator(viola, path)
            assert (await socket.connect(timeout=10))[0]
            await _drain(socket)
            for action in ("request", "send", "answer", "cancel", "disconnect"):
                await socket.send_json_to({**command, "action": action})
            await socket.send_json_to({"action": "live"})
            assert 'id="timeline-rows"' in await receive_until(socket, 'id="timeline-rows"')
            await socket.disconnect()
        assert await TimelineFrame.objects.filter(session=session, method="tools/call").acount() == calls
        assert not await TimelineFrame.objects.filter(session=session, raw__contains=b"from-viola").aexists()


# --- the key redaction proof ---------------------------------------------------------------------


async def _everything_shared_shows(
    owner: AsyncClient, session: McpSession, token: str, secrets_: list[bytes]
) -> dict[str, bytes]:
    """Every page, fragment, frame and export of the share, and the session's redacted exports."""
    visitor = AsyncClient()  # anyone with the link
    shown: dict[str, bytes] = {}
    base = f"/shared/{token}/"
    for path in (
        "",
        "?tab=conformance",
        "panel/overview",
        "panel/conformance",
        "timeline",
        "timeline?before=9999",
    ):
        response = await visitor.get(base + path)
        assert response.status_code == 200, path
        shown[base + path] = await _body(response)
    last = (await McpSession.objects.aget(pk=session.pk)).last_seq
    for seq in range(1, last + 1):
        response = await visitor.get(f"{base}frames/{seq}")
        assert response.status_code == 200, seq
        shown[f"frame {seq}"] = await _body(response)
    for path in ("export", "export.html", "collection.json"):
        response = await visitor.get(base + path)
        assert response.status_code == 200, path
        shown[base + path] = await _body(response)
        response = await owner.get(f"/s/{session.public_id}/{path}")
        assert response.status_code == 200, path
        shown[f"session {path}"] = await _body(response)
    preview = await owner.post(
        f"/s/{session.public_id}/shares/preview", {"scope": "all", "expiry": "7d", "audience": "team"}
    )
    assert preview.status_code == 200
    shown["preview"] = await _body(preview)
    socket = anonymous_communicator(f"/ws/shared/{token}/?after=0&first=0")
    assert (await socket.connect(timeout=10))[0]
    shown["socket, catching up"] = (await _drain(socket)).encode()
    # And live: the same call again while the visitor watches.
    answer = await request(session, "tools/call", {"name": "get-env", "arguments": {}}, wait=15)
    shown["socket, live"] = (await receive_until(socket, f'id="f-{answer["response_seq"]}"')).encode()
    await socket.disconnect()
    return shown


def _leaks(shown: dict[str, bytes], secrets_: list[bytes]) -> list[str]:
    return [
        f"{where} shows {secret.decode()}"
        for where, body in shown.items()
        for secret in secrets_
        if secret in body
    ]


@pytest.mark.slow
async def test_no_shared_view_and_no_redacted_export_holds_a_stdio_servers_secret_after_get_env(
    everything_stdio: dict,
) -> None:
    api_key = f"key-{secrets.token_hex(12)}"
    async with live_runtime():
        alice = await make_user("alice")
        owner = await logged_in_client(alice)
        session = await start_session(alice, everything(everything_stdio, env={"API_KEY": api_key}))
        answer = await request(session, "tools/call", {"name": "get-env", "arguments": {}}, wait=15)
        assert api_key in json.dumps(answer["result"])  # the server sent it back: there is something to hide
        token = await make_share_link(owner, session, audience="anyone")
        shown = await _everything_shared_shows(owner, session, token, [api_key.encode()])
        assert not _leaks(shown, [api_key.encode()]), _leaks(shown, [api_key.encode()])
        assert b"[redacted]" in shown[f"frame {answer['response_seq']}"]
        page = shown[f"/shared/{token}/"].decode()
        assert "hx-post" not in page and 'method="post"' not in page.lower() and "/s/" not in page
        assert 'ws-connect="/ws/shared/' in page and "/ws/sessions/" not in page
        # The raw export, for operators, still has everything: the recording is never changed.
        raw = await _body(await owner.get(f"/s/{session.public_id}/export?redacted=0"))
        assert api_key.encode() in raw

        # A redacted JSON Lines export still opens as a session.
        redacted = shown["session export"]
        upload = io.BytesIO(redacted)
        upload.name = "redacted.jsonl"
        response = await owner.post("/recordings/open", {"recording": upload})
        assert response.status_code == 302, response.content.decode()[:500]
        opened = await McpSession.objects.exclude(pk=session.pk).aget()
        lines = redacted.decode().splitlines()
        assert await TimelineFrame.objects.filter(session=opened).acount() == len(lines)
        assert not await TimelineFrame.objects.filter(
            session=opened, raw__contains=api_key.encode()
        ).aexists()


@pytest.mark.slow
async def test_no_shared_view_and_no_redacted_export_holds_the_api_key_of_an_http_servers_url(
    everything_http: str,
) -> None:
    api_key = f"url-{secrets.token_hex(12)}"
    url = f"{everything_http}?api_key={api_key}"
    async with live_runtime():
        alice = await make_user("alice")
        owner = await logged_in_client(alice)
        session = await start_session(alice, http_config(url, name=url))
        await request(session, "tools/call", {"name": "get-env", "arguments": {}}, wait=15)
        assert await TimelineFrame.objects.filter(session=session, kind="http").aexists()
        page = (await owner.get(f"/s/{session.public_id}/")).content
        assert api_key.encode() in page  # the session's own page shows its name, the URL, as it is
        token = await make_share_link(owner, session, audience="anyone")
        shown = await _everything_shared_shows(owner, session, token, [api_key.encode()])
        assert not _leaks(shown, [api_key.encode()]), _leaks(shown, [api_key.encode()])
        assert b"api_key=[redacted]" in shown[f"/shared/{token}/"]


# --- expiry, making links, logs ----------------------------------------------------------------


async def _closed_session(user: User) -> McpSession:
    session = await McpSession.objects.acreate(
        owner=user, team=await ateam_of(user), name="closed", config={}, status="closed", last_seq=1
    )
    await TimelineFrame.objects.acreate(
        session=session, seq=1, kind="state", direction="local", wall=0, mono=0
    )
    return session


async def test_an_expired_link_is_refused_and_an_open_view_closes_when_its_link_expires() -> None:
    alice = await make_user("alice")
    session = await _closed_session(alice)
    expired, ending = "expired-token-" + "x" * 20, "ending-token-" + "y" * 20
    await Share.objects.acreate(
        session=session,
        digest=token_digest(expired),
        audience="anyone",
        expires=timezone.now() - timedelta(minutes=1),
    )
    await Share.objects.acreate(
        session=session,
        digest=token_digest(ending),
        audience="anyone",
        expires=timezone.now() + timedelta(seconds=1),
    )
    visitor = AsyncClient()
    for path in ("", "frames/1", "panel/overview", "export", "export.html", "collection.json"):
        response = await visitor.get(f"/shared/{expired}/{path}")
        assert response.status_code == 410, path
    assert "expired" in (await visitor.get(f"/shared/{expired}/")).content.decode()
    assert await anonymous_communicator(f"/ws/shared/{expired}/").connect(timeout=10) == (False, 4410)
    assert (await visitor.get("/shared/no-such-token/")).status_code == 404

    socket = anonymous_communicator(f"/ws/shared/{ending}/")
    assert (await socket.connect(timeout=10))[0]
    code, sent = await _closed_within(socket, 5.0)
    assert code == 4410 and "expired" in sent


async def test_making_a_link_checks_the_form_and_keeps_only_the_tokens_digest() -> None:
    alice = await make_user("alice")
    session = await _closed_session(alice)
    client = await logged_in_client(alice)
    bad = {"scope": "all", "expiry": "7d", "audience": "team", "patterns": "(unclosed"}
    response = await client.post(f"/s/{session.public_id}/shares/new", bad)
    assert response.status_code == 422 and "not a regular expression" in response.content.decode()
    ranged = {"scope": "range", "first_seq": "9", "last_seq": "2", "expiry": "1h", "audience": "team"}
    assert (await client.post(f"/s/{session.public_id}/shares/new", ranged)).status_code == 422
    team = await ateam_of(alice)
    team.allow_public_shares = False
    await team.asave()
    anyone = {"scope": "all", "expiry": "never", "audience": "anyone"}
    response = await client.post(f"/s/{session.public_id}/shares/new", anyone)
    assert response.status_code == 422 and "team members only" in response.content.decode()
    assert not await Share.objects.aexists()

    token = await make_share_link(
        client, session, scope="range", first_seq="1", last_seq="1", expiry="1d", names="customer"
    )
    share = await Share.objects.aget()
    assert share.digest == token_digest(token) and token not in json.dumps(
        [share.label, share.filter, share.rules, share.digest]
    )
    assert (share.first_seq, share.last_seq, share.rules["names"]) == (1, 1, ["customer"])
    assert timedelta(hours=23) < share.expires - timezone.now() <= timedelta(days=1)
    listing = (await client.get(f"/s/{session.public_id}/shares")).content.decode()
    assert token not in listing and "Revoke" in listing  # shown once, at making, never again
    # The session page offers sharing; a frame outside the link's range is not in its view.
    assert f"/s/{session.public_id}/shares" in (await client.get(f"/s/{session.public_id}/")).content.decode()
    assert (await AsyncClient().get(f"/shared/{token}/frames/2")).status_code in (302, 404)


def test_share_tokens_never_reach_the_logs() -> None:
    token = secrets.token_urlsafe(32)
    line = f'"GET /shared/{token}/frames/3 HTTP/1.1" 200 and WSCONNECT /ws/shared/{token}/?after=2'
    assert token not in strip_share_tokens(line) and "/shared/[redacted]/frames/3" in strip_share_tokens(line)
    record = logging.LogRecord("django.server", logging.INFO, __file__, 1, "%s", (line,), None)
    RedactQueryStrings().filter(record)
    assert token not in record.getMessage()


async def test_every_opening_of_the_page_is_logged_with_its_user_agent() -> None:
    alice = await make_user("alice")
    session = await _closed_session(alice)
    token = "opened-token-" + "z" * 20
    await Share.objects.acreate(session=session, digest=token_digest(token), audience="anyone")
    visitor = AsyncClient()
    for _ in range(2):
        response = await visitor.get(f"/shared/{token}/", headers={"user-agent": "carol's browser"})
        assert response.status_code == 200
    assert await ShareOpening.objects.filter(user_agent="carol's browser", user=None).acount() == 2
    # The fragments a page loads are not openings of their own.
    assert (await visitor.get(f"/shared/{token}/frames/1")).status_code == 200
    assert await ShareOpening.objects.acount() == 2


async def test_the_teams_notes_show_in_a_shared_frame_read_only_and_redacted() -> None:
    alice = await make_user("alice")
    session = await _closed_session(alice)
    await Note.objects.acreate(
        session=session, frame_seq=1, author=alice, text="retry with api_key=abc123secret"
    )
    token = "noted-token-" + "n" * 20
    await Share.objects.acreate(session=session, digest=token_digest(token), audience="anyone")
    detail = (await AsyncClient().get(f"/shared/{token}/frames/1")).content.decode()
    assert "retry with api_key=[redacted]" in detail and "abc123secret" not in detail
    assert "hx-post" not in detail and "/s/" not in detail
    assert (await Note.objects.aget()).text.endswith("abc123secret")  # the note itself is unchanged


async def test_after_a_link_is_made_the_form_keeps_its_audience_and_expiry() -> None:
    alice = await make_user("alice")
    session = await _closed_session(alice)
    client = await logged_in_client(alice)
    anyone = {"scope": "all", "expiry": "1d", "audience": "anyone"}
    page = (await client.post(f"/s/{session.public_id}/shares/new", anyone)).content.decode()
    assert SHARE_LINK.search(page)
    assert '<option value="anyone" selected>' in page and '<option value="1d" selected>' in page
    assert '<option value="7d" selected>' not in page
    fresh = (await client.get(f"/s/{session.public_id}/shares")).content.decode()
    assert '<option value="7d" selected>' in fresh and '<option value="anyone" selected>' not in fresh
