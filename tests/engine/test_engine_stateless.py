"""The engine in the stateless revision (2026-07-28): discovery, ``_meta`` on every request, HTTP
routing headers, the input-required retry, and ``auto`` mode's fallback to the handshake."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from support.engine import EventLog
from support.paths import SERVERS
from support.processes import free_port, start_http_server

from sessions.engine import (
    ClientOptions,
    EngineError,
    Frame,
    HttpTarget,
    McpError,
    PendingResolved,
    Progress,
    RequestCancelled,
    RequestTimeout,
    StdioTarget,
    connect,
)

pytestmark = pytest.mark.slow

SERVER = SERVERS / "sdk_stateless.py"
STATELESS = ClientOptions(protocol_version="2026-07-28", timeout=20)
META_KEYS = {
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/clientCapabilities",
}


def _http(*flags: str) -> Iterator[str]:
    port = free_port()
    with start_http_server([sys.executable, str(SERVER), "http", "--port", str(port), *flags], port):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def stateless_http_sse() -> Iterator[str]:
    yield from _http()


@pytest.fixture(scope="module")
def stateless_http_json() -> Iterator[str]:
    yield from _http("--json")


@pytest.fixture(params=["stdio", "http-sse", "http-json"])
def target(request: pytest.FixtureRequest) -> tuple[str, Any]:
    if request.param == "stdio":
        return "stdio", StdioTarget(sys.executable, [str(SERVER), "stdio"])
    url = request.getfixturevalue(
        "stateless_http_sse" if request.param == "http-sse" else "stateless_http_json"
    )
    return request.param, HttpTarget(url, transport="http")


def state_notes(log: EventLog) -> list[str]:
    return [f.note or "" for f in log.frames if f.kind == "state"]


def errors(log: EventLog) -> list[str]:
    return [f"{v.code}: {v.message}" for f in log.frames for v in f.verdicts if v.severity != "info"]


async def test_discovery_meta_headers_and_the_whole_surface(target: tuple[str, Any]) -> None:
    kind, where = target
    session = connect(where, STATELESS)
    log = EventLog(session)
    async with session:
        assert session.mode == "stateless"
        assert session.protocol_version == "2026-07-28"
        assert session.server_info == {"name": "sdk-test-server", "version": "1.0.0"}
        assert session.instructions == "Test server for the MCP inspector test suite."
        assert "tools" in session.server_capabilities
        assert "stateless: server/discover answered 2026-07-28" in state_notes(log)

        tools = {t["name"]: t for t in await session.list_all("tools/list", "tools")}
        assert {"add", "confirm_name", "roots_and_llm"} <= set(tools)
        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert added["structuredContent"] == {"result": 5}
        assert added["resultType"] == "complete"
        assert (await session.call_tool("fail", {}))["isError"] is True
        info = await session.read_resource("info://server")
        assert info["contents"][0]["text"] == "sdk-test-server 1.0.0"
        templates = await session.list_all("resources/templates/list", "resourceTemplates")
        assert templates[0]["uriTemplate"] == "greeting://{name}"
        prompt = await session.get_prompt("greet", {"name": "Ada"})
        assert "Ada" in prompt["messages"][0]["content"]["text"]
        completion = await session.complete(
            {"type": "ref/prompt", "name": "greet"}, {"name": "name", "value": "A"}
        )
        assert completion["completion"]["values"] == ["Ada", "Alan"]

        # Logging: no logging/setLevel in 2026; the level rides in each request's _meta.
        # (A JSON reply carries one message: logs and progress need stdio or an SSE reply.)
        streams = kind != "http-json"
        await session.set_logging_level("debug")
        mark = len(log.events)
        await session.call_tool("echo", {"text": "hi"})
        if streams:
            logged = await log.wait_for(
                lambda e: isinstance(e, Frame) and e.method == "notifications/message", since=mark
            )
            assert logged.message["params"]["data"] == "echo: hi"

        seen: list[Progress] = []
        done = await session.call_tool("slow", {"steps": 3, "delay": 0.01}, on_progress=seen.append)
        assert done["content"][0]["text"] == "done after 3 steps"
        assert [p.progress for p in seen] == ([1, 2, 3] if streams else [])

    assert not log.messages("out", "initialize")
    assert not log.messages("out", "notifications/initialized")
    for frame in log.messages("out"):
        if frame.rpc_kind == "request":
            meta = frame.message["params"]["_meta"]
            assert set(meta) >= META_KEYS, frame.message
            assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
            assert meta["io.modelcontextprotocol/clientCapabilities"]["roots"] == {}
    echo = next(f for f in log.messages("out", "tools/call") if f.message["params"]["name"] == "echo")
    assert echo.message["params"]["_meta"]["io.modelcontextprotocol/logLevel"] == "debug"
    assert errors(log) == []
    if kind != "stdio":
        for frame in log.messages("out"):
            headers = {k.lower(): v for k, v in frame.transport["http"]["headers"].items()}
            assert headers["mcp-protocol-version"] == "2026-07-28"
            assert headers["mcp-method"] == frame.method
            assert "mcp-session-id" not in headers
        read = log.messages("out", "resources/read")[0]
        assert read.transport["http"]["headers"]["Mcp-Name"] == "info://server"
        assert echo.transport["http"]["headers"]["Mcp-Name"] == "echo"
        # No standalone GET stream, no DELETE: nothing but POSTs went out.
        assert [f for f in log.frames if f.kind == "http" and f.direction == "out"] == []


async def test_cancellation(target: tuple[str, Any]) -> None:
    kind, where = target
    session = connect(where, STATELESS)
    log = EventLog(session)
    async with session:
        handle = await session.start_request(
            "tools/call", {"name": "slow", "arguments": {"steps": 100, "delay": 0.05}}
        )
        if kind != "http-json":  # a JSON reply carries no progress: cancel while the POST is open
            await log.wait_for(lambda e: isinstance(e, Progress) and e.request_id == handle.id)
        await handle.cancel("enough")
        with pytest.raises(RequestCancelled):
            await handle
        if kind == "stdio":
            cancelled = log.messages("out", "notifications/cancelled")
            assert cancelled[0].message["params"]["requestId"] == handle.id
        else:
            # The stateless HTTP wire has no client notifications: the reply stream is closed instead.
            assert not log.messages("out", "notifications/cancelled")
            assert any(f.transport.get("state") == "http-cancel" for f in log.frames if f.kind == "state")
        assert (await session.call_tool("add", {"a": 1, "b": 1}))["structuredContent"] == {"result": 2}


async def test_input_required_elicitation_is_answered_through_respond(target: tuple[str, Any]) -> None:
    session = connect(target[1], STATELESS)
    log = EventLog(session)
    async with session:
        handle = await session.start_request(
            "tools/call", {"name": "confirm_name", "arguments": {"greeting": "Hi"}}
        )
        pending = await log.pending("elicitation/create")
        assert pending.params["message"] == "Who is there?"
        assert pending.request_id == "name"
        session.respond(pending.key, {"action": "accept", "content": {"name": "Ada"}})
        result = await asyncio.wait_for(asyncio.shield(asyncio.ensure_future(_await(handle))), 20)
        assert result["content"][0]["text"] == "Hi, Ada!"
        assert handle.id != handle.current_id

    calls = log.messages("out", "tools/call")
    first, retry = calls[0], calls[1]
    assert "inputResponses" not in first.message["params"]
    assert retry.message["params"]["inputResponses"] == {
        "name": {"action": "accept", "content": {"name": "Ada"}}
    }
    assert retry.message["params"]["requestState"]  # echoed byte for byte
    assert retry.note and retry.note.startswith(f"retry of request {handle.id!r}")
    interim = next(f for f in log.messages("in") if f.rpc_id == first.rpc_id)
    assert interim.note and interim.note.startswith("input required (name: elicitation/create)")
    assert any(isinstance(e, PendingResolved) and e.outcome == "answered" for e in log.events)
    assert errors(log) == []


async def _await(handle: Any) -> dict[str, Any]:
    result: dict[str, Any] = await handle
    return result


async def test_input_required_roots_and_sampling_in_one_round() -> None:
    options = ClientOptions(
        protocol_version="2026-07-28", timeout=20, roots=[{"uri": "file:///work", "name": "w"}]
    )
    session = connect(StdioTarget(sys.executable, [str(SERVER), "stdio"]), options)
    log = EventLog(session)
    async with session:
        call = asyncio.ensure_future(session.call_tool("roots_and_llm", {}))
        pending = await log.pending("sampling/createMessage")
        session.respond(
            pending.key, {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"}
        )
        result = await asyncio.wait_for(call, 20)
        assert json.loads(result["content"][0]["text"]) == {"roots": ["file:///work"], "llm": "yo"}
        # Two rounds, one question each: the retry carries the state of the round before.
        call = asyncio.ensure_future(session.call_tool("two_rounds", {}))
        first = await log.pending("elicitation/create")
        session.respond(first.key, {"action": "accept", "content": {"name": "Ada"}})
        second = await log.wait_for(
            lambda e: (
                getattr(e, "method", None) == "elicitation/create" and e is not first and hasattr(e, "key")
            )
        )
        session.respond(second.key, {"action": "accept", "content": {"name": "Bob"}})
        assert (await asyncio.wait_for(call, 20))["content"][0]["text"] == "Ada and Bob"


async def test_input_required_refused_fails_the_call_without_retrying() -> None:
    session = connect(StdioTarget(sys.executable, [str(SERVER), "stdio"]), STATELESS)
    log = EventLog(session)
    async with session:
        call = asyncio.ensure_future(session.call_tool("confirm_name", {"greeting": "Hi"}))
        pending = await log.pending("elicitation/create")
        session.reject(pending.key)
        with pytest.raises(McpError) as caught:
            await asyncio.wait_for(call, 20)
        assert caught.value.code == -1
        assert len(log.messages("out", "tools/call")) == 1
        assert any("refused" in note for note in state_notes(log))


async def test_header_mismatch_is_named_and_flagged(stateless_http_json: str) -> None:
    # A second, different mcp-name header: the server must answer -32020 with HTTP 400.
    session = connect(
        HttpTarget(stateless_http_json, transport="http", headers={"mcp-name": "other"}), STATELESS
    )
    log = EventLog(session)
    async with session:
        with pytest.raises(McpError) as caught:
            await session.call_tool("add", {"a": 1, "b": 2})
    assert caught.value.code == -32020 and caught.value.name == "Header mismatch"
    answer = next(f for f in log.messages("in") if f.rpc_kind == "error")
    assert answer.note and answer.note.startswith("Header mismatch (-32020)")
    assert "header-mismatch" in log.codes()
    assert "error-status" not in log.codes()  # it came with HTTP 400, as the revision says


async def test_mcp_server_time_from_pypi() -> None:
    session = connect(StdioTarget(sys.executable, ["-m", "mcp_server_time"]), STATELESS)
    log = EventLog(session)
    async with session:
        assert session.server_info["name"] == "mcp-time"
        result = await session.call_tool("get_current_time", {"timezone": "UTC"})
        assert result["structuredContent"]["timezone"] == "UTC"
    assert errors(log) == []


async def test_auto_mode_picks_stateless_when_the_server_discovers() -> None:
    options = ClientOptions(mode="auto", timeout=20)
    session = connect(StdioTarget(sys.executable, [str(SERVER), "stdio"]), options)
    log = EventLog(session)
    async with session:
        assert session.mode == "stateless" and session.protocol_version == "2026-07-28"
        assert (await session.call_tool("add", {"a": 2, "b": 2}))["structuredContent"] == {"result": 4}
    assert not log.messages("out", "initialize")


async def test_auto_mode_falls_back_to_the_handshake(everything_stdio: dict) -> None:
    options = ClientOptions(mode="auto", timeout=20)
    session = connect(StdioTarget(everything_stdio["command"], everything_stdio["args"]), options)
    log = EventLog(session)
    async with session:
        assert session.mode == "handshake"
        assert session.protocol_version == "2025-11-25"
        assert session.server_info["name"]
        tools = await session.list_all("tools/list", "tools")
        assert any(t["name"] == "echo" for t in tools)
    note = next(n for n in state_notes(log) if n.startswith("handshake:"))
    assert note.startswith(
        "handshake: server/discover failed (-32601 Method not found); falling back to initialize"
    )
    discover = log.messages("out", "server/discover")[0]
    assert set(discover.message["params"]["_meta"]) >= META_KEYS
    assert log.messages("out", "initialize")
    assert not [f for f in log.messages("out", "initialize") if "_meta" in (f.message.get("params") or {})]


async def test_auto_mode_falls_back_with_our_own_handshake_only_server(bad_stdio: Any) -> None:
    spec = bad_stdio("hang")
    options = ClientOptions(mode="auto", timeout=20, discover_timeout=5)
    session = connect(StdioTarget(spec["command"], spec["args"]), options)
    log = EventLog(session)
    async with session:
        assert session.mode == "handshake" and session.protocol_version == "2025-11-25"
    assert any(n.startswith("handshake: server/discover failed (-32601") for n in state_notes(log)), (
        state_notes(log)
    )
    assert not log.messages("out", "notifications/cancelled")


# --- subscriptions/listen -----------------------------------------------------------------------

BAD_STATELESS = SERVERS / "bad_stateless.py"
SID = "io.modelcontextprotocol/subscriptionId"


def _bad(mode: str) -> StdioTarget:
    return StdioTarget(sys.executable, [str(BAD_STATELESS), mode])


async def test_listen_carries_list_changes_and_the_subscribed_resources(target: tuple[str, Any]) -> None:
    options = ClientOptions(protocol_version="2026-07-28", timeout=20, listen=True)
    session = connect(target[1], options)
    log = EventLog(session)
    async with session:
        # Opened by itself after discovery, for the list changes of every feature the server has.
        first = await log.wait_for(
            lambda e: getattr(e, "method", None) == "notifications/subscriptions/acknowledged"
        )
        assert first.message["params"]["notifications"] == {
            "toolsListChanged": True,
            "promptsListChanged": True,
            "resourcesListChanged": True,
        }
        first_id = first.message["params"]["_meta"][SID]

        assert await session.subscribe_resource("info://server") == {}
        assert session.subscribed_uris == ["info://server"]
        second = session.listens.current
        assert second is not None and second.request_id != first_id
        assert second.honored and second.honored["resourceSubscriptions"] == ["info://server"]

        mark = len(log.events)
        await session.call_tool("touch", {"uri": "other://not-subscribed"})
        await session.call_tool("touch", {"uri": "info://server"})
        updated = await log.wait_for(
            lambda e: getattr(e, "method", None) == "notifications/resources/updated", since=mark
        )
        assert updated.message["params"]["uri"] == "info://server"
        assert updated.message["params"]["_meta"][SID] == second.request_id
        assert updated.note == f"on subscriptions/listen {second.request_id!r}"
        await session.call_tool("change_tools", {})
        await log.wait_for(
            lambda e: getattr(e, "method", None) == "notifications/tools/list_changed", since=mark
        )

        await session.unsubscribe_resource("info://server")
        assert session.subscribed_uris == []
        mark = len(log.events)
        await session.call_tool("touch", {"uri": "info://server"})
        await session.call_tool("change_tools", {})  # still listened to: proves the stream is live
        await log.wait_for(
            lambda e: getattr(e, "method", None) == "notifications/tools/list_changed", since=mark
        )

    updates = [f.message["params"]["uri"] for f in log.messages("in", "notifications/resources/updated")]
    assert updates == ["info://server"]  # the unsubscribed touch and the other URI never came
    listens = log.messages("out", "subscriptions/listen")
    assert len(listens) == 3
    assert set(listens[0].message["params"]["_meta"]) >= META_KEYS
    # Each stream replaced the one before only once acknowledged; the old one was then closed.
    if target[0] == "stdio":
        cancelled = [f.message["params"]["requestId"] for f in log.messages("out", "notifications/cancelled")]
        assert cancelled[:2] == [first_id, second.request_id]
    else:
        closed = [f for f in log.frames if f.kind == "state" and f.transport.get("state") == "http-cancel"]
        assert len(closed) >= 2
    assert errors(log) == []


async def test_listen_verdicts_on_a_server_that_breaks_the_rules() -> None:
    options = ClientOptions(protocol_version="2026-07-28", timeout=20)
    session = connect(_bad("violations"), options)
    log = EventLog(session)
    async with session:
        honored = await session.listen(["a://b"])
        assert honored["promptsListChanged"] is True  # reported as sent, and flagged below
        ended = await log.wait_for(
            lambda e: (
                isinstance(e, Frame) and e.kind == "state" and e.transport.get("state") == "listen-ended"
            )
        )
        assert "ended by the server (a graceful close)" in (ended.note or "")
        assert session.listens.current is None and session.subscribed_uris == []
    codes = {v.code for f in log.frames for v in f.verdicts}
    assert {
        "ack-not-requested",
        "unrequested-notification",
        "outside-listen",
        "unknown-subscription",
        "duplicate-ack",
    } <= codes
    ack = log.messages("in", "notifications/subscriptions/acknowledged")[0]
    assert "promptsListChanged" in next(v.message for v in ack.verdicts if v.code == "ack-not-requested")
    assert "'extra://sneaked'" in next(v.message for v in ack.verdicts if v.code == "ack-not-requested")


async def test_a_refused_or_silent_listen_fails_clearly_and_keeps_the_session() -> None:
    options = ClientOptions(protocol_version="2026-07-28", timeout=2, listen=True)
    session = connect(_bad("refuse"), options)
    log = EventLog(session)
    async with session:
        failed = await log.wait_for(
            lambda e: (
                isinstance(e, Frame) and e.kind == "state" and e.transport.get("state") == "listen-failed"
            )
        )
        assert "Method not found" in (failed.note or "")
        with pytest.raises(McpError):
            await session.subscribe_resource("a://b")
        assert (await session.call_tool("t", {}))["resultType"] == "complete"

    session = connect(_bad("silent"), ClientOptions(protocol_version="2026-07-28", timeout=0.5))
    log = EventLog(session)
    async with session:
        with pytest.raises(RequestTimeout):
            await session.subscribe_resource("a://b")
        assert session.listens.current is None
        assert (await session.call_tool("t", {}))["resultType"] == "complete"
    cancelled = log.messages("out", "notifications/cancelled")
    assert (
        cancelled
        and cancelled[0].message["params"]["requestId"]
        == log.messages("out", "subscriptions/listen")[0].rpc_id
    )


async def test_listen_belongs_to_the_stateless_revision(everything_stdio: dict) -> None:
    session = connect(
        StdioTarget(everything_stdio["command"], everything_stdio["args"]), ClientOptions(timeout=20)
    )
    async with session:
        with pytest.raises(EngineError, match="stateless revision"):
            await session.listen([])


async def test_auto_mode_falls_back_when_discovery_stays_silent() -> None:
    options = ClientOptions(mode="auto", timeout=20, discover_timeout=0.5)
    session = connect(_bad("discover-silent"), options)
    log = EventLog(session)
    async with session:
        assert session.mode == "handshake" and session.protocol_version == "2025-11-25"
        assert session.server_info["name"] == "bad-stateless"
    note = next(n for n in state_notes(log) if n.startswith("handshake:"))
    assert "server/discover" in note and "falling back to initialize" in note
    # server/discover may not be cancelled: the client just stops waiting.
    assert not log.messages("out", "notifications/cancelled")


# --- Mcp-Param-* headers ---------------------------------------------------------------------------


async def test_tool_arguments_marked_x_mcp_header_travel_as_mcp_param_headers(
    stateless_http_sse: str,
) -> None:
    session = connect(HttpTarget(stateless_http_sse, transport="http"), STATELESS)
    log = EventLog(session)
    async with session:
        # Called before any listing: the engine lists the tools first, or the server would refuse
        # the call (-32020, "Mcp-Param-Count header is missing").
        result = await session.call_tool("routed", {"region": "eu-west", "count": 3})
        assert result["content"][0]["text"] == "eu-west x3"
        result = await session.call_tool("routed", {"region": "Zürich "})
        assert result["content"][0]["text"] == "Zürich  x1"
    assert any("Mcp-Param-* headers" in note for note in state_notes(log))
    assert log.messages("out", "tools/list")[0].seq < log.messages("out", "tools/call")[0].seq
    first, second = (f.transport["http"]["headers"] for f in log.messages("out", "tools/call"))
    assert first["Mcp-Param-Region"] == "eu-west" and first["Mcp-Param-Count"] == "3"
    # Not plain printable ASCII (a non-ASCII letter, a trailing space): base64 in the sentinel.
    assert second["Mcp-Param-Region"] == "=?base64?WsO8cmljaCA=?="
    assert "Mcp-Param-Count" not in second  # an absent argument sends no header
    assert errors(log) == []


async def test_invalid_x_mcp_header_annotations_are_flagged_per_tool() -> None:
    session = connect(_bad("refuse"), STATELESS)
    log = EventLog(session)
    async with session:
        tools = await session.list_all("tools/list", "tools")
        assert len(tools) == 5  # the inspector keeps every tool, flagged
    listing = log.messages("in", "tools/list")[0]
    flagged = [v.message for v in listing.verdicts if v.code == "x-mcp-header"]
    assert len(flagged) == 3, flagged
    assert any("'on-a-number'" in m and "not 'number'" in m for m in flagged)
    assert any("'in-an-array'" in m and "no properties-only path" in m for m in flagged)
    assert any("'twice'" in m and "repeats" in m for m in flagged)
    assert not any("'fine'" in m for m in flagged)


def test_mcp_param_header_rules() -> None:
    from sessions.engine import _xheaders as xh

    schema = {
        "type": "object",
        "properties": {
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "nested": {"type": "object", "properties": {"id": {"type": "integer", "x-mcp-header": "Id"}}},
        },
    }
    assert xh.problem(schema) is None
    mapping = xh.header_map(schema)
    assert mapping == {("flag",): "Flag", ("nested", "id"): "Id"}
    assert xh.param_headers(mapping, {"flag": False, "nested": {"id": 7}}) == {
        "Mcp-Param-Flag": "false",
        "Mcp-Param-Id": "7",
    }
    assert xh.param_headers(mapping, {"flag": None, "nested": "not an object"}) == {}
    assert xh.problem({"type": "object", "x-mcp-header": "Root"}) is not None
    assert xh.problem({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}) is not None
    assert xh.problem({"anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}) is not None
    assert xh.header_value("=?base64?abc?=").startswith("=?base64?")  # a look-alike value is wrapped too
