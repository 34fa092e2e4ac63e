"""The tools panel against server-everything: listing, search, schema forms, calls and their results."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from support.paths import SERVERS
from support.teams import ateam_of
from support.web import (
    live_runtime,
    logged_in_client,
    make_user,
    receive_card,
    receive_until,
    session_communicator,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Membership, Role
from sessions.timeline.listings import latest_result

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


async def listed_session(spec: dict[str, Any]) -> tuple[McpSession, Any, str]:
    """Start a session, press "List tools", and wait until the listing is stored."""
    alice = await make_user()
    session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
    client = await logged_in_client(alice)
    base = f"/s/{session.public_id}/"
    response = await client.post(base + "tools/list", {"page": "first"})
    assert response.status_code == 200
    html = response.content.decode()
    for name in ("echo", "get-sum", "get-structured-content"):
        assert f"<code>{name}</code>" in html
    await wait_until(lambda: latest_result(session, "tools/list"), what="stored tools/list")
    return session, client, base


async def call(client: Any, base: str, name: str, **fields: str) -> tuple[int, str]:
    response = await client.post(base + "tools/call", {"name": name, "mode": "form", **fields})
    return response.status_code, response.content.decode()


async def test_the_panel_asks_for_a_listing_and_never_lists_on_get(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(
            alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
        )
        client = await logged_in_client(alice)
        response = await client.get(f"/s/{session.public_id}/panel/tools")
        assert response.status_code == 200
        assert "List tools</button>" in response.content.decode()
        assert not await TimelineFrame.objects.filter(session=session, method="tools/list").aexists()


async def test_listing_searching_and_opening_a_tools_form(everything_stdio: dict) -> None:
    async with live_runtime():
        session, client, base = await listed_session(everything_stdio)

        panel = (await client.get(base + "panel/tools", {"q": "sum"})).content.decode()
        assert "<code>get-sum</code>" in panel and "<code>echo</code>" not in panel
        assert "hints from the server (untrusted)" in panel
        by_description = (await client.get(base + "panel/tools", {"q": "OUTPUT SCHEMA"})).content.decode()
        assert "<code>get-structured-content</code>" in by_description

        form = (await client.get(base + "tools/form", {"name": "get-structured-content"})).content.decode()
        assert 'name="arg.location"' in form and "<select" in form
        assert '<option value="Chicago">Chicago</option>' in form
        assert "outputSchema" in form
        form = (await client.get(base + "tools/form", {"name": "get-annotated-message"})).content.decode()
        assert 'name="arg.includeImage"' in form and '<option value="false" selected>false</option>' in form
        assert (await client.get(base + "tools/form", {"name": "no-such-tool"})).status_code == 404


async def test_calls_through_the_form_render_each_kind_of_result(everything_stdio: dict) -> None:
    async with live_runtime():
        session, client, base = await listed_session(everything_stdio)

        status, html = await call(client, base, "echo", **{"arg.message": "two\r\nlines"})
        assert status == 200 and "Echo: two\nlines" in html

        status, html = await call(client, base, "get-sum", **{"arg.a": "2", "arg.b": "3.5"})
        assert status == 200 and "5.5" in html

        # The card answers before the recorder has stored the frames (stored=False): wait for them.
        def sent_sum() -> TimelineFrame | None:
            last = TimelineFrame.objects.filter(session=session, method="tools/call", direction="out").last()
            return last if last is not None and b'"get-sum"' in bytes(last.raw) else None

        sent = await wait_until(sent_sum, what="the get-sum request stored")
        assert '"arguments":{"a":2,"b":3.5}' in bytes(sent.raw).decode()

        status, html = await call(client, base, "get-tiny-image")
        assert status == 200 and '<img src="data:image/png;base64,' in html

        status, html = await call(client, base, "get-resource-links", **{"arg.count": "2"})
        assert status == 200 and 'aria-label="Read ' in html and ">Read</button>" in html

        status, html = await call(client, base, "get-structured-content", **{"arg.location": "Chicago"})
        assert status == 200 and "matches outputSchema" in html, html


async def test_form_errors_raw_json_and_escaping(everything_stdio: dict) -> None:
    async with live_runtime():
        session, client, base = await listed_session(everything_stdio)

        status, html = await call(client, base, "get-sum", **{"arg.a": "2", "arg.b": ""})
        assert status == 422 and "required" in html and 'name="arg.a"' in html and 'value="2"' in html
        status, html = await call(client, base, "get-sum", **{"arg.a": "two", "arg.b": "1"})
        assert status == 422 and "&#x27;two&#x27; is not a number" in html

        response = await client.post(
            base + "tools/call",
            {"name": "get-sum", "mode": "raw", "raw": '{"a": 40, "b": 2}', "arg.a": "", "arg.b": ""},
        )
        assert response.status_code == 200 and "42" in response.content.decode()
        response = await client.post(base + "tools/call", {"name": "get-sum", "mode": "raw", "raw": "[1"})
        assert response.status_code == 422 and "not valid JSON" in response.content.decode()

        status, html = await call(client, base, "echo", **{"arg.message": "<script>alert(1)</script>"})
        assert (
            status == 200 and "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
        )


def form(name: str, **fields: str) -> str:
    """A call form as the page's live socket sends it (htmx's ws-send: the fields, and its headers)."""
    headers = {"HX-Request": "true", "HX-Trigger": None, "HX-Current-URL": "http://127.0.0.1/"}
    return json.dumps({"action": "call", "name": name, "mode": "form", **fields, "HEADERS": headers})


async def test_a_call_form_sent_over_the_live_socket_is_answered_on_it(everything_stdio: dict) -> None:
    """The Tools form goes over the page's socket while it is open: the card comes back on it, out
    of band at the top of the Requests list (or the Apps tab's stage), and the form with its errors."""
    async with live_runtime():
        session, _, _ = await listed_session(everything_stdio)
        alice = await make_user()
        socket = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
        connected, _ = await socket.connect()
        assert connected
        try:
            await socket.send_to(text_data=form("echo", **{"arg.message": "over <the> socket"}))
            card = await receive_card(socket, "Echo: over &lt;the&gt; socket")
            assert "<the>" not in card and "tools/call" in card

            await socket.send_to(text_data=form("get-sum", **{"arg.a": "2", "arg.b": ""}))
            seen = await receive_until(socket, "field-error")
            assert '<section id="tool-form"' in seen and 'hx-swap-oob="true"' in seen and 'value="2"' in seen

            raw = form("get-sum", mode="raw", raw='{"a": 40, "b": 2}', **{"in": "apps"})
            await socket.send_to(text_data=raw)
            seen = await receive_until(socket, '<div hx-swap-oob="afterbegin:#app-stage"><article id="call-')
            assert "42" in seen[seen.rindex("#app-stage") :]

            await socket.send_to(text_data=form("no-such-tool"))
            seen = await receive_until(socket, "No such tool in the newest listing")
            assert 'role="alert"' in seen
            # What no form sends (a list for the name, an object for a field) is a form like any other.
            odd = json.dumps({"action": "call", "name": ["x", "echo"], "arg.message": {"deep": [1]}})
            await socket.send_to(text_data=odd)
            seen = await receive_until(socket, "Echo: {&#x27;deep&#x27;: [1]}")
        finally:
            await socket.disconnect()


async def test_a_viewer_cannot_call_a_tool_over_the_live_socket(everything_stdio: dict) -> None:
    async with live_runtime():
        session, _, _ = await listed_session(everything_stdio)
        bob = await make_user("bob")
        await Membership.objects.acreate(team=await ateam_of(await make_user()), user=bob, role=Role.VIEWER)
        socket = await session_communicator(bob, f"/ws/sessions/{session.public_id}/")
        connected, _ = await socket.connect()
        assert connected  # a viewer watches the session
        try:
            await socket.send_to(text_data=form("echo", **{"arg.message": "from a viewer"}))
            seen = await receive_until(socket, "this needs operator")
            assert "Your role in this team is viewer" in seen
        finally:
            await socket.disconnect()
        sent = TimelineFrame.objects.filter(session=session, method="tools/call", direction="out")
        assert not await sent.aexists()


async def test_the_call_card_shows_the_engines_output_schema_verdicts() -> None:
    server = [sys.executable, str(SERVERS / "bad_shapes.py"), "outputs"]
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, stdio_config(server[0], server[1:]))
        client = await logged_in_client(alice)
        base = f"/s/{session.public_id}/"
        assert (await client.post(base + "tools/list", {"page": "first"})).status_code == 200
        await wait_until(lambda: latest_result(session, "tools/list"), what="stored tools/list")

        cards = {}
        for shape in ("right", "wrong", "missing"):
            raw = json.dumps({"shape": shape})
            response = await client.post(base + "tools/call", {"name": "add", "mode": "raw", "raw": raw})
            assert response.status_code == 200
            cards[shape] = response.content.decode()

        def three_results() -> list[TimelineFrame] | None:
            found = list(TimelineFrame.objects.filter(session=session, method="tools/call", direction="in"))
            return found if len(found) == 3 else None

        # The cards come back before the recorder has stored the frames: wait for all three.
        results = await wait_until(three_results, what="the three results stored")
    assert "matches outputSchema" in cards["right"]
    assert (
        "does not match the tool&#x27;s outputSchema at result: &#x27;five&#x27; is not of type"
        in cards["wrong"]
    )
    assert "declares an outputSchema but the result has no structuredContent" in cards["missing"]
    # The same verdicts are stored with the frames, where the Conformance tab counts them.
    assert [[v["code"] for v in frame.verdicts] for frame in results] == [
        [],
        ["output-schema"],
        ["structured-content"],
    ]


