"""Servers that misbehave: the engine records everything, flags it, and stays in control."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.engine import EventLog

from sessions.engine import (
    ClientOptions,
    ConnectionClosed,
    Frame,
    HttpTarget,
    PendingRequest,
    PendingResolved,
    RequestCancelled,
    RequestTimeout,
    SessionExpired,
    StdioTarget,
    connect,
)

pytestmark = pytest.mark.slow

BadStdio = Callable[[str], dict[str, Any]]


def stdio(spec: dict[str, Any], **kwargs: Any) -> StdioTarget:
    return StdioTarget(spec["command"], spec["args"], **kwargs)


async def test_garbage_on_stdout_is_recorded_and_flagged_and_the_call_still_succeeds(
    bad_stdio: BadStdio,
) -> None:
    session = connect(stdio(bad_stdio("garbage")))
    log = EventLog(session)
    async with session:
        tools = await session.list_tools()
        assert tools["tools"][0]["name"] == "t"
    received = log.messages("in")
    not_json = next(f for f in received if f.raw == b"this is not json")
    assert not_json.parse_error and "invalid-json" in [v.code for v in not_json.verdicts]
    bad_utf8 = next(f for f in received if f.raw.startswith(b"\xff\xfe"))
    assert bad_utf8.raw == b"\xff\xfe oops"  # the exact bytes are kept
    assert "invalid-utf8" in [v.code for v in bad_utf8.verdicts]
    assert bad_utf8.to_dict()["raw_encoding"] == "latin-1"
    not_rpc = next(f for f in received if f.raw == b'{"hello":"world"}')
    assert "not-jsonrpc" in [v.code for v in not_rpc.verdicts]


async def test_a_server_that_dies_mid_call_fails_the_call_with_its_exit_code(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("die")))
    log = EventLog(session)
    async with session:
        with pytest.raises(ConnectionClosed) as failure:
            await session.call_tool("t", {})
        assert failure.value.exit_code == 3
        assert "code 3" in str(failure.value)
        assert session.state == "failed"
    stderr = [f.raw for f in log.frames if f.kind == "stderr"]
    assert b"dying" in stderr
    exit_frame = next(f for f in log.frames if f.kind == "exit")
    assert exit_frame.transport["stdio"]["returncode"] == 3
    assert log.frames.index(exit_frame) > log.frames.index(next(f for f in log.frames if f.kind == "stderr"))


async def test_a_hanging_call_times_out_and_is_cancelled_on_the_wire(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("hang")), ClientOptions(timeout=0.3))
    log = EventLog(session)
    async with session:
        with pytest.raises(RequestTimeout):
            await session.call_tool("t", {})
        cancelled = await log.wait_for(
            lambda e: isinstance(e, Frame) and e.method == "notifications/cancelled", timeout=5
        )
        assert "timed out" in cancelled.message["params"]["reason"]
        # The session is still usable after a timeout.
        assert (await session.list_tools())["tools"]


async def test_the_caller_can_cancel_a_request(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("hang")))
    log = EventLog(session)
    async with session:
        handle = await session.start_request("tools/call", {"name": "t", "arguments": {}})
        await handle.cancel("changed my mind")
        with pytest.raises(RequestCancelled):
            await handle
        cancelled = log.messages("out", "notifications/cancelled")[0]
        assert cancelled.message["params"] == {"requestId": handle.id, "reason": "changed my mind"}


async def test_shutdown_escalates_to_sigkill_for_a_server_that_ignores_eof_and_sigterm(
    bad_stdio: BadStdio,
) -> None:
    session = connect(stdio(bad_stdio("hang-ignore-eof"), close_grace=0.2, term_grace=0.2))
    log = EventLog(session)
    async with session:
        pass
    exit_frame = next(f for f in log.frames if f.kind == "exit")
    assert exit_frame.transport["stdio"]["signal"] == "SIGKILL"


async def test_a_flood_of_100000_notifications_is_recorded_completely(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("flood")), ClientOptions(validate=False, timeout=60))
    log = EventLog(session)
    async with session:
        result = await session.call_tool("t", {"count": 100_000})
        assert result["content"][0]["text"] == "flooded 100000"
        # The session answers at once after the flood.
        assert (await session.list_tools())["tools"]
    notes = log.messages("in", "notifications/message")
    assert len(notes) == 100_000
    assert [f.message["params"]["data"]["i"] for f in notes[:3]] == [0, 1, 2]
    assert notes[-1].message["params"]["data"]["i"] == 99_999


async def test_a_50_mb_message_arrives_whole_under_a_raised_limit(bad_stdio: BadStdio) -> None:
    options = ClientOptions(validate=False, timeout=60, max_message_bytes=64 * 1024 * 1024)
    session = connect(stdio(bad_stdio("big")), options)
    log = EventLog(session)
    async with session:
        result = await session.call_tool("t", {"size": 50 * 1024 * 1024})
    assert len(result["content"][0]["text"]) == 50 * 1024 * 1024
    big = max(log.messages("in"), key=lambda f: f.size)
    assert big.size > 50 * 1024 * 1024


async def test_protocol_violations_are_flagged_on_their_frames(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("violations")))
    log = EventLog(session)
    async with session:
        await session.list_tools()
        await log.wait_for(lambda e: isinstance(e, Frame) and e.method == "notifications/progress")
    codes = log.codes()
    for code in ("duplicate-response", "unknown-id", "result-and-error", "notification-with-id"):
        assert code in codes, code
    assert "unknown-progress-token" in codes


async def test_stderr_lines_are_interleaved_in_the_timeline(bad_stdio: BadStdio) -> None:
    session = connect(stdio(bad_stdio("stderr")))
    log = EventLog(session)
    async with session:
        pass
    stderr = [f for f in log.frames if f.kind == "stderr"]
    assert len(stderr) == 4
    assert all(f.direction == "in" and f.raw for f in stderr)


async def test_a_batch_is_taken_apart_and_flagged_outside_2025_03_26(bad_stdio: BadStdio) -> None:
    for version, flagged in (("2025-11-25", True), ("2025-03-26", False)):
        session = connect(stdio(bad_stdio("batch")), ClientOptions(protocol_version=version))
        log = EventLog(session)
        async with session:
            assert (await session.list_tools())["tools"]
        batch = next(f for f in log.messages("in") if f.rpc_kind == "batch")
        assert ("batch" in [v.code for v in batch.verdicts]) is flagged


async def test_a_command_that_does_not_exist_fails_clearly() -> None:
    with pytest.raises(Exception, match="cannot start"):
        async with connect(StdioTarget("/no/such/server-binary")):
            pass


async def test_http_session_expiry_is_reported_and_reinitialize_recovers(
    bad_http: Callable[[str], str],
) -> None:
    for mode, status in (("expire", 404), ("expire400", 400)):
        session = connect(HttpTarget(bad_http(mode), transport="http", open_get_stream=False))
        log = EventLog(session)
        async with session:
            await session.ping()  # the server forgets the session after initialized and this ping
            with pytest.raises(SessionExpired):
                await session.ping()
            assert session.state == "expired"
            head = next(f for f in log.frames if f.kind == "http" and f.transport["http"]["status"] == status)
            assert ("expiry-status" in [v.code for v in head.verdicts]) is (status == 400)
            await session.reinitialize()
            assert session.state == "ready"
            assert await session.ping() > 0


async def test_no_request_goes_out_before_the_server_has_answered_the_standalone_stream(
    bad_http: Callable[[str], str],
) -> None:
    # A server may drop what it sends before the GET stream is open (the TypeScript SDK drops a request
    # it relates to no other): the handshake ends once the server has answered the GET.
    async with connect(HttpTarget(bad_http("late-get"), transport="http")) as session:
        listed = await session.list_tools()
    assert [tool["name"] for tool in listed["tools"]] == ["after-get"]


async def test_a_reply_stream_cut_mid_reply_is_resumed_with_last_event_id(
    bad_http: Callable[[str], str],
) -> None:
    for mode in ("cut", "cut-abort"):
        session = connect(HttpTarget(bad_http(mode), transport="http", open_get_stream=False))
        log = EventLog(session)
        async with session:
            result = await session.call_tool("t", {})
        assert result["content"][0]["text"] == "resumed"
        resume = next(
            f for f in log.frames if f.kind == "http" and f.transport["http"].get("method") == "GET"
        )
        assert resume.transport["http"]["headers"]["Last-Event-ID"].endswith("-1")
        progress = log.messages("in", "notifications/progress")
        assert [f.message["params"]["progress"] for f in progress] == [1, 2]


async def test_plain_json_http_with_202_for_notifications(bad_http: Callable[[str], str]) -> None:
    session = connect(HttpTarget(bad_http("plain"), transport="http"))
    log = EventLog(session)
    async with session:
        result = await session.call_tool("t", {"x": 1})
        assert result["content"][0]["text"].startswith("ok")
    statuses = [f.transport["http"]["status"] for f in log.frames if f.kind == "http" and f.direction == "in"]
    assert 202 in statuses and 405 in statuses  # initialized got 202; the GET stream 405
    assert not [c for c in log.codes() if c != "not-in-revision"]


async def test_an_unreachable_url_fails_fast_with_a_clear_error() -> None:
    started = time.monotonic()
    with pytest.raises(Exception, match="failed"):
        async with connect(HttpTarget("http://127.0.0.1:9/mcp", transport="http", connect_timeout=2)):
            pass
    assert time.monotonic() - started < 10


async def test_the_clock_pauses_while_a_person_is_answering(sdk_stdio: dict[str, Any]) -> None:
    session = connect(stdio(sdk_stdio), ClientOptions(timeout=20))
    log = EventLog(session)
    async with session:
        call = asyncio.ensure_future(
            session.call_tool("ask_llm", {"prompt": "hi"}, timeout=0.5, max_total_timeout=1.0)
        )
        pending = await log.pending("sampling/createMessage")
        # Longer than both timeouts: the waiting person must not make the tool call time out.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(call), 1.5)
        session.respond(
            pending.key,
            {
                "role": "assistant",
                "content": {"type": "text", "text": "ok"},
                "model": "m",
                "stopReason": "endTurn",
            },
        )
        result = await asyncio.wait_for(call, 10)
        assert "m: ok" in str(result)


async def test_a_server_that_cancels_its_own_request_withdraws_the_pending_prompt(
    bad_stdio: BadStdio,
) -> None:
    session = connect(stdio(bad_stdio("withdraw")))
    log = EventLog(session)
    async with session:
        result = await session.call_tool("t", {})
        assert result["content"][0]["text"] == "withdrawn"
        withdrawn = await log.wait_for(lambda e: isinstance(e, PendingResolved) and e.outcome == "withdrawn")
        assert not session.waiting
    pending = next(e for e in log.events if isinstance(e, PendingRequest))
    assert pending.key == withdrawn.key and pending.request_id == "ask-1"
    # Nothing is answered: the server withdrew the request.
    assert not [f for f in log.messages("out") if f.rpc_id == "ask-1"]


async def test_a_missing_program_is_found_missing_before_any_process_is_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    started: list[Any] = []
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def counted(self: Any, args: Any, *rest: Any, **kwargs: Any) -> Any:
        started.append(args)
        return execute_child(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", counted)
    for target in (
        StdioTarget("no-such-server-binary"),
        StdioTarget("./server", cwd=str(tmp_path)),
        StdioTarget("server", env={"PATH": str(tmp_path)}, inherit_env=False),
    ):
        with pytest.raises(Exception, match="cannot start .*: No such file or directory"):
            async with connect(target):
                pass
    assert started == []
    # Found as exec finds it: from the target's folder, or on its own PATH (a relative entry from there).
    server = tmp_path / "server"
    server.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(0)\n")
    server.chmod(0o755)
    for target in (
        StdioTarget("./server", cwd=str(tmp_path)),
        StdioTarget("server", env={"PATH": "."}, inherit_env=False, cwd=str(tmp_path)),
    ):
        with pytest.raises(Exception, match="exited|closed"):
            async with connect(target):
                pass
    assert len(started) == 2
