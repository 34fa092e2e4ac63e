"""One fast test per verdict rule of the transports: the stdio line reader fed from a ``StreamReader``,
the HTTP transports driven against ``httpx.MockTransport``. No process, no socket, no sleeping."""

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.rules import (
    LOG,
    flagged,
    options,
)

from sessions.engine import (
    ClientSession,
    Frame,
    HttpTarget,
    SessionExpired,
    TransportError,
)
from sessions.engine._legacy_sse import LegacySseTransport
from sessions.engine._stdio import read_messages
from sessions.engine._streamable import StreamableHttpTransport
from sessions.engine.testing import (
    Recorder,
    ScriptedTransport,
    initialize_result,
    mock_http,
)

# --- the stdio transport -----------------------------------------------------------------


async def test_stdout_that_ends_mid_line_is_flagged_unterminated_line() -> None:
    session = ClientSession(ScriptedTransport(), options())
    recorder = Recorder(session)
    stdout = asyncio.StreamReader()
    stdout.feed_data(json.dumps(LOG).encode() + b"\n" + json.dumps(LOG).encode())
    stdout.feed_eof()
    await read_messages(stdout, session)
    terminated, cut = [f for f in recorder.frames if f.kind == "message"]
    assert flagged(terminated, "unterminated-line") == []
    assert flagged(cut, "unterminated-line") == ["warning"] and cut.message == LOG


# --- the HTTP transports (real transports over httpx.MockTransport) -------------------------

URL = "http://mcp.test/mcp"


def well_behaved(request: httpx.Request) -> httpx.Response:
    """A Streamable HTTP server that does everything right (and has no GET stream)."""
    if request.method == "GET":
        return httpx.Response(405)
    if request.method == "DELETE":
        return httpx.Response(204)
    body = json.loads(request.content)
    if "method" not in body or "id" not in body:
        return httpx.Response(202)
    if body["method"] == "initialize":
        reply = {"jsonrpc": "2.0", "id": body["id"], "result": initialize_result()}
        return httpx.Response(200, json=reply, headers={"Mcp-Session-Id": "session-1"})
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": {}})


def rpc_method(request: httpx.Request) -> str | None:
    return json.loads(request.content).get("method") if request.method == "POST" else None


class Stored(Recorder):
    """A recorder that also keeps each frame as it was when published: what the runtime stores."""

    def __init__(self, session: ClientSession) -> None:
        super().__init__(session)
        self.stored: dict[int, dict[str, Any]] = {}

    def _add(self, event: Any) -> None:
        if isinstance(event, Frame):
            self.stored[event.seq] = event.to_dict()
        super()._add(event)

    def as_stored(self, frame: Frame) -> Frame:
        """``frame``, after checking that nothing was added to it after it was published."""
        assert self.stored[frame.seq] == frame.to_dict(), "changed after it was published (and stored)"
        return frame


def http_session(
    handler: Callable[[httpx.Request], httpx.Response], *, get_stream: bool = False
) -> tuple[ClientSession, Stored]:
    target = HttpTarget(URL, transport="http", open_get_stream=get_stream)
    transport = StreamableHttpTransport(target, client_factory=mock_http(handler))
    session = ClientSession(transport, options())
    return session, Stored(session)


async def reply_head(recorder: Stored, what: Callable[[Frame], bool]) -> Frame:
    """The HTTP response head to the first request frame ``what`` picks (a message or a GET), as the
    runtime's recorder stores it: verdicts, notes and body must be there when it is published."""
    out = await recorder.frame(lambda f: f.direction == "out" and what(f))
    head = await recorder.frame(
        lambda f: (
            f.kind == "http" and f.direction == "in" and f.transport["http"].get("request_seq") == out.seq
        )
    )
    return recorder.as_stored(head)


def is_method(method: str) -> Callable[[Frame], bool]:
    return lambda f: f.kind == "message" and f.method == method


async def test_a_session_id_with_invisible_characters_is_flagged_session_id_chars() -> None:
    def spacey(request: httpx.Request) -> httpx.Response:
        response = well_behaved(request)
        if rpc_method(request) == "initialize":
            response.headers["Mcp-Session-Id"] = "session 1"
        return response

    session, recorder = http_session(spacey)
    async with session:
        bad = await reply_head(recorder, is_method("initialize"))
    session, recorder = http_session(well_behaved)
    async with session:
        good = await reply_head(recorder, is_method("initialize"))
    assert flagged(bad, "session-id-chars") == ["error"]
    assert flagged(good, "session-id-chars") == []


