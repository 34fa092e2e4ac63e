"""Request timeouts on a manual clock: idle and total limits, progress, pauses for a person, late answers.

Time moves only when a test calls ``ManualClock.advance``; nothing here waits in real time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessions.engine import ClientOptions, ClientSession, RequestHandle, RequestTimeout
from sessions.engine._clock import LoopClock
from sessions.engine.testing import ManualClock, Recorder, ScriptedTransport, Sent

WAIT = 2.0  # real seconds a test waits for something that should happen at once


@contextlib.asynccontextmanager
async def connected(**fields: Any) -> AsyncIterator[tuple[ClientSession, ScriptedTransport, ManualClock]]:
    """A ready session over a scripted server, on a manual clock (timeout 10 s unless told)."""
    clock = ManualClock()
    fields.setdefault("timeout", 10.0)
    fields.setdefault("max_total_timeout", None)
    server = ScriptedTransport(handshake=True)
    async with ClientSession(server, ClientOptions(validate=False, clock=clock, **fields)) as session:
        yield session, server, clock


async def slow_call(session: ClientSession, server: ScriptedTransport) -> tuple[RequestHandle, Sent]:
    """Start a tools/call (which carries a progress token); return its handle and what the server got."""
    handle = await session.start_request("tools/call", {"name": "slow", "arguments": {}})
    return handle, await server.next_sent("tools/call")


def progress(sent: Sent, value: float) -> dict[str, Any]:
    token = sent.params["_meta"]["progressToken"]
    params = {"progressToken": token, "progress": value}
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


async def times_out(handle: RequestHandle) -> RequestTimeout:
    with pytest.raises(RequestTimeout) as failure:
        async with asyncio.timeout(WAIT):
            await handle
    return failure.value


async def test_a_session_without_a_clock_uses_the_event_loops() -> None:
    session = ClientSession(ScriptedTransport())
    assert isinstance(session.clock, LoopClock)
    assert abs(session.clock.now() - asyncio.get_running_loop().time()) < 1.0


async def test_a_request_times_out_after_its_idle_timeout_and_the_server_is_told() -> None:
    async with connected() as (session, server, clock):
        handle, sent = await slow_call(session, server)
        assert clock.advance(9.5) == 0 and not handle.done
        assert clock.advance(0.5) == 1
        error = await times_out(handle)
        cancelled = await server.next_sent("notifications/cancelled")
    assert str(error) == "tools/call timed out (time, 10 s)"
    assert cancelled.params == {"requestId": sent.id, "reason": "timed out (time, 10 s)"}


async def test_a_per_call_timeout_overrides_the_sessions() -> None:
    async with connected() as (session, server, clock):
        handle = await session.start_request("tools/list", timeout=2.0)
        unlimited = await session.start_request("tools/list", timeout=None)
        clock.advance(2.0)
        await times_out(handle)
        assert clock.armed == [] and not unlimited.done


async def test_an_answered_request_leaves_no_timer_behind() -> None:
    async with connected() as (session, server, clock):
        handle, sent = await slow_call(session, server)
        assert clock.armed == [clock.now() + 10.0]
        server.answer(sent, {"content": []})
        assert await handle == {"content": []}
        assert clock.armed == []


async def test_progress_restarts_the_idle_timeout() -> None:
    async with connected() as (session, server, clock):
        handle, sent = await slow_call(session, server)
        clock.advance(8.0)
        server.server_sends(progress(sent, 1))
        assert clock.advance(9.5) == 0  # 17.5 s since the call, 9.5 s since the progress
        server.server_sends(progress(sent, 2))
        assert clock.advance(9.5) == 0
        assert clock.advance(0.5) == 1
        await times_out(handle)


async def test_progress_does_not_restart_the_clock_when_the_session_says_not_to() -> None:
    async with connected(reset_timeout_on_progress=False) as (session, server, clock):
        handle, sent = await slow_call(session, server)
        clock.advance(8.0)
        server.server_sends(progress(sent, 1))
        assert clock.advance(2.0) == 1
        await times_out(handle)


async def test_the_maximum_total_timeout_ends_a_request_that_progress_keeps_alive() -> None:
    async with connected(max_total_timeout=25.0) as (session, server, clock):
        handle, sent = await slow_call(session, server)
        for step in range(1, 4):
            assert clock.advance(8.0) == 0
            server.server_sends(progress(sent, step))  # idle clock restarts at 8, 16, 24 s
        assert clock.advance(1.0) == 1  # 25 s in all
        error = await times_out(handle)
        cancelled = await server.next_sent("notifications/cancelled")
    assert str(error) == "tools/call timed out (its maximum total time)"
    assert cancelled.params["reason"] == "timed out (its maximum total time)"


async def test_clocks_stand_still_while_a_person_answers_sampling() -> None:
    async with connected() as (session, server, clock):
        recorder = Recorder(session)
        handle, sent = await slow_call(session, server)
        clock.advance(6.0)
        server.server_sends({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}})
        pending = await recorder.pending("sampling/createMessage")
        assert clock.armed == []  # every clock stopped
        started_while_waiting = await session.start_request("tools/list")
        await server.next_sent("tools/list")
        assert clock.advance(3600.0) == 0 and not handle.done and not started_while_waiting.done

        session.respond(pending.key, {"role": "assistant", "content": {"type": "text", "text": "ok"}})
        answer = await server.next_sent()
        assert answer.message["id"] == "s1" and "result" in answer.message
        assert clock.armed == [clock.now() + 4.0, clock.now() + 10.0]  # 4 s left; a fresh 10 s
        assert clock.advance(3.5) == 0
        assert clock.advance(0.5) == 1
        await times_out(handle)
        assert not started_while_waiting.done


async def test_a_withdrawn_question_starts_the_clocks_again() -> None:
    async with connected() as (session, server, clock):
        recorder = Recorder(session)
        handle, _ = await slow_call(session, server)
        server.server_sends({"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": {}})
        await recorder.pending("elicitation/create")
        assert clock.armed == []
        server.server_sends(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}}
        )
        await recorder.wait_for(lambda e: getattr(e, "outcome", None) == "withdrawn", timeout=WAIT)
        assert clock.armed == [clock.now() + 10.0]
        clock.advance(10.0)
        await times_out(handle)


async def test_a_response_after_the_timeout_is_flagged_late_response() -> None:
    async with connected() as (session, server, clock):
        handle, sent = await slow_call(session, server)
        clock.advance(10.0)
        await times_out(handle)
        late = server.answer(sent, {"content": []})
        on_time_handle, on_time_sent = await slow_call(session, server)
        on_time = server.answer(on_time_sent, {"content": []})
        assert await on_time_handle == {"content": []}
    assert [(v.code, v.severity) for v in late.verdicts] == [("late-response", "info")]
    assert late.note == "late response to a request that was timed out"
    assert on_time.verdicts == []


async def test_an_unacknowledged_listen_times_out_on_the_session_clock() -> None:
    server = ScriptedTransport(handshake={"capabilities": {"tools": {}}})
    clock = ManualClock()
    options = ClientOptions(protocol_version="2026-07-28", validate=False, clock=clock, timeout=5.0)
    async with ClientSession(server, options) as session:
        listen = asyncio.create_task(session.listen([]))
        await server.next_sent("subscriptions/listen")
        assert clock.advance(4.5) == 0 and not listen.done()
        assert clock.advance(0.5) == 1
        with pytest.raises(RequestTimeout, match="not acknowledged within 5 s"):
            async with asyncio.timeout(WAIT):
                await listen
        assert session.listens.current is None


async def test_input_required_polling_waits_on_the_session_clock() -> None:
    server = ScriptedTransport(handshake=True)
    clock = ManualClock()
    options = ClientOptions(protocol_version="2026-07-28", validate=False, clock=clock)
    async with ClientSession(server, options) as session:
        handle, first = await slow_call(session, server)
        server.answer(first, {"resultType": "input_required", "requestState": "working"})
        await clock.wait_until(lambda armed: armed == [clock.now() + 0.05])  # the poll, nothing else
        assert clock.advance(0.05) == 1
        retry = await server.next_sent("tools/call")
        assert retry.params["requestState"] == "working"
        server.answer(retry, {"resultType": "complete", "content": []})
        assert await handle == {"resultType": "complete", "content": []}
