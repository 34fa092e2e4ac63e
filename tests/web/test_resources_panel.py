"""The resources, prompts and logging panels: lists, reads, templates, completions, subscriptions, logs."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import pytest
from support.teams import ateam_of
from support.web import (
    live_runtime,
    logged_in_client,
    make_user,
    receive_card,
    receive_until,
    request,
    session_communicator,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.models import McpSession, TimelineFrame
from sessions.web import live
from sessions.web.resources import marker_id
from sessions.web.uri_templates import expand_uri_template, template_variables

ARCHITECTURE = "demo://resource/static/document/architecture.md"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


def everything(spec: dict[str, Any]) -> dict[str, Any]:
    return stdio_config(spec["command"], spec["args"])


def url(session: McpSession, tail: str) -> str:
    return f"/s/{session.public_id}/{tail}"


# --- URI templates (RFC 6570 examples) -----------------------------------------------------------

VALUES = {"var": "value", "hello": "Hello World!", "path": "/foo/bar", "empty": "", "x": "1024", "y": "768"}


@pytest.mark.parametrize(
    ("template", "expanded"),
    [
        ("{var}", "value"),
        ("{hello}", "Hello%20World%21"),
        ("{+hello}", "Hello%20World!"),
        ("{+path}/here", "/foo/bar/here"),
        ("{#hello}", "#Hello%20World!"),
        ("map?{x,y}", "map?1024,768"),
        ("X{.x,y}", "X.1024.768"),
        ("{/var,x}/here", "/value/1024/here"),
        ("{;x,y,empty}", ";x=1024;y=768;empty"),
        ("{?x,y,empty}", "?x=1024&y=768&empty="),
        ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
        ("{var:3}", "val"),
        ("{?undef}", ""),
        ("{+undef}x", "x"),
        ("{+half}", "50%25%41"),
    ],
)
def test_uri_templates_expand_as_rfc_6570_says(template: str, expanded: str) -> None:
    assert expand_uri_template(template, {**VALUES, "half": "50%%41"}) == expanded


def test_template_variables_are_listed_once_in_order_with_modifiers_stripped() -> None:
    assert template_variables("{/a}{?b,c*}{&a}{d:3}/x/{+e}") == ["a", "b", "c", "d", "e"]
    assert template_variables("demo://plain") == []


# --- live fragments ------------------------------------------------------------------------------


def row(seq: int, method: str, message: dict[str, Any] | str) -> dict[str, Any]:
    raw = message if isinstance(message, str) else json.dumps(message)
    return {
        "seq": seq,
        "kind": "message",
        "direction": "in",
        "method": method,
        "rpc_id": "",
        "rpc_kind": "notification",
        "wall": 1_700_000_000.0 + seq,
        "preview": raw[:300],
        "verdicts": [],
    }


def test_live_fragments_mark_updated_resources_and_append_log_lines_escaped() -> None:
    uri = "demo://x/<b>"
    long_data = "<script>alert(1)</script>" + "x" * 400
    rows = [
        row(
            1,
            "notifications/resources/updated",
            {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}},
        ),
        row(
            2,
            "notifications/message",
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "warning", "logger": "db", "data": "<i>slow</i>"},
            },
        ),
        row(
            3,
            "notifications/message",
            {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"level": "error", "data": long_data},
            },
        ),
        row(4, "tools/list", {"jsonrpc": "2.0", "id": 1, "result": {}}),
    ]
    updated, logs = live.fragments(McpSession(), rows)
    assert f'id="{marker_id(uri)}"' in updated and 'hx-swap-oob="true"' in updated
    assert "updated " in updated and "demo://x/&lt;b&gt;" in updated and "<b>" not in updated
    assert 'hx-swap-oob="beforeend:#log-lines"' in logs
    assert logs.count('class="log-line lvl-') == 2
    assert "lvl-3" in logs and "db" in logs and "&lt;i&gt;slow&lt;/i&gt;" in logs
    # the cut-short preview still gives the level and the start of the data
    assert "lvl-4" in logs and "&lt;script&gt;alert(1)" in logs and "<script>" not in logs


def _log_row(seq: int) -> dict[str, Any]:
    params = {"level": "info", "data": f"line {seq}"}
    return row(
        seq, "notifications/message", {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    )


def test_log_lines_go_only_to_a_tab_showing_the_logging_panel_and_a_flood_sends_the_newest() -> None:
    from sessions.web.logs import LOG_LINES

    update = row(
        1,
        "notifications/resources/updated",
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "demo://x"}},
    )
    rows = [update] + [_log_row(seq) for seq in range(2, 2 + LOG_LINES + 50)]
    # A tab on another panel: no log lines rendered, the timeline's markers still are.
    (markers,) = live.fragments(McpSession(), rows, "tools")
    assert "log-line" not in markers and marker_id("demo://x") in markers
    # A tab showing the log, or one that has not said what it shows: the newest LOG_LINES lines.
    for panel in ("logging", None):
        _, logs = live.fragments(McpSession(), rows, panel)
        assert logs.count('class="log-line') == LOG_LINES
        assert f"line {LOG_LINES + 51}<" in logs and "line 51<" not in logs and "line 52<" in logs


def test_live_fragments_ignore_other_rows() -> None:
    assert (
        live.fragments(McpSession(), [row(1, "tools/list", {"jsonrpc": "2.0", "id": 1, "result": {}})]) == []
    )


# --- server data is escaped in the panels --------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_panels_escape_what_servers_send() -> None:
    alice = await make_user()
    session = await McpSession.objects.acreate(
        owner=alice,
        team=await ateam_of(alice),
        name="stored",
        config={},
        status="closed",
        server_capabilities={"resources": {"subscribe": True}, "prompts": {}, "completions": {}},
    )
    evil = '<img src=x onerror="alert(1)">'
    results = {
        "resources/list": {"resources": [{"uri": f"demo://{evil}", "name": evil, "description": evil}]},
        "resources/templates/list": {"resourceTemplates": [{"uriTemplate": "demo://{id}", "name": evil}]},
        "prompts/list": {"prompts": [{"name": evil, "arguments": [{"name": "a", "description": evil}]}]},
    }
    for seq, (method, result) in enumerate(results.items(), start=1):
        raw = json.dumps({"jsonrpc": "2.0", "id": seq, "result": result}).encode()
        await TimelineFrame.objects.acreate(
            session=session,
            seq=seq,
            kind="message",
            direction="in",
            wall=time.time(),
            mono=0.0,
            method=method,
            rpc_id=str(seq),
            rpc_kind="result",
            raw=raw,
        )
    client = await logged_in_client(alice)
    for tab in ("resources", "prompts"):
        page = (await client.get(url(session, f"panel/{tab}"))).content.decode()
        assert "<img" not in page and "&lt;img src=x" in page


# --- against server-everything -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_resources_list_and_read_text_and_binary_with_a_download(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        empty = (await client.get(url(session, "panel/resources"))).content.decode()
        assert "Not listed yet." in empty
        listed = await client.post(url(session, "list/resources"))
        assert listed.status_code == 200
        assert ARCHITECTURE in listed.content.decode()
        assert ARCHITECTURE in (await client.get(url(session, "panel/resources"))).content.decode()

        text = await client.post(
            url(session, "request"), {"method": "resources/read", "params": json.dumps({"uri": ARCHITECTURE})}
        )
        assert "Everything Server – Architecture" in text.content.decode()

        blob_uri = "demo://resource/dynamic/blob/1"
        card = await client.post(
            url(session, "request"), {"method": "resources/read", "params": json.dumps({"uri": blob_uri})}
        )
        html = card.content.decode()
        size = int(re.search(r"\((\d+) bytes\)", html).group(1))  # type: ignore[union-attr]
        assert size > 20 and "binary" in html
        link = re.search(rf'href="(/s/{session.public_id}/calls/\d+/contents/0)"', html)
        assert link is not None
        download = await client.get(link.group(1))
        assert download.status_code == 200
        assert download["Content-Type"] == "application/octet-stream"
        assert download["X-Content-Type-Options"] == "nosniff"
        assert download["Content-Disposition"].startswith("attachment")
        assert (
            download.content.startswith(b"Resource 1: This is a base64 blob")
            and len(download.content) == size
        )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_download_asked_for_before_its_answer_is_stored_waits_for_it(
    everything_stdio: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call card is drawn from the owner's answer, not the database: the download it links to, asked
    for at once, waits for the recorder to store the answer rather than saying 404."""
    from sessions.runtime import recorder
    from sessions.runtime.owner import SessionOwner

    stalled, released, flushing = asyncio.Event(), asyncio.Event(), asyncio.Event()
    store, flush = recorder.store_frames, SessionOwner.on_flush

    async def slow_store(pk: int, rows: list[dict[str, Any]], *args: Any) -> None:
        if any(r["method"] == "resources/read" and r["rpc_kind"] == "result" for r in rows):
            stalled.set()
            await released.wait()
        await store(pk, rows, *args)

    async def on_flush(owner: SessionOwner, command: Any) -> None:
        flushing.set()
        await flush(owner, command)

    monkeypatch.setattr(recorder, "store_frames", slow_store)
    monkeypatch.setattr(SessionOwner, "on_flush", on_flush)
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        params = json.dumps({"uri": "demo://resource/dynamic/blob/2"})
        card = await client.post(url(session, "request"), {"method": "resources/read", "params": params})
        link = re.search(rf'href="(/s/{session.public_id}/calls/\d+/contents/0)"', card.content.decode())
        assert link is not None
        try:
            await asyncio.wait_for(stalled.wait(), 10)  # the answer is on its way to the database
            download = asyncio.ensure_future(client.get(link.group(1)))
            await asyncio.wait_for(flushing.wait(), 10)
            assert not download.done()
        finally:
            released.set()  # else the session could never end
        answer = await asyncio.wait_for(download, 10)
        assert answer.status_code == 200
        assert answer.content.startswith(b"Resource 2: This is a base64 blob")
        missing = await client.get(link.group(1).replace("/contents/0", "/contents/9"))
        assert missing.status_code == 404


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_templates_expand_into_a_read_and_complete_their_variables(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        panel = (await client.post(url(session, "list/templates"))).content.decode()
        assert TEXT_TEMPLATE in panel
        assert 'name="arg.resourceId"' in panel and "<datalist" in panel

        card = await client.post(
            url(session, "resources/read-template"), {"ref": TEXT_TEMPLATE, "arg.resourceId": "3"}
        )
        html = card.content.decode()
        assert "demo://resource/dynamic/text/3" in html and "Resource 3: This is a plaintext resource" in html

        options = await client.post(
            url(session, "complete"),
            {"ref_type": "ref/resource", "ref": TEXT_TEMPLATE, "arg.resourceId": "7"},
            headers={"HX-Request": "true", "HX-Trigger": "tpl0-a0", "HX-Trigger-Name": "arg.resourceId"},
        )
        assert (
            options.content.decode().strip()
            == '<datalist id="tpl0-a0-options"><option value="7"></option></datalist>'
        )


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_prompts_list_get_with_arguments_and_complete_arguments(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        panel = (await client.post(url(session, "list/prompts"))).content.decode()
        assert "args-prompt" in panel and "completable-prompt" in panel
        assert 'name="arg.city"' in panel and 'title="required"' in panel

        card = await client.post(
            url(session, "prompts/get"), {"ref": "args-prompt", "arg.city": "Paris", "arg.state": ""}
        )
        html = card.content.decode()
        assert "What&#x27;s weather in Paris?" in html and "role-user" in html

        options = await client.post(
            url(session, "complete"),
            {"ref_type": "ref/prompt", "ref": "completable-prompt", "arg.department": "E", "arg.name": ""},
            headers={"HX-Request": "true", "HX-Trigger": "prompt1-a0", "HX-Trigger-Name": "arg.department"},
        )
        values = re.findall(r'<option value="([^"]*)">', options.content.decode())
        assert values == ["Engineering"]
        assert options.content.decode().startswith('<datalist id="prompt1-a0-options">')

        # the other arguments go along as context
        names = await client.post(
            url(session, "complete"),
            {
                "ref_type": "ref/prompt",
                "ref": "completable-prompt",
                "arg.department": "Sales",
                "arg.name": "",
            },
            headers={"HX-Request": "true", "HX-Trigger": "prompt1-a1", "HX-Trigger-Name": "arg.name"},
        )
        assert re.findall(r'<option value="([^"]*)">', names.content.decode()) == ["David", "Eve", "Frank"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_prompts_and_a_templates_form_sent_over_the_live_socket_are_answered_on_it(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        socket = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
        assert (await socket.connect())[0]

        async def send(action: str, **form: str) -> None:
            await socket.send_to(text_data=json.dumps({"action": action, **form, "HEADERS": {}}))

        try:
            await send("prompt", ref="args-prompt", **{"arg.city": "<Paris>", "arg.state": ""})
            assert "&lt;Paris&gt;" in await receive_card(socket, "What&#x27;s weather in &lt;Paris&gt;?")
            await send("template", ref=TEXT_TEMPLATE, **{"arg.resourceId": "3"})
            await receive_until(socket, "Resource 3: This is a plaintext resource")
            await send("template", ref="")
            await receive_until(socket, "ref (the URI template) is required")
            await send("prompt", ref="")
            await receive_until(socket, "ref (the prompt&#x27;s name) is required")
        finally:
            await socket.disconnect()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_logging_sets_the_level_shows_log_lines_filtered_and_pings(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        response = await client.post(url(session, "logging/level"), {"level": "debug"})
        assert response.status_code == 200
        assert '<option value="debug" selected>' in response.content.decode()

        answer = await request(session, "tools/call", {"name": "toggle-simulated-logging", "arguments": {}})
        assert answer["event"] == "done"
        await wait_until(
            lambda: TimelineFrame.objects.filter(session=session, method="notifications/message").exists()
        )
        panel = (await client.get(url(session, "panel/logging"))).content.decode()
        # server-everything picks one of eight texts at random, and spells the alert one
        # "Alert level-message"; every one of them holds "level" and "message".
        assert panel.count('class="log-line lvl-') >= 1
        levels = "debug|info|notice|warning|error|critical|alert|emergency"
        assert re.search(rf"\b({levels})[- ]level[- ]message", panel, re.I)

        shown = (await client.get(url(session, "panel/logging"), {"min_level": "error"})).content.decode()
        assert all(int(rank) >= 4 for rank in re.findall(r'class="log-line lvl-(\d)', shown))
        shown = (await client.get(url(session, "panel/logging"), {"min_level": "emergency"})).content.decode()
        assert all(rank == "7" for rank in re.findall(r'class="log-line lvl-(\d)', shown))
        assert '<option value="emergency" selected>' in shown

        pong = (await client.post(url(session, "ping"))).content.decode()
        assert re.search(r"pong in \d+\.\d ms", pong)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_subscribed_resource_is_marked_and_its_updates_arrive_live(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        await client.post(url(session, "list/resources"))
        panel = (
            await client.post(url(session, "resources/subscribe"), {"uri": ARCHITECTURE})
        ).content.decode()
        assert "subscribed" in panel and f'id="{marker_id(ARCHITECTURE)}"' in panel
        assert f'aria-label="Unsubscribe from {ARCHITECTURE}"' in panel

        await request(session, "tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
        updated = await wait_until(
            lambda: TimelineFrame.objects.filter(
                session=session, method="notifications/resources/updated"
            ).first()
        )
        panel = (await client.get(url(session, "panel/resources"))).content.decode()
        assert re.search(rf'id="{marker_id(ARCHITECTURE)}"[^>]*>updated \d\d:\d\d:\d\d', panel)
        assert 'id="resource-updates"' in panel and panel.count(ARCHITECTURE) >= 3

        rows = [{**r, "wall": r["wall"]} async for r in TimelineFrame.objects.filter(pk=updated.pk).values()]
        fragments = live.fragments(session, rows)
        assert len(fragments) == 1 and marker_id(ARCHITECTURE) in fragments[0]

        await request(session, "tools/call", {"name": "toggle-subscriber-updates", "arguments": {}})
        panel = (
            await client.post(
                url(session, "resources/subscribe"), {"uri": ARCHITECTURE, "action": "unsubscribe"}
            )
        ).content.decode()
        assert f'aria-label="Subscribe to {ARCHITECTURE}"' in panel and "sub-badge" not in panel