async def test_a_huge_tool_result_shows_its_head_and_size_and_downloads_whole(bad_stdio: Any) -> None:
    """A 3 MB answer is not rendered into its card (a 100 MB one made the page 104 MB on every reload):
    the card shows its first 64 KiB, its size and a download of the whole frame, live and after."""
    size = 3 * 1024 * 1024
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("big")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        client = await logged_in_client(alice)
        base = f"/s/{session.public_id}/"
        card = await client.post(
            base + "request",
            {"method": "tools/call", "params": json.dumps({"name": "t", "arguments": {"size": size}})},
        )
        assert card.status_code == 200
        html = card.content.decode()
        assert len(html) < 200_000 and "too big to show here" in html and "3.0\xa0MB" in html, html[:2000]

        def stored() -> TimelineFrame | None:
            return TimelineFrame.objects.filter(session=session, direction="in", size__gt=size).first()

        frame = await wait_until(stored, what="the big answer stored")
        page = (await client.get(base)).content.decode()
        assert len(page) < 1_000_000 and "too big to show here" in page
        download = await client.get(f"{base}frames/{frame.seq}/raw")
        assert download.status_code == 200 and "attachment" in download["Content-Disposition"]
        assert len(download.content) == frame.size and download.content.count(b"x") >= size


@asynccontextmanager
async def ended_session_socket() -> AsyncIterator[Any]:
    """Alice's live socket on an ended session of hers (no server: what answers a form is the test's)."""
    alice = await make_user()
    session = await McpSession.objects.acreate(
        owner=alice, team=await ateam_of(alice), name="ended", config={}, status="closed"
    )
    socket = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
    assert (await socket.connect())[0]
    try:
        yield socket
    finally:
        await socket.disconnect()


