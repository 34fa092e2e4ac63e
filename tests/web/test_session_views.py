"""The session pages: connecting, saved servers and imports, ownership, frames, filters, export, secrets."""

from __future__ import annotations

import asyncio
import html
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from support.paths import SERVERS
from support.teams import ateam_of, team_of
from support.web import (
    frames_of,
    live_runtime,
    logged_in_client,
    make_user,
    message,
    receive_card,
    receive_until,
    request,
    session_communicator,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.config_files import ConfigError, parse_servers
from sessions.models import McpSession, ServerConfig, TimelineFrame
from sessions.teams.models import Membership, Role

pytestmark = pytest.mark.django_db(transaction=True)


def everything(spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return stdio_config(spec["command"], spec["args"], **extra)


async def test_the_connect_form_refuses_a_stdio_server_without_a_command() -> None:
    client = await logged_in_client(await make_user())
    response = await client.post(
        "/connect",
        {"transport": "stdio", "protocol_version": "2025-11-25", "timeout": "60", "max_total_timeout": "600"},
    )
    assert response.status_code == 422
    assert "a stdio server needs a command" in response.content.decode()
    assert await McpSession.objects.acount() == 0


async def test_the_connect_form_refuses_a_url_that_is_not_http() -> None:
    client = await logged_in_client(await make_user())
    form = {
        "transport": "http",
        "url": "javascript:alert(1)",
        "protocol_version": "2025-11-25",
        "timeout": "60",
        "max_total_timeout": "600",
    }
    response = await client.post("/connect", form)
    assert response.status_code == 422
    assert "http:// or https://" in response.content.decode()


@pytest.mark.slow
async def test_connecting_from_the_form_saves_the_server_and_opens_a_live_session(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        command = " ".join([everything_stdio["command"], *everything_stdio["args"]])
        form = {
            "transport": "stdio",
            "command": command,
            "name": "everything",
            "env": "API_TOKEN=s3cret\nPLAIN=visible",
            "protocol_version": "2025-06-18",
            "timeout": "60",
            "max_total_timeout": "600",
            "save": "on",
            "sampling": "on",
            "roots_cap": "on",
        }
        response = await client.post("/connect", form)
        assert response.status_code == 302
        session = await McpSession.objects.aget(owner=alice)
        assert response["Location"] == f"/s/{session.public_id}/"
        server = await ServerConfig.objects.aget(owner=alice, name="everything")
        assert server.secret_env == ["API_TOKEN"]
        session = await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").first())
        assert session.protocol_version == "2025-06-18"
        page = (await client.get(response["Location"])).content.decode()
        assert 'id="tab-tools"' in page and re.search(r'id="tab-tools"[^>]*aria-selected="true"', page)
        page = (await client.get(response["Location"] + "?tab=overview")).content.decode()
        assert "Everything Reference Server" in page
        assert "s3cret" not in page and "visible" in page  # secret env values are masked
        # Each lifecycle phase on the bar, in order, placed by its start; and listed with how long it took.
        phases = re.findall(r'<rect class="phase [^"]*" data-state="([a-z]+)" x="([0-9.]+)"', page)
        assert len(phases) >= 3 and phases[0] == ("connecting", "0") and phases[-1][0] == "ready"
        assert [float(x) for _, x in phases] == sorted(float(x) for _, x in phases)
        assert re.search(
            r'<span class="phase-state">initializing</span> <span class="phase-ms">[0-9.]+ m?s</span>', page
        )


async def test_importing_mcpservers_json_saves_each_server() -> None:
    alice = await make_user()
    client = await logged_in_client(alice)
    document = {
        "mcpServers": {
            "files": {
                "command": "npx",
                "args": ["-y", "server-filesystem", "/tmp"],
                "env": {"GITHUB_TOKEN": "x"},
            },
            "remote": {
                "type": "http",
                "url": "https://example.com/mcp",
                "headers": {"Authorization": "Bearer zz-secret-zz"},
            },
            "old": {"url": "https://example.com/sse", "type": "sse"},
        }
    }
    response = await client.post("/servers/import", {"text": json.dumps(document)})
    assert response.status_code == 302
    servers = {s.name: s async for s in ServerConfig.objects.filter(owner=alice)}
    assert servers["files"].transport == "stdio" and servers["files"].args == [
        "-y",
        "server-filesystem",
        "/tmp",
    ]
    assert servers["files"].secret_env == ["GITHUB_TOKEN"]
    assert servers["remote"].transport == "http" and servers["remote"].headers == {
        "Authorization": "Bearer zz-secret-zz"
    }
    assert servers["old"].transport == "sse"
    home = (await client.get("/")).content.decode()
    assert "zz-secret-zz" not in home


WEATHER = {  # a registry server.json: one npm package, one remote with a URL variable
    "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
    "name": "io.github.someone/weather",
    "title": "Weather",
    "version": "1.2.0",
    "packages": [
        {
            "registryType": "npm",
            "identifier": "@someone/weather-mcp",
            "version": "1.2.0",
            "transport": {"type": "stdio"},
            "packageArguments": [
                {"type": "positional", "valueHint": "config_path"},
                {"type": "named", "name": "--units", "value": "metric"},
            ],
            "environmentVariables": [{"name": "WEATHER_KEY", "isSecret": True, "isRequired": True}],
        },
        {"registryType": "pypi", "identifier": "weather-mcp", "version": "0.3"},
    ],
    "remotes": [
        {
            "type": "streamable-http",
            "url": "https://{host}/mcp",
            "variables": {"host": {"default": "weather.example.com"}},
            "headers": [{"name": "X-Api-Key", "isSecret": True}],
        }
    ],
}


def test_a_registry_server_json_becomes_one_config_per_package_and_remote() -> None:
    configs = parse_servers(WEATHER)
    assert set(configs) == {"Weather (npm)", "Weather (pypi)", "Weather (remote)"}
    npm = configs["Weather (npm)"]
    assert npm["command"] == "npx"
    assert npm["args"] == ["-y", "@someone/weather-mcp@1.2.0", "<config_path>", "--units", "metric"]
    assert npm["env"] == {"WEATHER_KEY": ""} and npm["secret_env"] == ["WEATHER_KEY"]
    assert configs["Weather (pypi)"]["command"] == "uvx"
    assert configs["Weather (pypi)"]["args"] == ["weather-mcp==0.3"]
    remote = configs["Weather (remote)"]
    assert remote["transport"] == "http" and remote["url"] == "https://weather.example.com/mcp"
    assert remote["headers"] == {"X-Api-Key": ""}
    with pytest.raises(ConfigError, match="no packages or remotes"):
        parse_servers({"name": "x", "packages": []})
    with pytest.raises(ConfigError, match="cannot tell how to run"):
        parse_servers({"name": "x", "packages": [{"registryType": "mcpb", "identifier": "x"}]})


@pytest.mark.slow
async def test_importing_a_server_json_saves_its_servers_and_a_remote_connects(everything_http: str) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        document = {**WEATHER, "remotes": [{"type": "streamable-http", "url": everything_http}]}
        response = await client.post("/servers/import", {"text": json.dumps(document)})
        assert response.status_code == 302
        servers = {s.name: s async for s in ServerConfig.objects.filter(owner=alice)}
        assert servers["Weather (npm)"].secret_env == ["WEATHER_KEY"]
        remote = servers["Weather (remote)"]
        connected = await client.post(f"/servers/{remote.pk}/connect")
        assert connected.status_code == 302
        session = await McpSession.objects.aget(owner=alice)
        session = await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").first())
        assert "Everything" in str(session.server_info)


async def test_importing_json_without_servers_explains_the_problem() -> None:
    client = await logged_in_client(await make_user())
    response = await client.post("/servers/import", {"text": '{"servers": 3}'})
    assert response.status_code == 422
    assert "mcpServers" in response.content.decode()


async def test_another_users_session_is_not_found() -> None:
    alice, bob = await make_user("alice"), await make_user("bob")
    session = await McpSession.objects.acreate(owner=alice, team=await ateam_of(alice), name="x", config={})
    client = await logged_in_client(bob)
    for path in ("", "timeline", "frames/1", "export", "panel/tools"):
        response = await client.get(f"/s/{session.public_id}/{path}")
        assert response.status_code == 404, path
    response = await client.post(f"/s/{session.public_id}/request", {"method": "ping"})
    assert response.status_code == 404


@pytest.mark.slow
async def test_frames_open_with_raw_bytes_filters_work_and_export_has_every_frame(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("garbage")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        client = await logged_in_client(alice)
        listed = await client.post(f"/s/{session.public_id}/request", {"method": "tools/list"})
        assert listed.status_code == 200
    frames = await frames_of(session)
    bad = next(f for f in frames if bytes(f.raw).startswith(b"\xff\xfe"))
    detail = (await client.get(f"/s/{session.public_id}/frames/{bad.seq}")).content.decode()
    assert "invalid-utf8" in detail and "ff fe" in detail
    only_lists = (await client.get(f"/s/{session.public_id}/timeline", {"method": "tools/"})).content.decode()
    assert "tools/list" in only_lists and "initialize" not in only_lists
    violations = (await client.get(f"/s/{session.public_id}/timeline", {"violations": "1"})).content.decode()
    assert "invalid-json" in violations and "tools/list" not in violations
    export = await client.get(f"/s/{session.public_id}/export")
    body = b"".join([chunk async for chunk in export.streaming_content])
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert [r["seq"] for r in lines] == [f.seq for f in frames]
    assert next(r for r in lines if r["seq"] == bad.seq)["raw_encoding"] == "latin-1"


@pytest.mark.slow
async def test_a_request_with_bad_params_is_refused_before_it_reaches_the_server(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        response = await client.post(
            f"/s/{session.public_id}/request", {"method": "tools/call", "params": "{oops"}
        )
        assert response.status_code == 422
        assert "not JSON" in response.content.decode()
        card = await client.post(
            f"/s/{session.public_id}/request",
            {
                "method": "tools/call",
                "params": json.dumps({"name": "echo", "arguments": {"message": "<b>hi</b>"}}),
            },
        )
        text = card.content.decode()
        assert "Echo: &lt;b&gt;hi&lt;/b&gt;" in text and "<b>hi</b>" not in text


def test_sessions_left_live_by_a_dead_process_are_marked_lost_at_start_up() -> None:
    from django.contrib.auth.models import User

    from sessions.runtime.store import mark_orphans_lost

    alice = User.objects.create_user("carol")
    live = McpSession.objects.create(
        owner=alice, team=team_of(alice), name="a", config={}, status="ready", worker_channel="x!y"
    )
    done = McpSession.objects.create(owner=alice, team=team_of(alice), name="b", config={}, status="closed")
    assert mark_orphans_lost() == 1
    live.refresh_from_db()
    done.refresh_from_db()
    assert live.status == "lost" and live.worker_channel == "" and "stopped" in live.status_note
    assert done.status == "closed"


@pytest.mark.slow
async def test_a_sent_request_can_be_edited_and_sent_again_from_its_frame(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        await client.post(
            f"/s/{session.public_id}/request",
            {"method": "tools/call", "params": '{"name": "echo", "arguments": {"message": "first"}}'},
        )
        sent = await wait_until(
            lambda: TimelineFrame.objects.filter(
                session=session, method="tools/call", direction="out"
            ).first()
        )
        detail = (await client.get(f"/s/{session.public_id}/frames/{sent.seq}")).content.decode()
        assert "Edit and send again" in detail and 'value="tools/call"' in detail
        replay = re.search(r'<textarea id="replay-params"[^>]*>(.*?)</textarea>', detail, re.S)
        assert replay is not None
        params = json.loads(html.unescape(replay.group(1)))
        assert params == {"name": "echo", "arguments": {"message": "first"}}  # no progressToken, no _meta

        params["arguments"]["message"] = "second"
        card = await client.post(
            f"/s/{session.public_id}/request", {"method": "tools/call", "params": json.dumps(params)}
        )
        assert "Echo: second" in card.content.decode()
        calls = TimelineFrame.objects.filter(session=session, method="tools/call", direction="out")
        await wait_until(lambda: calls.count() == 2)  # the recorder stores both sends

        # Responses, notifications and the lifecycle's own requests offer no replay.
        answer = await TimelineFrame.objects.filter(
            session=session, method="initialize", direction="out"
        ).afirst()
        assert answer is not None
        detail = (await client.get(f"/s/{session.public_id}/frames/{answer.seq}")).content.decode()
        assert "Edit and send again" not in detail


@pytest.mark.slow
async def test_the_raw_request_form_sends_a_notification_without_an_id_onto_the_timeline(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, everything(everything_stdio))
        client = await logged_in_client(alice)
        method = "notifications/roots/list_changed"
        card = await client.post(
            f"/s/{session.public_id}/request", {"method": method, "params": "", "notification": "1"}
        )
        assert card.status_code == 200
        # The answer comes once the frame is stored: it is on the timeline already, with no id.
        sent = [f async for f in TimelineFrame.objects.filter(session=session, method=method)]
        assert [(f.direction, f.rpc_kind, f.rpc_id) for f in sent] == [("out", "notification", "")]
        assert message(sent[0]) == {"jsonrpc": "2.0", "method": method}
        shown = card.content.decode()
        assert method in shown and "notification, no id" in shown and f"frame #{sent[0].seq}" in shown


@pytest.mark.slow
async def test_the_raw_request_form_sent_over_the_live_socket_is_answered_on_it(
    everything_stdio: dict,
) -> None:
    """The raw request form and the panels' buttons go over the page's socket while it is open, with
    the view's checks: an operator of the session's team, a method, params that are a JSON object."""
    async with live_runtime():
        alice, bob = await make_user(), await make_user("bob")
        await Membership.objects.acreate(team=await ateam_of(alice), user=bob, role=Role.VIEWER)
        session = await start_session(alice, everything(everything_stdio))
        path = f"/ws/sessions/{session.public_id}/"
        socket, watcher = await session_communicator(alice, path), await session_communicator(bob, path)
        assert (await socket.connect())[0] and (await watcher.connect())[0]

        async def send(to: Any, method: str, params: str = "", **more: str) -> None:
            form = {"action": "request", "method": method, "params": params, **more, "HEADERS": {}}
            await to.send_to(text_data=json.dumps(form))

        try:
            await send(socket, "tools/call", '{"name": "echo", "arguments": {"message": "raw <over> it"}}')
            assert "Echo: raw &lt;over&gt; it" in await receive_card(socket, "Echo: raw &lt;over&gt; it")
            await send(socket, "notifications/roots/list_changed", notification="1")
            await receive_until(socket, "notification, no id")
            for params, why in (("[1", "params are not JSON"), ("[1]", "params must be a JSON object")):
                await send(socket, "ping", params)
                assert 'role="alert"' in await receive_until(socket, why)
            await send(socket, " ")
            await receive_until(socket, "method is required")

            await send(watcher, "tools/call", '{"name": "echo", "arguments": {"message": "from bob"}}')
            await receive_until(watcher, "Your role in this team is viewer; this needs operator.")
        finally:
            await socket.disconnect()
            await watcher.disconnect()
        sent = TimelineFrame.objects.filter(session=session, direction="out")
        assert await sent.filter(method="notifications/roots/list_changed").aexists()
        assert not [f async for f in sent.filter(method="tools/call") if b"from bob" in bytes(f.raw)]


@pytest.mark.slow
async def test_the_conformance_panel_counts_rules_broken_and_latency_by_method(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("violations")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        client = await logged_in_client(alice)
        answered = TimelineFrame.objects.filter(session=session, method="initialize", direction="in")
        await wait_until(answered.exists)
        empty = (await client.get(f"/s/{session.public_id}/panel/conformance")).content.decode()
        assert "No verdicts yet" in empty
        assert "<code>initialize</code>" in empty  # its latency is there from the start

        await client.post(f"/s/{session.public_id}/request", {"method": "tools/list"})
        await wait_until(lambda: TimelineFrame.objects.filter(session=session, worst="error").count() >= 4)
        panel = (await client.get(f"/s/{session.public_id}/panel/conformance")).content.decode()
        cells = (
            r"<td><code>([a-z0-9-]+)</code> <button[^>]*>show</button></td>\s*"
            r'<td><span class="verdict sev-\w+">\w+</span></td>\s*<td>(\d+)</td>'
        )
        rows = dict(re.findall(cells, panel))
        assert {"duplicate-response", "unknown-id", "result-and-error", "notification-with-id"} <= set(rows)
        assert rows["duplicate-response"] == "2"  # the repeated answer, and the one with result and error
        assert re.search(r'aria-label="Show frame \d+ \(unknown-id\)"', panel)
        assert "<code>tools/list</code>" in panel
        # The tab is in the page's tab list, and the full page renders with it open.
        page = (await client.get(f"/s/{session.public_id}/?tab=conformance")).content.decode()
        assert 'aria-selected="true"' in page and "Rules broken, by how often" in page


@pytest.mark.slow
async def test_the_html_export_is_one_inert_file_with_every_frame(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("garbage")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        client = await logged_in_client(alice)
        await client.post(f"/s/{session.public_id}/request", {"method": "tools/list"})
        hostile = json.dumps(
            {"name": "t", "arguments": {"x": "<script>alert(1)</script><img src=x onerror=alert(2)>"}}
        )
        await client.post(f"/s/{session.public_id}/request", {"method": "tools/call", "params": hostile})
        page = (await client.get(f"/s/{session.public_id}/")).content.decode()
        assert f'href="/s/{session.public_id}/export.html"' in page
    export = await client.get(f"/s/{session.public_id}/export.html")
    assert export["Content-Disposition"] == f'attachment; filename="mcp-session-{session.public_id}.html"'
    html = b"".join([chunk async for chunk in export.streaming_content]).decode()
    frames = await frames_of(session)
    assert all(f'id="f-{f.seq}"' in html for f in frames)
    assert (
        "default-src &#x27;none&#x27;" in html or "default-src 'none'" in html
    )  # nothing loads, nothing runs
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<code>invalid-json</code>" in html  # in the conformance summary
    assert html.rstrip().endswith("</html>")
    assert "bad-stdio-garbage" in html  # the server's name, from its initialize answer


@pytest.mark.slow
async def test_an_exported_recording_opens_as_a_session_with_the_same_frames(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("violations")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        client = await logged_in_client(alice)
        await client.post(f"/s/{session.public_id}/request", {"method": "tools/list"})
        await wait_until(lambda: TimelineFrame.objects.filter(session=session, worst="error").count() >= 4)
        await client.post(f"/s/{session.public_id}/disconnect")
        await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="closed").exists())
    export = await client.get(f"/s/{session.public_id}/export")
    body = b"".join([chunk async for chunk in export.streaming_content])

    bob = await make_user("bob")  # a teammate, sent the file
    teammate = await logged_in_client(bob)
    upload = SimpleUploadedFile("violations.jsonl", body, content_type="application/x-ndjson")
    response = await teammate.post("/recordings/open", {"recording": upload})
    assert response.status_code == 302
    opened = await McpSession.objects.aget(owner=bob)
    assert response["Location"] == f"/s/{opened.public_id}/"
    assert opened.status == "closed" and opened.is_imported and "violations.jsonl" in opened.status_note
    assert opened.server_info["name"] == "bad-stdio-violations"
    assert opened.protocol_version == "2025-11-25" and opened.mode == "handshake"
    assert opened.server_capabilities == {"tools": {}} and "sampling" in opened.client_capabilities
    assert [p["state"] for p in opened.phases][0] == "connecting" and opened.phases[-1]["state"] == "closed"
    assert opened.transport_name == "stdio" and opened.exit_code is not None

    fields = ("seq", "kind", "direction", "method", "rpc_id", "rpc_kind", "pair_seq", "verdicts", "worst")

    async def frames(of: McpSession) -> list[tuple[Any, ...]]:
        rows = TimelineFrame.objects.filter(session=of).values_list("raw", *fields)
        return [(bytes(raw), *rest) async for raw, *rest in rows]

    await session.arefresh_from_db()
    assert await frames(opened) == await frames(session) and opened.last_seq == session.last_seq

    page = (await teammate.get(response["Location"])).content.decode()
    assert ">recording</span>" in page and ">Reconnect</button>" not in page
    panel = (await teammate.get(f"/s/{opened.public_id}/panel/conformance")).content.decode()
    assert "<code>unknown-id</code>" in panel
    refused = await teammate.post(f"/s/{opened.public_id}/reconnect")
    assert refused.status_code == 400
    # Alice's sessions stay hers.
    assert (await teammate.get(f"/s/{session.public_id}/")).status_code == 404


STATE = b'{"seq": 1, "kind": "state", "direction": "local"}\n'


async def test_a_file_that_is_not_a_recording_is_refused_with_the_line_and_nothing_saved() -> None:
    client = await logged_in_client(await make_user())
    cases = {
        STATE + b"not json\n": "line 2: not JSON",
        b'{"seq": 1, "kind": "telepathy", "direction": "in"}\n': "line 1: not a frame",
        b"\n\n": "holds no frames",
        STATE + STATE: "frame 1 appears twice",
        b"\xff\xfe\x00junk": "cannot open",
    }
    for content, expected in cases.items():
        upload = SimpleUploadedFile("x.jsonl", content)
        response = await client.post("/recordings/open", {"recording": upload})
        assert response.status_code == 422, content
        assert expected in html.unescape(response.content.decode()), (content, expected)
    assert await McpSession.objects.acount() == 0
    assert (await client.post("/recordings/open", {})).status_code == 422


@pytest.mark.slow
def test_a_cli_record_file_opens_as_a_session(tmp_path: Path) -> None:
    from django.contrib.auth.models import User
    from support.cli import result_of, run_cli

    from sessions.timeline.recordings import import_recording

    record = tmp_path / "call.jsonl"
    server = [sys.executable, str(SERVERS / "sdk_server.py"), "stdio"]
    call = ["--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=1", "--tool-arg", "b=2"]
    assert result_of(run_cli(*server, *call, "--record", str(record)))["structuredContent"] == {"result": 3}
    owner = User.objects.create_user("dave")
    with record.open("rb") as lines:
        session = import_recording(team_of(owner).pk, owner.pk, "call.jsonl", lines)
    assert session.server_info["name"] == "sdk-test-server" and session.protocol_version == "2025-11-25"
    assert session.instructions == "Test server for the MCP inspector test suite."
    assert (
        TimelineFrame.objects.filter(session=session).count()
        == session.last_seq
        == len(record.read_text().splitlines())
    )
    call_frame = TimelineFrame.objects.get(session=session, method="tools/call", direction="in")
    assert call_frame.pair_seq is not None and call_frame.latency_ms is not None


@pytest.mark.slow
async def test_search_finds_frames_across_sessions_by_rule_method_status_and_words(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        spec = bad_stdio("violations")
        broken = await start_session(alice, stdio_config(spec["command"], spec["args"], name="broken one"))
        await client.post(f"/s/{broken.public_id}/request", {"method": "tools/list"})
        spec = bad_stdio("garbage")
        other = await start_session(alice, stdio_config(spec["command"], spec["args"], name="garbage one"))
        await client.post(f"/s/{other.public_id}/request", {"method": "tools/list"})
        await wait_until(
            lambda: TimelineFrame.objects.filter(session=other, method="tools/list", direction="in").exists()
        )
        await wait_until(lambda: TimelineFrame.objects.filter(session=broken, worst="error").count() >= 4)
        bob = await make_user("bob")
        spec = bad_stdio("violations")
        bobs = await start_session(bob, stdio_config(spec["command"], spec["args"], name="bob's"))
        await request(bobs, "tools/list")
        await wait_until(lambda: TimelineFrame.objects.filter(session=bobs, worst="error").count() >= 4)

    async def search(q: str) -> str:
        response = await client.get("/search", {"q": q})
        assert response.status_code == 200
        return html.unescape(response.content.decode())

    def opened(page: str) -> set[tuple[str, str]]:
        return set(re.findall(r'href="/s/([0-9a-f-]+)/\?frame=(\d+)" aria-label', page))

    found = await search("rule:unknown-id")
    assert opened(found) == {(str(broken.public_id), str(r.seq)) async for r in TimelineFrame.objects.filter(
        session=broken, rpc_id="999")}  # fmt: skip
    assert "1 matching frame" in found  # Bob's identical session stays Bob's
    lists = await search("method:tools/list dir:out")
    assert {s for s, _ in opened(lists)} == {str(broken.public_id), str(other.public_id)}
    assert "2 matching frames" in lists
    garbage = await search("status:violation server:garbage")
    assert {s for s, _ in opened(garbage)} == {str(other.public_id)} and "invalid-json" in garbage
    assert "Latency of the matching answers" in await search("method:initialize")
    words = await search('"not json"')
    assert {s for s, _ in opened(words)} == {str(other.public_id)}
    refused = await client.get("/search", {"q": "status:weird"})
    assert refused.status_code == 400 and "use status:error or status:violation" in refused.content.decode()

    # A result opens its session with that frame's detail shown.
    session_id, seq = sorted(opened(found))[0]
    page = (await client.get(f"/s/{session_id}/", {"frame": seq})).content.decode()
    assert f"<strong>#{seq}</strong>" in page and "unknown-id" in page


SDK_SERVER = str(SERVERS / "sdk_server.py")
SDK_STATELESS = str(SERVERS / "sdk_stateless.py")


@pytest.mark.slow
async def test_comparing_sessions_shows_added_removed_and_changed_items_with_diffs() -> None:
    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        before = await start_session(alice, stdio_config(sys.executable, [SDK_SERVER, "stdio"]))
        await request(before, "tools/list")
        await request(before, "prompts/list")
        config = stdio_config(sys.executable, [SDK_STATELESS, "stdio"], protocol_version="2026-07-28")
        after = await start_session(alice, {**config, "mode": "stateless"})
        await request(after, "tools/list")

    async def compare(a: McpSession, b: McpSession) -> str:
        response = await client.get("/compare", {"a": str(a.public_id), "b": str(b.public_id)})
        assert response.status_code == 200
        return html.unescape(response.content.decode())

    page = await compare(before, after)
    added = re.search(r"Added: (.*?)</p>", page, re.S)
    assert added and '<code class="d-add">routed</code>' in added[1]
    assert "<code>protocolVersion</code> differs" in page and "<code>mode</code> differs" in page
    assert "The second session has not listed prompts since it last connected" in page
    assert "Neither session has listed resources" in page

    # A recording of the first session, with one tool's description edited: a changed tool, with a diff.
    export = await client.get(f"/s/{before.public_id}/export")
    body = b"".join([chunk async for chunk in export.streaming_content])
    assert b"Add two integers (structured output)." in body
    edited = body.replace(b"Add two integers (structured output).", b"Add two whole numbers.")
    upload = SimpleUploadedFile("edited.jsonl", edited)
    opened = await client.post("/recordings/open", {"recording": upload})
    assert opened.status_code == 302
    recording = await McpSession.objects.aget(owner=alice, name="edited.jsonl")
    page = await compare(before, recording)
    assert "1 changed" in page and "Changed: <code>add</code>" in page
    assert '<span class="d-del">-  "description": "Add two integers (structured output).",</span>' in page
    assert '<span class="d-add">+  "description": "Add two whole numbers.",</span>' in page
    assert "Same server info, protocol, capabilities and instructions." in page

    # From a session page, "Compare with another session" preselects it as the second.
    chooser = (await client.get("/compare", {"b": str(recording.public_id)})).content.decode()
    assert f'<option value="{recording.public_id}" selected>' in chooser and "Server</h2>" not in chooser

    bob = await make_user("bob")
    other = await logged_in_client(bob)
    refused = await other.get("/compare", {"a": str(before.public_id), "b": str(after.public_id)})
    refusal = "choose two of your team&#x27;s sessions"
    assert refused.status_code == 422 and refusal in refused.content.decode()


@pytest.mark.slow
async def test_a_session_exports_as_a_collection_that_the_cli_runs_green(tmp_path: Path) -> None:
    from support.cli import result_of, run_cli

    async with live_runtime():
        alice = await make_user()
        client = await logged_in_client(alice)
        session = await start_session(alice, stdio_config(sys.executable, [SDK_SERVER, "stdio"]))
        for method, params in (
            ("tools/list", None),
            ("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}),
            ("tools/call", {"name": "fail", "arguments": {}}),
            ("prompts/get", {"name": "no-such-prompt"}),
        ):
            await request(session, method, params)

        def four_answers() -> bool:
            answered = TimelineFrame.objects.filter(
                session=session, direction="in", rpc_kind__in=("result", "error")
            )
            return answered.filter(method__in=("tools/call", "prompts/get")).count() >= 3

        # The answers come back before the recorder has stored their frames: export once they are.
        await wait_until(four_answers, what="the answers stored")
        response = await client.get(f"/s/{session.public_id}/collection.json")
    assert response["Content-Disposition"].startswith('attachment; filename="mcp-collection-')
    document = json.loads(response.content)
    steps = document["steps"]
    assert [s["method"] for s in steps] == ["tools/list", "tools/call", "tools/call", "prompts/get"]
    assert steps[1]["params"] == {"name": "add", "arguments": {"a": 1, "b": 2}}  # no _meta, no token
    assert steps[1]["expect"] == {"isError": False, "verdicts": "clean"}
    assert steps[2]["expect"] == {"isError": True, "verdicts": "clean"}
    assert steps[3]["expect"] == {"error": True}
    path = tmp_path / "recorded.json"
    path.write_text(response.content.decode())
    summary = await asyncio.to_thread(
        lambda: result_of(run_cli(sys.executable, SDK_SERVER, "stdio", "--collection", str(path)))
    )
    assert (summary["passed"], summary["failed"]) == (4, 0)


async def test_ended_sessions_can_be_deleted_one_or_all_and_live_ones_cannot() -> None:
    alice = await make_user()
    client = await logged_in_client(alice)

    async def session(name: str, status: str) -> McpSession:
        made = await McpSession.objects.acreate(
            owner=alice, team=await ateam_of(alice), name=name, config={}, status=status
        )
        await TimelineFrame.objects.acreate(
            session=made, seq=1, kind="state", direction="local", wall=0, mono=0
        )
        return made

    ended, lost, live = (
        await session("ended", "closed"),
        await session("lost", "lost"),
        await session("live", "ready"),
    )
    page = (await client.get("/")).content.decode()
    assert 'aria-label="Delete session ended"' in page and 'aria-label="Delete session live"' not in page
    assert (await client.get(f"/s/{ended.public_id}/delete")).status_code == 405  # no side effect on GET

    response = await client.post(f"/s/{ended.public_id}/delete")
    assert response.status_code == 302
    assert not await McpSession.objects.filter(pk=ended.pk).aexists()
    assert not await TimelineFrame.objects.filter(session_id=ended.pk).aexists()
    assert (await client.post(f"/s/{live.public_id}/delete")).status_code == 409

    bob = await make_user("bob")
    other = await logged_in_client(bob)
    assert (await other.post(f"/s/{lost.public_id}/delete")).status_code == 404
    await other.post("/sessions/delete-ended")
    assert await McpSession.objects.filter(pk=lost.pk).aexists()  # Bob cannot clear Alice's history

    htmx = await client.post("/sessions/delete-ended", headers={"HX-Request": "true"})
    assert htmx.status_code == 200 and htmx["HX-Redirect"] == "/"
    assert [s.name async for s in McpSession.objects.filter(owner=alice)] == ["live"]


def _details(page: str) -> list[tuple[bool, str]]:
    """Each <details> of a page: whether it is open, and what it holds."""
    return [
        (" open" in attrs, inner)
        for attrs, inner in re.findall(r"<details([^>]*)>(.*?)</details>", page, re.S)
    ]


async def test_a_connect_error_in_a_collapsed_section_opens_it_and_the_token_is_kept() -> None:
    client = await logged_in_client(await make_user())
    form = {
        "transport": "http",
        "url": "http://127.0.0.1:1/mcp",
        "headers": "not a header",
        "bearer_token": "tok-<typed>-123",
        "protocol_version": "2025-11-25",
        "timeout": "soon",
        "max_total_timeout": "600",
        "verify_tls": "on",
    }
    response = await client.post("/connect", form)
    assert response.status_code == 422
    page = response.content.decode()
    sections = {
        inner.split("</summary>")[0].split("<summary>")[1]: opened for opened, inner in _details(page)
    }
    assert sections == {
        "Arguments, environment, working directory": False,
        "Headers and bearer token": True,  # the header's error
        "Authorization (OAuth)": False,
        "TLS (local HTTPS, self-signed certificates)": False,
        "Protocol, capabilities, roots and timeouts": True,  # the timeout's error
    }
    assert "expected Name: value, got &#x27;not a header&#x27;" in page
    assert "Enter a number." in page  # the timeout's error, shown where it is
    assert 'value="tok-&lt;typed&gt;-123"' in page  # kept, and escaped
    assert "tok-" not in (await client.get("/")).content.decode()  # a fresh form shows none


async def test_invalid_json_pasted_into_import_is_explained_and_kept() -> None:
    client = await logged_in_client(await make_user())
    pasted = '{"mcpServers": {"a": {"command": "x",}}}'
    response = await client.post("/servers/import", {"text": pasted})
    assert response.status_code == 422
    page = response.content.decode()
    [(opened, inner)] = [d for d in _details(page) if "Import mcpServers JSON" in d[1]]
    assert opened
    assert "Expecting property name enclosed in double quotes" in inner
    assert html.escape(pasted) in inner  # what was pasted is there to correct, not gone


async def test_the_roots_tab_says_a_client_that_declared_nothing_did_not_declare_roots() -> None:
    alice = await make_user()
    client = await logged_in_client(alice)
    team = await ateam_of(alice)

    async def roots_fact(**fields: Any) -> str:
        session = await McpSession.objects.acreate(owner=alice, team=team, name="s", **fields)
        panel = (await client.get(f"/s/{session.public_id}/panel/roots")).content.decode()
        return re.findall(r"<dt>roots capability</dt><dd>(.*?)</dd>", panel)[0]

    ready = {"status": "ready", "protocol_version": "2025-11-25"}
    assert (await roots_fact(**ready, client_capabilities={})).startswith("not declared")
    assert (await roots_fact(**ready, client_capabilities={"roots": {}})) == "declared"
    assert (await roots_fact(status="initializing")).startswith("not known yet")
