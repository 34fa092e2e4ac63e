"""Stopping the process with live sessions, and what makes it fast without losing anything: the
runtime's database thread taking queued calls in one turn, the end of each session in one write."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import threading
from typing import Any

import pytest
from support.teams import ateam_of
from support.web import http_config, live_runtime, make_user, wait_until

from sessions.engine import _streamable
from sessions.models import McpSession, TimelineFrame
from sessions.runtime import client
from sessions.runtime.host import stop_embedded_runtime
from sessions.runtime.store import in_db_thread

LIVE = 12


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_stopping_closes_every_live_http_session_with_its_delete_and_its_ending_recorded(
    bad_http: Any,
) -> None:
    url = bad_http("expire")
    user = await make_user()
    team = await ateam_of(user)
    async with live_runtime():
        sessions = [
            await McpSession.objects.acreate(owner=user, team=team, name="s", config=http_config(url))
            for _ in range(LIVE)
        ]
        for session in sessions:
            await client.start_session(session)
        pks = [s.pk for s in sessions]
        await wait_until(
            lambda: McpSession.objects.filter(pk__in=pks, status="ready").count() == LIVE, what="all ready"
        )
        await stop_embedded_runtime("the inspector stopped")
        assert gc.isenabled()  # the collector waited for the stop only

    def ended() -> list[tuple[McpSession, list[TimelineFrame]]]:
        rows = McpSession.objects.filter(pk__in=pks).order_by("pk")
        return [(row, list(TimelineFrame.objects.filter(session=row).order_by("seq"))) for row in rows]

    for row, frames in await asyncio.to_thread(ended):
        assert (row.status, row.status_note, row.worker_channel) == ("closed", "the inspector stopped", "")
        assert [f.seq for f in frames] == list(range(1, row.last_seq + 1))  # every frame, in order, none lost
        delete = next(f for f in frames if f.kind == "http" and f.transport["http"].get("method") == "DELETE")
        answer = next(f for f in frames if f.transport.get("http", {}).get("request_seq") == delete.seq)
        assert answer.transport["http"]["status"] == 200
        # The ending's phases came with the session's end, in its one write (closed was often lost).
        assert [p["state"] for p in row.phases][-2:] == ["closing", "closed"]
        assert [p["state"] for p in row.phases].count("ready") == 1


@pytest.mark.django_db(transaction=True)  # the thread's connection, kept from earlier tests, is checked
async def test_database_calls_queued_while_the_thread_is_busy_run_in_order_each_alone() -> None:
    gate = threading.Event()
    ran: list[Any] = []

    @in_db_thread
    def hold() -> str:
        if not gate.wait(10):
            raise TimeoutError("the test never opened the gate")
        return "held"

    @in_db_thread
    def note(value: Any) -> Any:
        ran.append(value)
        return value

    @in_db_thread
    def refuse() -> None:
        raise ValueError("refused")

    held = asyncio.ensure_future(hold())
    first = asyncio.ensure_future(note(1))
    refused = asyncio.ensure_future(refuse())
    given_up = asyncio.ensure_future(note("given up"))
    last = asyncio.ensure_future(note(2))
    for _ in range(3):  # each task starts and queues its call; the thread is still held by the first
        await asyncio.sleep(0)
    given_up.cancel()
    gate.set()
    async with asyncio.timeout(10):
        assert await held == "held"
        assert await first == 1
        with pytest.raises(ValueError, match="refused"):
            await refused  # its caller alone hears of it
        assert await last == 2
    assert given_up.cancelled()
    assert ran == [1, 2]  # in the order they came; the call whose caller gave up was not run


async def _hanging_delete_server(release: asyncio.Event) -> tuple[asyncio.Server, str]:
    """A stateful Streamable HTTP server answering in JSON; its DELETE answers once ``release`` is set."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                length = next(
                    (int(h.split(":")[1]) for h in head if h.lower().startswith("content-length")), 0
                )
                body = await reader.readexactly(length)
                verb, status, out, extra = head[0].split(" ")[0], 405, b"", ""
                if verb == "DELETE":
                    await release.wait()
                    status = 200
                elif verb == "POST":
                    message = json.loads(body)
                    status = 202 if "id" not in message else 200
                    if "id" in message:
                        result = {
                            "protocolVersion": "2025-11-25",
                            "capabilities": {},
                            "serverInfo": {"name": "h"},
                        }
                        answer = {"jsonrpc": "2.0", "id": message["id"], "result": result}
                        out, extra = (
                            json.dumps(answer).encode(),
                            "Content-Type: application/json\r\nMcp-Session-Id: h1\r\n",
                        )
                writer.write(
                    f"HTTP/1.1 {status} X\r\n{extra}Content-Length: {len(out)}\r\n\r\n".encode() + out
                )
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_delete_that_never_answers_is_recorded_as_failed_and_the_stop_still_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The engine waits DELETE_WAIT for a DELETE; one that does not answer by then is a frame, not lost."""
    # The server never answers: how long is not the point.
    monkeypatch.setattr(_streamable, "DELETE_WAIT", 0.2)
    release = asyncio.Event()
    server, url = await _hanging_delete_server(release)
    user = await make_user()
    try:
        async with live_runtime():
            session = await McpSession.objects.acreate(
                owner=user, team=await ateam_of(user), name="h", config=http_config(url)
            )
            await client.start_session(session)
            await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").exists())
            async with asyncio.timeout(15):
                await stop_embedded_runtime("the inspector stopped")
    finally:
        release.set()
        server.close()
    await session.arefresh_from_db()
    frames = [f async for f in TimelineFrame.objects.filter(session=session).order_by("seq")]
    assert session.status == "closed" and [f.seq for f in frames] == list(range(1, session.last_seq + 1))
    delete = next(f for f in frames if f.transport.get("http", {}).get("method") == "DELETE")
    after = [f for f in frames if f.seq > delete.seq]
    assert [(f.kind, f.transport.get("state")) for f in after][:1] == [("state", "http-error")]
    assert after[0].note.startswith("DELETE failed")
    assert [p["state"] for p in session.phases][-2:] == ["closing", "closed"]