async def test_a_form_whose_answer_fails_says_so_and_the_socket_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sessions.web import consumers

    async def broken(user_id: int, public_id: Any, message: dict[str, Any]) -> str:
        raise RuntimeError("a bug")

    monkeypatch.setitem(consumers.SENT_FORMS, "call", broken)
    async with ended_session_socket() as socket:
        await socket.send_to(text_data=form("echo"))
        await receive_until(socket, "The inspector failed to send this (its log says why).")
        for panel in ("tools", "logging"):  # still answering: a move to the log redraws it
            await socket.send_to(text_data=json.dumps({"action": "panel", "name": panel}))
        await receive_until(socket, 'id="log-lines"')


async def test_a_tab_with_too_many_forms_waiting_is_told_so_and_nothing_more_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sessions.web import consumers

    started: list[str] = []
    release = asyncio.Event()

    async def held(user_id: int, public_id: Any, message: dict[str, Any]) -> str:
        started.append(message["name"])
        await release.wait()
        return f"<p>answered {message['name']}</p>"

    monkeypatch.setitem(consumers.SENT_FORMS, "call", held)
    monkeypatch.setattr(consumers, "SENT_AT_ONCE", 3)
    async with ended_session_socket() as socket:
        for n in range(4):
            await socket.send_to(text_data=form(f"t{n}"))
        await receive_until(socket, "Not sent: 3 requests from this tab are still waiting for their answers.")
        assert started == ["t0", "t1", "t2"]
        release.set()
        seen = await receive_until(socket, "answered t2")
        assert "answered t3" not in seen
