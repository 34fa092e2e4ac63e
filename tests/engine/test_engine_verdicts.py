"""Conformance verdicts: schema checks against the negotiated revision and the protocol's rules."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.engine import EventLog
from support.paths import REPO, SERVERS

from sessions.engine import ClientCapabilities, ClientOptions, McpError, PendingRequest, StdioTarget, connect
from sessions.engine._sse import SseDecoder

SERVER = StdioTarget(sys.executable, [str(SERVERS / "bad_shapes.py")])


@pytest.mark.slow
async def test_a_result_that_breaks_the_schema_gets_a_schema_verdict() -> None:
    session = connect(SERVER)
    log = EventLog(session)
    async with session:
        result = await session.list_tools()
        assert result == {"tools": [{"name": 42}]}  # the caller still gets what the server sent
    frame = next(f for f in log.messages("in") if f.method == "tools/list")
    schema = [v for v in frame.verdicts if v.code == "schema"]
    assert schema and "tools/list result does not match 2025-11-25" in schema[0].message
    assert "inputSchema" in schema[0].message


@pytest.mark.slow
async def test_without_validation_no_schema_verdicts_are_made() -> None:
    session = connect(SERVER, ClientOptions(validate=False))
    log = EventLog(session)
    async with session:
        await session.list_tools()
    assert "schema" not in log.codes()


@pytest.mark.slow
async def test_backwards_progress_and_an_undeclared_capability_are_flagged() -> None:
    session = connect(SERVER, ClientOptions(capabilities=ClientCapabilities(sampling=False)))
    log = EventLog(session)
    async with session:
        assert (await session.call_tool("t", {}))["content"][0]["text"] == "done"
        answer = await log.wait_for(lambda e: getattr(e, "rpc_id", None) == "s1" and e.direction == "out")
    progress = log.messages("in", "notifications/progress")
    assert "progress-not-increasing" in [v.code for v in progress[1].verdicts]
    assert not progress[0].verdicts
    request = next(f for f in log.messages("in") if f.method == "sampling/createMessage")
    assert "undeclared-capability" in [v.code for v in request.verdicts]
    # Nobody handles sampling without the capability: the server gets method-not-found.
    assert answer.message["error"]["code"] == -32601


@pytest.mark.slow
async def test_errors_from_the_server_raise_mcp_error_with_code_and_data(everything_stdio: dict) -> None:
    async with connect(StdioTarget(everything_stdio["command"], everything_stdio["args"])) as session:
        with pytest.raises(McpError) as failure:
            await session.request("no/such/method")
    assert failure.value.code == -32601


def test_sse_decoder_handles_split_chunks_crlf_comments_ids_and_retry() -> None:
    decoder = SseDecoder()
    stream = (
        b': comment\r\nretry: 250\r\nid: 7\r\nevent: message\r\ndata: {"a":\r\ndata: 1}\r\n\r\ndata: x\n\n'
    )
    events = []
    for i in range(len(stream)):
        events.extend(decoder.feed(stream[i : i + 1]))
    assert [(e.event, e.data, e.id, e.retry) for e in events] == [
        ("message", b'{"a":\n1}', "7", 250),
        ("message", b"x", None, None),
    ]
    assert decoder.last_event_id == "7"


def test_sse_decoder_keeps_invalid_utf8_bytes_and_skips_empty_events() -> None:
    decoder = SseDecoder()
    assert decoder.feed(b"\n\n") == []
    [event] = decoder.feed(b"data: \xff\xfe\n\n")
    assert event.data == b"\xff\xfe"


def bad(server: str, mode: str) -> StdioTarget:
    return StdioTarget(sys.executable, [str(SERVERS / server), mode])


@pytest.mark.slow
async def test_an_elicitation_in_an_undeclared_mode_is_answered_32602_at_once_and_the_call_ends() -> None:
    form_only = ClientCapabilities(elicitation_form=True, elicitation_url=False)
    session = connect(bad("bad_shapes.py", "elicit"), ClientOptions(capabilities=form_only, validate=False))
    log = EventLog(session)
    async with session, asyncio.timeout(15):
        result = await session.call_tool("ask")
    error = json.loads(result["content"][0]["text"])
    assert error["code"] == -32602 and "elicitation mode 'url' was not declared" in error["message"]
    [asked] = log.messages("in", "elicitation/create")
    assert [v.code for v in asked.verdicts] == ["undeclared-capability"]
    assert not [e for e in log.events if isinstance(e, PendingRequest)]


@pytest.mark.slow
async def test_output_schemas_and_undeclared_notifications_are_judged_without_schema_validation() -> None:
    # validate=False: what the CLI does without --record; these rules need no mcp-types.
    session = connect(bad("bad_shapes.py", "outputs"), ClientOptions(validate=False))
    log = EventLog(session)
    async with session:
        await session.list_tools()
        for shape in ("right", "wrong", "missing"):
            await session.call_tool("add", {"shape": shape})
    right, wrong, missing = [[v.code for v in f.verdicts] for f in log.messages("in", "tools/call")]
    assert (right, wrong, missing) == ([], ["output-schema"], ["structured-content"])
    notices = log.messages("in", "notifications/message") + log.messages(
        "in", "notifications/tools/list_changed"
    )
    assert {v.code for f in notices for v in f.verdicts} == {"undeclared-notification"}


@pytest.mark.slow
async def test_a_32022_listing_the_version_asked_for_is_probed_once_more_over_stdio() -> None:
    stateless = ClientOptions(protocol_version="2026-07-28")
    session = connect(bad("bad_version.py", "relist-once"), stateless)
    log = EventLog(session)
    async with session:
        assert session.mode == "stateless" and session.protocol_version == "2026-07-28"
    assert len(log.messages("out", "server/discover")) == 2

    session = connect(bad("bad_version.py", "relist"), stateless)
    log = EventLog(session)
    with pytest.raises(McpError) as refused:
        async with session:
            pass
    assert refused.value.code == -32022 and len(log.messages("out", "server/discover")) == 2

    session = connect(bad("bad_version.py", "relist"), ClientOptions(mode="auto"))
    log = EventLog(session)
    async with session:
        assert session.mode == "handshake" and session.state == "ready"
    assert len(log.messages("out", "server/discover")) == 2


@pytest.mark.slow
def test_the_clis_recording_carries_the_output_schema_verdict(tmp_path: Path) -> None:
    record = tmp_path / "frames.jsonl"
    server = [sys.executable, str(SERVERS / "bad_shapes.py"), "outputs"]
    # The schema comes from a tools/list: a recording CLI lists the tools before it calls one.
    call = [
        "--method",
        "tools/call",
        "--tool-name",
        "add",
        "--tool-arg",
        "shape=wrong",
        "--record",
        str(record),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "inspector", "--cli", *server, *call],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    frames = [json.loads(line) for line in record.read_text().splitlines()]
    results = [f for f in frames if f["method"] == "tools/call" and f["direction"] == "in"]
    assert [v["code"] for f in results for v in f["verdicts"]] == ["output-schema"]
    assert [f["method"] for f in frames if f["direction"] == "out" and f["kind"] == "message"] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ]
