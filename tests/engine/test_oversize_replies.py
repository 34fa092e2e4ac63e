"""A reply over ``max_message_bytes`` fails its request at once, with an error that names the limit and
how to raise it, instead of leaving it to time out: its id read from the head kept of it, or, written
last, from the end of a stdout line (sessions/engine/_oversize.py).

Fast tests read heads and ends directly, feed the stdio reader, or script an HTTP server; the slow
ones run tests/servers/bad_stdio.py and the CLI as processes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from support.paths import REPO

from sessions.engine import (
    ClientOptions,
    ClientSession,
    HttpTarget,
    MessageTooLarge,
    RequestHandle,
    StdioTarget,
    connect,
)
from sessions.engine._oversize import reply_id_at_end, reply_in_head
from sessions.engine._stdio import read_messages
from sessions.engine._streamable import StreamableHttpTransport
from sessions.engine.testing import ManualClock, ScriptedTransport, mock_http

MIB = 1024 * 1024
BadStdio = Callable[[str], dict[str, Any]]
BIG = {"content": [{"type": "text", "text": "x" * (2 * MIB)}]}


def python_order(request_id: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": BIG}).encode()


def typescript_order(request_id: Any) -> bytes:
    return json.dumps({"result": BIG, "jsonrpc": "2.0", "id": request_id}).encode()


# --- reading the bytes kept ---------------------------------------------------------------------------

NO = (False, None)


@pytest.mark.parametrize(
    ("head", "shown"),
    [
        (python_order(7)[:4096], (True, 7)),
        (python_order("call-7")[:4096], (True, "call-7")),
        (typescript_order(7)[:4096], (True, None)),  # a reply; its id is at the end
        (b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"' + b"e" * 5000, (True, 3)),
        (b' {"jsonrpc" : "2.0" , "id" : 12 , "result" : {"a": [1, {"b": "' + b"y" * 5000, (True, 12)),
        # Not plainly a reply: left alone.
        (b'{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"m":"' + b"p" * 5000, NO),
        (b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + b"n" * 5000, NO),
        (b'[{"jsonrpc":"2.0","id":1,"result":{"a":"' + b"b" * 5000, NO),  # a batch
        (b"x" * 4096, NO),
        (b'{"id":true,"result":1' + b" " * 4000, (True, None)),  # no id a client sends
        (b'{"id":' + b"[" * 4000, NO),  # nested past the parser's depth
        (b'{"result":{"a":"\xe2\x82', (True, None)),  # cut inside a character
    ],
)
def test_the_head_shows_whether_a_message_is_a_reply_and_its_id_when_written_first(
    head: bytes, shown: tuple[bool, Any]
) -> None:
    assert reply_in_head(head) == shown


@pytest.mark.parametrize(
    ("tail", "found"),
    [
        (typescript_order(7)[-4096:], 7),
        (typescript_order("abc")[-4096:] + b"\r", "abc"),
        (b'x"}]}, "jsonrpc": "2.0", "id": 4}', 4),
        (b'x"}]}, "id": 4, "jsonrpc": "2.0"}', 4),
        (b'"text": "q\\", \\"id\\": 9}"}]}, "id": 4}', 4),  # an "id" inside a string is skipped
        (python_order(7)[-4096:], None),  # written first: not at the end
        (b'a": {"id": 5}}', None),  # a nested object's id
        (b'a": {"id": 5}, "jsonrpc": "2.0"}', None),
        (b'"id": 5', None),  # not the end of an object
        (b"[" * 4000 + b'"id": 1}', None),
    ],
)
def test_the_end_of_a_reply_holds_its_id_when_written_last(tail: bytes, found: Any) -> None:
    assert reply_id_at_end(tail) == found


# --- the stdio reader --------------------------------------------------------------------------------------


async def pending_call(session: ClientSession) -> RequestHandle:
    handle = await session.start_request("tools/call", {"name": "t"}, timeout=60)
    assert not handle.done
    return handle


async def failure(handle: RequestHandle) -> MessageTooLarge:
    with pytest.raises(MessageTooLarge) as caught:
        await asyncio.wait_for(handle, 1)
    return caught.value


def scripted(limit: int = MIB) -> ClientSession:
    options = ClientOptions(validate=False, clock=ManualClock(), max_message_bytes=limit)
    options.max_message_bytes_name = "--max-message-bytes"
    return ClientSession(ScriptedTransport(handshake=True), options)


async def test_a_stdout_reply_over_the_limit_fails_its_call_at_once_before_the_line_ends() -> None:
    async with scripted() as session:
        handle = await pending_call(session)
        stdout = asyncio.StreamReader()
        reading = asyncio.ensure_future(read_messages(stdout, session))
        line = python_order(handle.id)
        stdout.feed_data(line[: MIB + 10])  # the rest of the line has not come
        error = await failure(handle)
        assert str(error) == (
            f"the reply is larger than {MIB} bytes (1 MiB), the largest message this client takes in; "
            "raise the limit with --max-message-bytes"
        )
        # What was kept of it answers the request: a card links to it.
        assert error.frame is not None and handle.leg.reply is error.frame
        assert error.frame.raw == line[:4096] and handle.leg.reply_seq == error.frame.seq
        stdout.feed_data(line[MIB + 10 :] + b"\n")
        stdout.feed_eof()
        await reading


async def test_a_stdout_reply_with_its_id_written_last_fails_its_call_when_the_line_ends() -> None:
    async with scripted() as session:
        handle, other = await pending_call(session), await pending_call(session)
        stdout = asyncio.StreamReader()
        reading = asyncio.ensure_future(read_messages(stdout, session))
        line = typescript_order(handle.id)
        for start in range(0, len(line), 300_000):
            stdout.feed_data(line[start : start + 300_000])
            await asyncio.sleep(0)  # the reader takes each piece as it comes
        assert not handle.done  # its id is not known yet
        stdout.feed_data(b"\r\n")
        await failure(handle)
        assert not other.done
        stdout.feed_eof()
        await reading


async def test_a_whole_line_over_the_limit_in_one_piece_fails_its_call_too() -> None:
    async with scripted(limit=100_000) as session:
        handle = await pending_call(session)
        stdout = asyncio.StreamReader()
        stdout.feed_data(typescript_order(handle.id) + b"\n")
        stdout.feed_eof()
        await read_messages(stdout, session)
        await failure(handle)


async def test_a_notification_or_another_request_over_the_limit_fails_no_call() -> None:
    async with scripted() as session:
        handle = await pending_call(session)
        stdout = asyncio.StreamReader()
        big = "n" * (2 * MIB)
        note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": big, "id": handle.id}}
        ask = {"jsonrpc": "2.0", "id": handle.id, "method": "sampling/createMessage", "params": {"m": big}}
        stdout.feed_data(json.dumps(note).encode() + b"\n" + json.dumps(ask).encode() + b"\n")
        stdout.feed_eof()
        await read_messages(stdout, session)
        assert not handle.done


# --- Streamable HTTP ---------------------------------------------------------------------------------------


async def test_an_sse_reply_over_the_limit_fails_its_post_s_call_while_the_stream_stays_open() -> None:
    """The TypeScript SDK's order, on the POST's own stream: the one request it carried is answered."""
    held = asyncio.Event()

    async def stream(request_id: int) -> AsyncIterator[bytes]:
        yield b"id: e1\ndata: " + typescript_order(request_id) + b"\n\n"
        await held.wait()  # the server holds the stream open

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        if request.method != "POST" or "id" not in body:
            return httpx.Response(202 if request.method == "POST" else 405)
        if body["method"] == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "s"}}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})
        return httpx.Response(200, content=stream(body["id"]), headers={"content-type": "text/event-stream"})

    target = HttpTarget("http://mcp.test/mcp", transport="http", open_get_stream=False)
    transport = StreamableHttpTransport(target, client_factory=mock_http(handler))
    options = ClientOptions(validate=False, clock=ManualClock(), max_message_bytes=MIB)
    async with ClientSession(transport, options) as session:
        handle = await pending_call(session)
        error = await failure(handle)
        assert "raise the limit with max_message_bytes" in str(error)  # the engine's own name by default
        assert not held.is_set()
        held.set()


# --- real servers --------------------------------------------------------------------------------------


def stdio(spec: dict[str, Any]) -> StdioTarget:
    return StdioTarget(spec["command"], spec["args"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["big", "big-id-last"])
async def test_a_real_server_s_reply_over_the_limit_fails_its_call_within_a_second(
    bad_stdio: BadStdio, mode: str
) -> None:
    session = connect(stdio(bad_stdio(mode)), ClientOptions(validate=False, max_message_bytes=MIB))
    async with session:
        started = time.monotonic()
        with pytest.raises(MessageTooLarge, match=f"larger than {MIB} bytes"):
            await session.call_tool("t", {"size": 8 * MIB})
        took = time.monotonic() - started
        assert took < 1.0, took
        assert (await session.list_tools())["tools"]  # the session goes on


def run_cli(*args: str) -> tuple[subprocess.CompletedProcess[bytes], float]:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "inspector", "--cli", *args], cwd=REPO, capture_output=True, timeout=60
    )
    return proc, time.monotonic() - started


@pytest.mark.slow
def test_the_cli_prints_a_50_mb_result_whole_and_fails_one_over_max_message_bytes_at_once(
    bad_stdio: BadStdio,
) -> None:
    server = bad_stdio("big")
    call = ("--method", "tools/call", "--tool-name", "t", "--tool-arg", f"size={50 * 1000 * 1000}")
    proc, took = run_cli(server["command"], *server["args"], *call)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert len(json.loads(proc.stdout)["content"][0]["text"]) == 50 * 1000 * 1000
    print(f"\n50 MB result printed in {took:.2f} s")
    for mode in ("big", "big-id-last"):
        server = bad_stdio(mode)
        proc, took = run_cli(server["command"], *server["args"], *call, "--max-message-bytes", str(MIB))
        assert proc.returncode == 1 and proc.stdout == b""
        assert proc.stderr.decode() == (
            f"error: tools/call failed: the reply is larger than {MIB} bytes (1 MiB), the largest message "
            "this client takes in; raise the limit with --max-message-bytes\n"
        )
        print(f"{mode}: failed in {took:.2f} s (the whole CLI run)")
        assert took < 10, took  # not the 60 s time-out; the call itself is timed in the test above
