"""Limits and hangs: one server cannot stall a connection or take the process down.

Fast tests feed the SSE decoder and the stdio reader directly, or script the server
(``ScriptedTransport``, ``mock_http`` on a ``ManualClock``); the rest run real misbehaving servers
(tests/servers/bad_stdio.py, bad_http.py) and the CLI as a process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.engine import EventLog
from support.paths import REPO

from sessions.engine import (
    ClientOptions,
    ClientSession,
    Frame,
    HttpTarget,
    StdioTarget,
    TransportError,
    connect,
)
from sessions.engine._frames import HEAD_BYTES
from sessions.engine._sse import SseDecoder
from sessions.engine._stdio import read_messages
from sessions.engine._streamable import StreamableHttpTransport
from sessions.engine.testing import ManualClock, Recorder, ScriptedTransport, mock_http

MIB = 1024 * 1024
LOG = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}
BadStdio = Callable[[str], dict[str, Any]]
BadHttp = Callable[[str], str]


def codes(frame: Frame) -> list[str]:
    return [v.code for v in frame.verdicts]


def too_large(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if "message-too-large" in codes(f)]


# --- the SSE decoder ------------------------------------------------------------------------------------


def test_the_sse_decoder_is_linear_in_what_it_is_fed() -> None:
    """64 MiB of one data line in 64 KiB chunks: the old decoder copied its whole buffer per chunk."""
    decoder = SseDecoder(limit=128 * MIB)
    chunk = b"x" * (64 * 1024)
    started = time.perf_counter()
    assert decoder.feed(b"data: ") == []
    for _ in range(1024):
        assert decoder.feed(chunk) == []
    [event] = decoder.feed(b"\n\n")
    assert time.perf_counter() - started < 5  # about 0.1 s; quadratic copying took tens of seconds
    assert len(event.data) == 64 * MIB and not event.oversized


def test_an_sse_line_over_the_limit_is_emitted_at_once_as_its_head_and_the_rest_skipped() -> None:
    decoder = SseDecoder(limit=MIB)
    assert decoder.feed(b"id: 7\nevent: message\ndata: ") == []
    [event] = decoder.feed(b"y" * (2 * MIB))  # no newline yet: emitted as soon as the limit is passed
    assert event.oversized and event.data == b"y" * HEAD_BYTES and event.id == "7"
    for _ in range(64):  # the rest of the line, and of the event, is dropped
        assert decoder.feed(b"y" * MIB) == []
    assert decoder._size == 0 and decoder._pieces == []
    assert decoder.feed(b"\ndata: more\n\n") == []  # the oversized event ends here, already emitted
    [after] = decoder.feed(b'id: 8\ndata: {"ok": 1}\n\n')
    assert (after.data, after.id, after.oversized) == (b'{"ok": 1}', "8", False)
    assert decoder.last_event_id == "8"


def test_data_lines_without_a_blank_line_are_bounded_too() -> None:
    decoder = SseDecoder(limit=MIB)
    line = b"data: " + b"z" * 1000 + b"\n"
    events = [e for _ in range(5000) for e in decoder.feed(line)]  # about 5 MB, never a blank line
    [event] = events
    assert event.oversized and len(event.data) == HEAD_BYTES and event.data.startswith(b"z" * 1000 + b"\n")
    assert decoder._data == []
    assert decoder.feed(b"\n") == []
    [after] = decoder.feed(b"data: x\r\n\r\n")
    assert after.data == b"x"


def test_a_comment_over_the_limit_is_skipped_silently() -> None:
    decoder = SseDecoder(limit=1000)
    assert decoder.feed(b":" + b"c" * 5000 + b"\r") == []
    [event] = decoder.feed(b"\ndata: after\n\n")  # the LF after the CR belongs to it
    assert event.data == b"after"


# --- the stdio reader ------------------------------------------------------------------------------------


def scripted(**fields: Any) -> tuple[ClientSession, Recorder]:
    session = ClientSession(ScriptedTransport(), ClientOptions(validate=False, clock=ManualClock(), **fields))
    return session, Recorder(session)


async def test_a_stdout_line_over_the_limit_is_recorded_as_its_head_and_reading_goes_on() -> None:
    session, recorder = scripted(max_message_bytes=MIB)
    stdout = asyncio.StreamReader()
    reading = asyncio.ensure_future(read_messages(stdout, session))
    stdout.feed_data(b'{"jsonrpc": "2.0", "method": "x", "params": {"data": "')
    for _ in range(3):
        stdout.feed_data(b"a" * MIB)
    big = await recorder.frame(lambda f: f.kind == "message")  # recorded before the line ends
    assert codes(big) == ["message-too-large"] and big.size == HEAD_BYTES and big.parse_error
    for _ in range(8):
        stdout.feed_data(b"a" * MIB)
    stdout.feed_data(b'"}}\n' + json.dumps(LOG).encode() + b"\n" + b"b" * (2 * MIB) + b"\n")
    stdout.feed_eof()
    await reading
    first, log, second = [f for f in recorder.frames if f.kind == "message"]
    assert first is big and log.message == LOG and codes(log) == []
    assert codes(second) == ["message-too-large"] and second.raw == b"b" * HEAD_BYTES


async def test_a_line_exactly_at_the_limit_is_a_message() -> None:
    line = json.dumps(LOG).encode()
    session, recorder = scripted(max_message_bytes=len(line))
    stdout = asyncio.StreamReader()
    stdout.feed_data(line + b"\n" + line + b" \n")
    stdout.feed_eof()
    await read_messages(stdout, session)
    at, over = [f for f in recorder.frames if f.kind == "message"]
    assert at.message == LOG and codes(at) == [] and codes(over) == ["message-too-large"]


# --- what a message may be ---------------------------------------------------------------------------------


async def test_a_deeply_nested_message_is_flagged_and_the_session_goes_on() -> None:
    server = ScriptedTransport(handshake=True)
    async with ClientSession(server, ClientOptions(validate=False, clock=ManualClock())) as session:
        deep = b'{"jsonrpc":"2.0","method":"x","params":{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
        frame = server.server_sends(deep)
        assert codes(frame) == ["too-deep"] and frame.parse_error and frame.message is None
        handle = await session.start_request("tools/list")
        sent = await server.next_sent("tools/list")
        server.answer(sent, {"tools": []})
        assert await handle == {"tools": []}


async def test_utf8_that_encodes_a_surrogate_is_flagged_invalid_utf8() -> None:
    server = ScriptedTransport(handshake={"capabilities": {"logging": {}}})
    async with ClientSession(server, ClientOptions(validate=False, clock=ManualClock())):
        surrogate = server.server_sends(
            b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\xed\xa0\x80"}}'
        )
        fine = server.server_sends(json.dumps(LOG, ensure_ascii=False).encode())
        with_bom = server.server_sends(b"\xef\xbb\xbf" + json.dumps(LOG).encode())
    assert codes(surrogate) == ["invalid-utf8"] and surrogate.message is None
    assert codes(fine) == [] and codes(with_bom) == [] and with_bom.message == LOG


# --- Streamable HTTP: reconnection (SEP-1699) on a manual clock --------------------------------------------

URL = "http://mcp.test/mcp"


def reconnecting_server(post_stream: bytes, get_streams: list[bytes]) -> tuple[Any, list[httpx.Request]]:
    """tools/call is answered with ``post_stream`` (which ends); each GET with the next of ``get_streams``."""
    gets: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            gets.append(request)
            if not get_streams:
                return httpx.Response(405)
            return httpx.Response(
                200, content=get_streams.pop(0), headers={"content-type": "text/event-stream"}
            )
        if request.method == "DELETE":
            return httpx.Response(204)
        body = json.loads(request.content)
        if "id" not in body:
            return httpx.Response(202)
        if body["method"] == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "r"},
            }
            reply = {"jsonrpc": "2.0", "id": body["id"], "result": result}
            return httpx.Response(200, json=reply, headers={"Mcp-Session-Id": "s1"})
        return httpx.Response(200, content=post_stream, headers={"content-type": "text/event-stream"})

    return handler, gets


def response_event(event_id: str, request_id: int) -> bytes:
    reply = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "resumed"}]}}
    return f"id: {event_id}\ndata: {json.dumps(reply)}\n\n".encode()


def http_session(handler: Any, clock: ManualClock, **fields: Any) -> tuple[ClientSession, Recorder]:
    target = HttpTarget(URL, transport="http", open_get_stream=False)
    transport = StreamableHttpTransport(target, client_factory=mock_http(handler))
    session = ClientSession(transport, ClientOptions(validate=False, clock=clock, timeout=None, **fields))
    return session, Recorder(session)


async def test_a_reply_stream_that_ends_early_is_resumed_after_its_retry_with_last_event_id() -> None:
    clock = ManualClock()
    handler, gets = reconnecting_server(b"id: e1\nretry: 500\ndata: \n\n", [response_event("e2", 1)])
    session, _ = http_session(handler, clock)
    async with session:
        call = asyncio.ensure_future(session.call_tool("t"))
        await clock.wait_until(lambda armed: clock.now() + 0.5 in armed)
        assert gets == [] and not call.done()  # it waits the server's retry: 500 ms, not less
        clock.advance(0.5)
        result = await asyncio.wait_for(call, 5)
    assert result["content"][0]["text"] == "resumed"
    [get] = gets
    assert get.headers["Last-Event-ID"] == "e1" and get.headers["Mcp-Session-Id"] == "s1"


async def test_reconnections_back_off_without_retry_and_give_up_after_max_reconnects() -> None:
    clock = ManualClock()
    handler, gets = reconnecting_server(b"id: e1\ndata: \n\n", [])  # every GET: 405
    session, _ = http_session(handler, clock, max_reconnects=2, reconnect_delay=1.0)
    async with session:
        call = asyncio.ensure_future(session.call_tool("t"))
        for attempt, delay in enumerate((1.0, 2.0), start=1):
            await clock.wait_until(lambda armed, d=delay: clock.now() + d in armed)
            assert len(gets) == attempt - 1
            clock.advance(delay)
        with pytest.raises(TransportError, match="ended too often"):
            await asyncio.wait_for(call, 5)
    assert len(gets) == 2 and all(g.headers["Last-Event-ID"] == "e1" for g in gets)


async def test_max_reconnects_0_fails_at_once() -> None:
    handler, gets = reconnecting_server(b"id: e1\nretry: 10\ndata: \n\n", [response_event("e2", 1)])
    session, _ = http_session(handler, ManualClock(), max_reconnects=0)
    async with session:
        with pytest.raises(TransportError, match="ended too often"):
            await asyncio.wait_for(session.call_tool("t"), 5)
    assert gets == []


# --- real servers -------------------------------------------------------------------------------------------


def stdio(spec: dict[str, Any]) -> StdioTarget:
    return StdioTarget(spec["command"], spec["args"])


@pytest.mark.slow
async def test_a_server_that_holds_its_initialize_stream_open_does_not_hold_up_the_session(
    bad_http: BadHttp,
) -> None:
    url = bad_http("hold")
    session = connect(HttpTarget(url, transport="http"), ClientOptions(validate=False))
    log = EventLog(session)
    async with asyncio.timeout(10):  # the server holds the stream for 45 s
        async with session:
            assert (await session.list_tools())["tools"][0]["name"] == "t"
    initialized = log.messages("out", "notifications/initialized")
    assert initialized and session.state == "closed"
    async with httpx.AsyncClient() as client:  # the held stream was closed with the session
        held = await client.get(url.replace("/mcp", "/held"), timeout=15)
    assert held.json() == {"held": 0}


@pytest.mark.slow
def test_the_cli_is_not_held_up_by_a_held_stream(bad_http: BadHttp) -> None:
    url = bad_http("hold")
    started = time.monotonic()
    proc = run_cli(url, "--method", "tools/list")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["tools"][0]["name"] == "t"
    assert time.monotonic() - started < 10


@pytest.mark.slow
async def test_a_64_mib_stdout_line_costs_no_more_than_the_limit(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("endless-line")), ClientOptions(validate=False, max_message_bytes=MIB))
    log = EventLog(session)
    async with session:
        tracemalloc.start()
        try:
            result = await session.call_tool("t", {"size": 64 * MIB})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert result["content"][0]["text"] == "after endless line"
        assert (await session.list_tools())["tools"]
    [big] = too_large(log.messages("in"))
    assert big.raw == b"x" * HEAD_BYTES
    assert peak < 16 * MIB, peak  # the line was 64 MiB; the reader kept at most the limit and a chunk


@pytest.mark.slow
async def test_a_100000_deep_message_from_a_real_server_is_flagged_and_the_session_goes_on(
    bad_stdio: BadStdio,
) -> None:
    session = connect(stdio(bad_stdio("deep")), ClientOptions(validate=True))
    log = EventLog(session)
    async with session:
        result = await session.call_tool("t", {"depth": 100_000})
        assert result["content"][0]["text"] == "after deep"
        assert (await session.list_tools())["tools"]
    [deep] = [f for f in log.messages("in") if "too-deep" in codes(f)]
    assert deep.size > 200_000 and session.exit_code is not None


@pytest.mark.slow
async def test_an_oversized_json_reply_fails_its_request_and_the_session_goes_on(bad_http: BadHttp) -> None:
    session = connect(
        HttpTarget(bad_http("big-json"), transport="http"),
        ClientOptions(validate=False, max_message_bytes=MIB),
    )
    log = EventLog(session)
    async with session:
        with pytest.raises(TransportError, match=f"larger than {MIB} bytes"):
            await session.call_tool("t", {"size": 8 * MIB})
        assert (await session.list_tools())["tools"]
    [big] = too_large(log.messages("in"))
    assert big.size == HEAD_BYTES and big.raw.startswith(b'{"jsonrpc": "2.0"')


@pytest.mark.slow
async def test_an_oversized_sse_event_is_recorded_as_its_head_and_the_response_after_it_arrives(
    bad_http: BadHttp,
) -> None:
    session = connect(
        HttpTarget(bad_http("big-sse"), transport="http"),
        ClientOptions(validate=False, max_message_bytes=MIB),
    )
    log = EventLog(session)
    async with session:
        one_line = await session.call_tool("t", {"size": 8 * MIB})
        many_lines = await session.call_tool("t", {"size": 8 * MIB, "line": 1000})
    assert one_line["content"][0]["text"] == many_lines["content"][0]["text"] == "after big"
    first, second = too_large(log.messages("in"))
    assert first.raw == b"x" * HEAD_BYTES and first.transport["http"]["stream"].startswith("POST")
    assert second.size == HEAD_BYTES and second.raw.startswith(b"x" * 1000 + b"\n")


# --- the CLI: reconnection --------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector", "--cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.slow
def test_the_cli_resumes_a_dropped_reply_stream_unless_told_not_to(bad_http: BadHttp) -> None:
    call = ("--method", "tools/call", "--tool-name", "t")
    resumed = run_cli(bad_http("cut"), *call)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["content"][0]["text"] == "resumed"
    refused = run_cli(bad_http("cut"), *call, "--max-reconnects", "0")
    assert refused.returncode != 0 and "ended too often" in refused.stderr
    negative = run_cli(bad_http("cut"), *call, "--max-reconnects", "-1")
    assert negative.returncode == 2 and "--max-reconnects" in negative.stderr


@pytest.mark.slow
def test_the_cli_takes_max_message_bytes_and_records_the_head_with_its_verdict(
    bad_stdio: BadStdio, tmp_path: Path
) -> None:
    server = bad_stdio("endless-line")
    record = tmp_path / "frames.jsonl"
    proc = run_cli(
        server["command"], *server["args"], "--max-message-bytes", "4096", "--record", str(record),
        "--method", "tools/call", "--tool-name", "t", "--tool-arg", "size=100000",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"][0]["text"] == "after endless line"
    frames = [json.loads(line) for line in record.read_text().splitlines()]
    [big] = [f for f in frames if any(v["code"] == "message-too-large" for v in f["verdicts"])]
    assert len(big["raw"]) == HEAD_BYTES
    # Without the option, the default (256 MiB in the CLI) takes the same line whole.
    proc = run_cli(
        server["command"], *server["args"], "--record", str(record),
        "--method", "tools/call", "--tool-name", "t", "--tool-arg", "size=100000",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    codes = [v["code"] for f in map(json.loads, record.read_text().splitlines()) for v in f["verdicts"]]
    assert codes == ["invalid-json"]  # the x's are whole, and no JSON


def test_the_app_passes_its_max_message_bytes_to_every_session() -> None:
    from sessions.servers import build_options

    assert build_options({}, max_message_bytes=5000).max_message_bytes == 5000
    assert build_options({}).max_message_bytes == 16 * MIB