async def test_a_request_answered_202_is_flagged_accepted_request() -> None:
    def accepting(request: httpx.Request) -> httpx.Response:
        return httpx.Response(202) if rpc_method(request) == "tools/list" else well_behaved(request)

    session, recorder = http_session(accepting)
    async with session:
        await session.start_request("tools/list")
        request_head = await reply_head(recorder, is_method("tools/list"))
        notification_head = await reply_head(recorder, is_method("notifications/initialized"))
    assert flagged(request_head, "accepted-request") == ["error"]
    assert notification_head.transport["http"]["status"] == 202
    assert flagged(notification_head, "accepted-request") == []


async def test_a_reply_that_is_not_json_nor_sse_is_flagged_content_type() -> None:
    def plain(request: httpx.Request) -> httpx.Response:
        response = well_behaved(request)
        if rpc_method(request) == "tools/list":
            return httpx.Response(200, content=response.content, headers={"Content-Type": "text/plain"})
        return response

    session, recorder = http_session(plain)
    async with session:
        assert await session.request("tools/list") == {}  # the body is still read
        wrong = await reply_head(recorder, is_method("tools/list"))
        right = await reply_head(recorder, is_method("initialize"))
    assert flagged(wrong, "content-type") == ["error"]
    assert flagged(right, "content-type") == []


async def test_a_notification_answered_other_than_202_is_flagged_expected_202() -> None:
    def chatty(request: httpx.Request) -> httpx.Response:
        if rpc_method(request) == "notifications/initialized":
            return httpx.Response(200)
        return well_behaved(request)

    session, recorder = http_session(chatty)
    async with session:
        wrong = await reply_head(recorder, is_method("notifications/initialized"))
    session, recorder = http_session(well_behaved)
    async with session:
        right = await reply_head(recorder, is_method("notifications/initialized"))
    assert flagged(wrong, "expected-202") == ["warning"]
    assert flagged(right, "expected-202") == []


async def test_an_unknown_session_answered_400_is_flagged_expiry_status() -> None:
    def forgetful(status: int) -> Callable[[httpx.Request], httpx.Response]:
        def handler(request: httpx.Request) -> httpx.Response:
            if rpc_method(request) == "tools/list":
                return httpx.Response(status, content=b"unknown session")
            return well_behaved(request)

        return handler

    heads = []
    for status in (400, 404):
        session, recorder = http_session(forgetful(status))
        async with session:
            with pytest.raises(SessionExpired):
                await session.request("tools/list")
            assert session.state == "expired"
            heads.append(await reply_head(recorder, is_method("tools/list")))
    assert flagged(heads[0], "expiry-status") == ["warning"]
    assert flagged(heads[1], "expiry-status") == []


async def test_a_get_that_opens_no_event_stream_is_flagged_get_stream() -> None:
    def odd_get(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, content=b"hello", headers={"Content-Type": "text/plain"})
        return well_behaved(request)

    def is_get(frame: Frame) -> bool:
        return frame.kind == "http" and frame.transport["http"].get("method") == "GET"

    session, recorder = http_session(odd_get, get_stream=True)
    async with session:
        odd = await reply_head(recorder, is_get)
    session, recorder = http_session(well_behaved, get_stream=True)
    async with session:
        refused = await reply_head(recorder, is_get)
    assert flagged(odd, "get-stream") == ["warning"]
    assert refused.verdicts == [] and refused.note == "the server offers no standalone stream"


async def test_a_legacy_endpoint_on_another_origin_is_flagged_endpoint_origin_and_refused() -> None:
    def legacy(endpoint: str) -> Callable[[httpx.Request], httpx.Response]:
        def handler(request: httpx.Request) -> httpx.Response:
            stream = f"event: endpoint\ndata: {endpoint}\n\n".encode()
            return httpx.Response(200, content=stream, headers={"Content-Type": "text/event-stream"})

        return handler

    def endpoint_frame(recorder: Stored) -> Frame:
        (frame,) = [f for f in recorder.frames if f.transport.get("http", {}).get("event") == "endpoint"]
        return recorder.as_stored(frame)

    target = HttpTarget(URL, transport="sse")
    elsewhere = ClientSession(
        LegacySseTransport(target, client_factory=mock_http(legacy("http://evil.test/m")))
    )
    recorder = Stored(elsewhere)
    with pytest.raises(TransportError, match="another origin"):
        await elsewhere.open()
    await elsewhere.aclose()
    refused = endpoint_frame(recorder)

    here = LegacySseTransport(target, client_factory=mock_http(legacy("/messages?session=1")))
    same_origin = ClientSession(here)
    recorder = Stored(same_origin)
    await same_origin.open()
    await same_origin.aclose()
    accepted = endpoint_frame(recorder)
    assert flagged(refused, "endpoint-origin") == ["error"]
    assert flagged(accepted, "endpoint-origin") == []
    assert here.endpoint == "http://mcp.test/messages?session=1"
