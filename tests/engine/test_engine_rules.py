"""One fast test per verdict rule code (docs/engine.md), each with the well-behaved variant beside it.

The server is scripted in memory (``sessions.engine.testing.ScriptedTransport``); the HTTP transport
rules drive the real transports against ``httpx.MockTransport``; ``unterminated-line`` feeds the
stdio line reader from a ``StreamReader``. No process, no socket, no sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from sessions.engine import (
    SUBSCRIPTION_ID,
    ClientCapabilities,
    ClientOptions,
    ClientSession,
    Frame,
    HttpTarget,
    McpError,
    PendingRequest,
    RequestTimeout,
    SessionExpired,
    TransportError,
)
from sessions.engine._legacy_sse import LegacySseTransport
from sessions.engine._stdio import read_messages
from sessions.engine._streamable import StreamableHttpTransport
from sessions.engine.testing import (
    ManualClock,
    Recorder,
    ScriptedTransport,
    Sent,
    discover_result,
    initialize_result,
    mock_http,
)

STATELESS = "2026-07-28"
SERVER_INFO_META = {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1.0.0"}}
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LOG = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}


def flagged(frame: Frame, code: str) -> list[str]:
    """The severities of the verdicts with ``code`` on ``frame`` (one entry per verdict)."""
    return [v.severity for v in frame.verdicts if v.code == code]


def options(**fields: Any) -> ClientOptions:
    """Options for a scripted session: no schema checks unless asked, and a clock that stands still."""
    fields.setdefault("validate", False)
    fields.setdefault("clock", ManualClock())
    return ClientOptions(**fields)


@contextlib.asynccontextmanager
async def connected(
    client: ClientOptions | None = None, **handshake: Any
) -> AsyncIterator[tuple[ClientSession, ScriptedTransport]]:
    """A ready session over a scripted server that answered the handshake with ``handshake`` fields."""
    server = ScriptedTransport(handshake=handshake or True)
    async with ClientSession(server, client or options()) as session:
        yield session, server


async def call(
    session: ClientSession, server: ScriptedTransport, method: str, params: dict[str, Any] | None = None
) -> Sent:
    """Start a request and return what the server received."""
    await session.start_request(method, params)
    return await server.next_sent(method)


def notification(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def progress(token: Any, value: Any) -> dict[str, Any]:
    return notification("notifications/progress", progressToken=token, progress=value)


# --- the bytes are not a JSON-RPC 2.0 message ---------------------------------------------


async def test_bytes_that_are_not_json_are_flagged_invalid_json() -> None:
    async with connected() as (_, server):
        broken = server.server_sends(b'{"jsonrpc": "2.0", "method": ')
        fine = server.server_sends(LOG)
    assert flagged(broken, "invalid-json") == ["error"]
    assert broken.parse_error is not None and broken.raw == b'{"jsonrpc": "2.0", "method": '
    assert flagged(fine, "invalid-json") == []


async def test_bytes_that_are_not_utf8_are_flagged_invalid_utf8() -> None:
    async with connected() as (_, server):
        latin1 = server.server_sends(json.dumps(LOG).replace("hi", "caf\xe9").encode("latin-1"))
        utf8 = server.server_sends(json.dumps(LOG, ensure_ascii=False).replace("hi", "café").encode())
    assert flagged(latin1, "invalid-utf8") == ["error"]
    assert flagged(utf8, "invalid-utf8") == []


async def test_json_that_is_no_message_object_is_flagged_not_jsonrpc() -> None:
    async with connected() as (_, server):
        string = server.server_sends('"hello"')
        shapeless = server.server_sends({"jsonrpc": "2.0", "id": 1})
        fine = server.server_sends(LOG)
    assert flagged(string, "not-jsonrpc") == ["error"]
    assert flagged(shapeless, "not-jsonrpc") == ["error"]
    assert flagged(fine, "not-jsonrpc") == []


async def test_a_message_without_jsonrpc_2_0_is_flagged_jsonrpc_version() -> None:
    async with connected() as (_, server):
        old = server.server_sends({**LOG, "jsonrpc": "1.0"})
        missing = server.server_sends({k: v for k, v in LOG.items() if k != "jsonrpc"})
        fine = server.server_sends(LOG)
    assert flagged(old, "jsonrpc-version") == ["error"]
    assert flagged(missing, "jsonrpc-version") == ["error"]
    assert flagged(fine, "jsonrpc-version") == []


async def test_a_method_that_is_not_a_string_is_flagged_invalid_method() -> None:
    async with connected() as (_, server):
        numeric = server.server_sends({"jsonrpc": "2.0", "id": 1, "method": 5})
        fine = server.server_sends(LOG)
    assert flagged(numeric, "invalid-method") == ["error"]
    assert flagged(fine, "invalid-method") == []


# --- response rules --------------------------------------------------------------------


async def test_a_response_to_an_unknown_id_is_flagged_unknown_id() -> None:
    async with connected() as (session, server):
        sent = await call(session, server, "tools/list")
        stranger = server.server_sends({"jsonrpc": "2.0", "id": 4242, "result": {}})
        answer = server.answer(sent, {"tools": []})
    assert flagged(stranger, "unknown-id") == ["error"]
    assert flagged(answer, "unknown-id") == [] and answer.pair_seq == sent.frame.seq


async def test_a_second_response_to_one_request_is_flagged_duplicate_response() -> None:
    async with connected() as (session, server):
        sent = await call(session, server, "tools/list")
        first = server.answer(sent, {"tools": []})
        second = server.answer(sent, {"tools": []})
    assert flagged(first, "duplicate-response") == []
    assert flagged(second, "duplicate-response") == ["error"]


async def test_a_response_with_result_and_error_is_flagged_result_and_error() -> None:
    async with connected() as (session, server):
        both = await call(session, server, "tools/list")
        frame = server.server_sends(
            {"jsonrpc": "2.0", "id": both.id, "result": {}, "error": {"code": -32603, "message": "x"}}
        )
        single = await call(session, server, "tools/list")
        fine = server.answer(single, {"tools": []})
    assert flagged(frame, "result-and-error") == ["error"]
    assert flagged(fine, "result-and-error") == []


async def test_a_malformed_error_object_is_flagged_invalid_error() -> None:
    async with connected() as (session, server):
        codeless = server.answer(await call(session, server, "tools/list"), error={"message": "no code"})
        wordless = server.answer(await call(session, server, "tools/list"), error={"code": -32603})
        unsupported = server.answer(
            await call(session, server, "tools/list"), error={"code": -32022, "message": "which?"}
        )
        fine = server.answer(
            await call(session, server, "tools/list"), error={"code": -32601, "message": "Method not found"}
        )
    assert flagged(codeless, "invalid-error") == ["error"]
    assert flagged(wordless, "invalid-error") == ["error"]
    assert flagged(unsupported, "invalid-error") == ["error"]  # -32022 must list data.supported
    assert flagged(fine, "invalid-error") == [] and fine.note == "Method not found (-32601)"


async def test_a_response_id_that_is_neither_string_nor_integer_is_flagged_invalid_id() -> None:
    async with connected() as (_, server):
        boolean = server.server_sends({"jsonrpc": "2.0", "id": True, "result": {}})
        unreadable = server.server_sends(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        )
    assert flagged(boolean, "invalid-id") == ["error"]
    # A null id is how a server answers a request it could not read: noted, not flagged.
    assert flagged(unreadable, "invalid-id") == [] and unreadable.note is not None


async def test_a_request_id_that_is_null_is_flagged_invalid_id() -> None:
    async with connected() as (_, server):
        null = server.server_sends({"jsonrpc": "2.0", "id": None, "method": "ping"})
        fine = server.server_sends({"jsonrpc": "2.0", "id": 7, "method": "ping"})
    assert flagged(null, "invalid-id") == ["error"]
    assert flagged(fine, "invalid-id") == []


async def test_a_response_after_the_request_was_cancelled_is_flagged_late_response() -> None:
    async with connected() as (session, server):
        handle = await session.start_request("tools/list")
        given_up = await server.next_sent("tools/list")
        await handle.cancel()
        cancelled = await server.next_sent("notifications/cancelled")
        late = server.answer(given_up, {"tools": []})
        on_time = server.answer(await call(session, server, "tools/list"), {"tools": []})
    assert cancelled.params["requestId"] == given_up.id
    assert flagged(late, "late-response") == ["info"]
    assert late.note == "late response to a request that was cancelled"
    assert flagged(on_time, "late-response") == []


# --- request and notification rules ----------------------------------------------------


async def test_a_notification_that_carries_an_id_is_flagged_notification_with_id() -> None:
    async with connected() as (_, server):
        with_id = server.server_sends({**LOG, "id": 3})
        fine = server.server_sends(LOG)
    assert flagged(with_id, "notification-with-id") == ["error"]
    assert flagged(fine, "notification-with-id") == []


async def test_a_server_request_id_used_twice_is_flagged_id_reuse() -> None:
    async with connected() as (_, server):
        first = server.server_sends({"jsonrpc": "2.0", "id": "a", "method": "ping"})
        pong = await server.next_sent()
        again = server.server_sends({"jsonrpc": "2.0", "id": "a", "method": "ping"})
    assert pong.message == {"jsonrpc": "2.0", "id": "a", "result": {}} and pong.frame.pair_seq == first.seq
    assert flagged(first, "id-reuse") == []
    assert flagged(again, "id-reuse") == ["error"]


async def test_params_that_are_not_an_object_are_flagged_invalid_params() -> None:
    async with connected() as (_, server):
        listed = server.server_sends({**LOG, "params": ["info", "hi"]})
        request = server.server_sends({"jsonrpc": "2.0", "id": 1, "method": "roots/list", "params": 5})
        fine = server.server_sends(LOG)
    assert flagged(listed, "invalid-params") == ["error"]
    assert flagged(request, "invalid-params") == ["error"]
    assert flagged(fine, "invalid-params") == []


async def test_a_request_for_an_undeclared_capability_is_flagged_and_refused() -> None:
    no_sampling = ClientCapabilities(sampling=False, elicitation_form=True, elicitation_url=False)
    async with connected(options(capabilities=no_sampling)) as (_, server):
        sampling = server.server_sends(
            {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {"messages": []}}
        )
        refusal = await server.next_sent()
        roots = server.server_sends({"jsonrpc": "2.0", "id": 3, "method": "roots/list"})
        answer = await server.next_sent()
    assert flagged(sampling, "undeclared-capability") == ["error"]
    assert refusal.message["error"]["code"] == -32601
    assert flagged(roots, "undeclared-capability") == []
    assert answer.message == {"jsonrpc": "2.0", "id": 3, "result": {"roots": []}}


def elicitation(request_id: int, **params: Any) -> dict[str, Any]:
    params = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params}


@pytest.mark.parametrize(
    ("protocol", "declared", "asked", "code"),
    [
        ("2025-11-25", {"elicitation_form": True}, {"mode": "url", "url": "https://x.test/"}, -32602),
        ("2025-11-25", {"elicitation_url": True, "elicitation_form": False}, {}, -32602),  # form by default
        ("2025-06-18", {"elicitation_form": True}, {"mode": "url", "url": "https://x.test/"}, -32602),
        ("2025-11-25", {"elicitation_form": False}, {}, -32601),  # no elicitation at all
        ("2025-03-26", {"elicitation_form": True}, {}, -32601),  # the revision has no elicitation
    ],
)
async def test_an_elicitation_in_a_mode_the_client_did_not_declare_is_refused_at_once(
    protocol: str, declared: dict[str, bool], asked: dict[str, Any], code: int
) -> None:
    clock = ManualClock()
    capabilities = ClientCapabilities(**{"elicitation_form": False, "elicitation_url": False, **declared})
    client = options(protocol_version=protocol, capabilities=capabilities, clock=clock, timeout=10)
    async with connected(client, protocolVersion=protocol) as (session, server):
        recorder = Recorder(session)
        call = await session.start_request("tools/call", {"name": "ask", "arguments": {}})
        await server.next_sent("tools/call")
        request = server.server_sends(elicitation(7, **asked))
        refusal = await server.next_sent()
        # Nobody is asked, so no clock stands still: the call times out on time.
        clock.advance(10)
        with pytest.raises(RequestTimeout):
            await call
    assert flagged(request, "undeclared-capability") == ["error"]
    assert refusal.message["id"] == 7 and refusal.message["error"]["code"] == code
    assert refusal.frame.pair_seq == request.seq
    assert session.waiting == [] and not [e for e in recorder.events if isinstance(e, PendingRequest)]


async def test_an_elicitation_in_a_declared_mode_waits_for_a_person() -> None:
    both = ClientCapabilities(elicitation_form=True, elicitation_url=True)
    async with connected(options(capabilities=both)) as (session, server):
        recorder = Recorder(session)
        request = server.server_sends(elicitation(7, mode="url", url="https://x.test/", elicitationId="e"))
        pending = await recorder.pending("elicitation/create")
        session.respond(pending.key, {"action": "decline"})
        answer = await server.next_sent()
    assert flagged(request, "undeclared-capability") == []
    assert answer.message == {"jsonrpc": "2.0", "id": 7, "result": {"action": "decline"}}


async def test_server_traffic_before_initialized_is_flagged_before_initialized() -> None:
    server = ScriptedTransport()
    async with contextlib.AsyncExitStack() as stack:
        session = ClientSession(server, options())
        stack.push_async_callback(session.aclose)
        await session.open()
        initializing = asyncio.create_task(session.initialize())
        offer = await server.next_sent("initialize")
        early_notice = server.server_sends(notification("notifications/tools/list_changed"))
        early_request = server.server_sends({"jsonrpc": "2.0", "id": 1, "method": "roots/list"})
        early_log = server.server_sends(LOG)  # logging may come early
        early_ping = server.server_sends({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        server.answer(offer, initialize_result())
        await initializing
        await server.next_sent("notifications/initialized")
        later = server.server_sends({"jsonrpc": "2.0", "id": 3, "method": "roots/list"})
    assert flagged(early_notice, "before-initialized") == ["error"]
    assert flagged(early_request, "before-initialized") == ["error"]
    assert flagged(early_log, "before-initialized") == []
    assert flagged(early_ping, "before-initialized") == []
    assert flagged(later, "before-initialized") == []


# --- progress rules --------------------------------------------------------------------


async def test_progress_that_does_not_increase_is_flagged_progress_not_increasing() -> None:
    async with connected() as (session, server):
        sent = await call(session, server, "tools/call", {"name": "slow", "arguments": {}})
        token = sent.params["_meta"]["progressToken"]
        first = server.server_sends(progress(token, 5))
        higher = server.server_sends(progress(token, 6))
        lower = server.server_sends(progress(token, 3))
    assert flagged(first, "progress-not-increasing") == []
    assert flagged(higher, "progress-not-increasing") == []
    assert flagged(lower, "progress-not-increasing") == ["error"]


async def test_progress_for_a_token_nobody_issued_is_flagged_unknown_progress_token() -> None:
    async with connected() as (session, server):
        sent = await call(session, server, "tools/call", {"name": "slow", "arguments": {}})
        stranger = server.server_sends(progress("nobody's", 1))
        known = server.server_sends(progress(sent.params["_meta"]["progressToken"], 1))
        server.answer(sent, {"content": []})
        finished = server.server_sends(progress(sent.params["_meta"]["progressToken"], 2))
    assert flagged(stranger, "unknown-progress-token") == ["error"]
    assert flagged(known, "unknown-progress-token") == []
    assert flagged(finished, "unknown-progress-token") == ["error"]


async def test_progress_that_is_not_a_number_is_flagged_invalid_progress() -> None:
    async with connected() as (session, server):
        sent = await call(session, server, "tools/call", {"name": "slow", "arguments": {}})
        token = sent.params["_meta"]["progressToken"]
        words = server.server_sends(progress(token, "half"))
        number = server.server_sends(progress(token, 0.5))
    assert flagged(words, "invalid-progress") == ["error"]
    assert flagged(number, "invalid-progress") == []


# --- batches ---------------------------------------------------------------------------


async def test_a_batch_outside_2025_03_26_is_flagged_batch() -> None:
    async with connected() as (_, server):
        batch = server.server_sends([LOG, LOG])
    async with connected(options(protocol_version="2025-03-26")) as (session, server):
        allowed = server.server_sends([LOG, LOG])
    assert flagged(batch, "batch") == ["warning"]
    assert session.protocol_version == "2025-03-26" and flagged(allowed, "batch") == []


async def test_an_empty_batch_is_flagged_empty_batch() -> None:
    async with connected(options(protocol_version="2025-03-26")) as (_, server):
        empty = server.server_sends([])
        full = server.server_sends([LOG])
    assert flagged(empty, "empty-batch") == ["error"]
    assert flagged(full, "empty-batch") == []


# --- schema verdicts (mcp-types) --------------------------------------------------------


async def test_a_result_that_breaks_the_revisions_schema_is_flagged_schema() -> None:
    async with connected(options(validate=True)) as (session, server):
        broken = server.answer(await call(session, server, "tools/list"), {"tools": "none"})
        fine = server.answer(await call(session, server, "tools/list"), {"tools": []})
    assert flagged(broken, "schema") == ["error"]
    assert flagged(fine, "schema") == []


async def test_a_method_the_revision_does_not_define_is_flagged_not_in_revision() -> None:
    async with connected(options(validate=True)) as (_, server):
        invented = server.server_sends(notification("notifications/invented"))
        defined = server.server_sends(LOG)
    assert flagged(invented, "not-in-revision") == ["warning"]
    assert flagged(defined, "not-in-revision") == []


# --- the stateless revision (2026-07-28) -------------------------------------------------


def stateless(**fields: Any) -> ClientOptions:
    return options(protocol_version=STATELESS, **fields)


async def test_a_stateless_result_without_result_type_is_flagged_result_type() -> None:
    async with connected(stateless()) as (session, server):
        assert session.mode == "stateless"
        bare = server.answer(await call(session, server, "tools/list"), {"tools": []})
        typed = server.answer(
            await call(session, server, "tools/list"),
            {"resultType": "complete", "tools": [], "_meta": SERVER_INFO_META},
        )
    assert flagged(bare, "result-type") == ["error"]
    assert flagged(typed, "result-type") == []


async def test_a_stateless_result_without_server_info_is_flagged_server_info() -> None:
    async with connected(stateless()) as (session, server):
        anonymous = server.answer(
            await call(session, server, "tools/list"), {"resultType": "complete", "tools": []}
        )
        signed = server.answer(
            await call(session, server, "tools/list"),
            {"resultType": "complete", "tools": [], "_meta": SERVER_INFO_META},
        )
    assert flagged(anonymous, "server-info") == ["info"]
    assert flagged(signed, "server-info") == []


async def test_input_required_where_the_revision_forbids_it_is_flagged_input_required() -> None:
    async with connected(stateless()) as (session, server):
        wrong_method = server.answer(
            await call(session, server, "tools/list"),
            {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}},
        )
        empty = server.answer(
            await call(session, server, "tools/call", {"name": "t", "arguments": {}}),
            {"resultType": "input_required"},
        )
        handle = await session.start_request("tools/call", {"name": "t", "arguments": {}})
        asked = await server.next_sent("tools/call")
        fine = server.answer(
            asked, {"resultType": "input_required", "inputRequests": {"r": {"method": "roots/list"}}}
        )
        retry = await server.next_sent("tools/call")
        server.answer(retry, {"resultType": "complete", "content": []})
        assert await handle == {"resultType": "complete", "content": []}
    assert flagged(wrong_method, "input-required") == ["error"]
    assert flagged(empty, "input-required") == ["error"]
    assert flagged(fine, "input-required") == []
    assert retry.params["inputResponses"] == {"r": {"roots": []}}


async def test_error_32020_is_flagged_header_mismatch() -> None:
    async with connected() as (session, server):
        mismatch = server.answer(
            await call(session, server, "tools/list"), error={"code": -32020, "message": "Mcp-Method differs"}
        )
        other = server.answer(
            await call(session, server, "tools/list"), error={"code": -32601, "message": "Method not found"}
        )
    assert flagged(mismatch, "header-mismatch") == ["warning"]
    assert mismatch.note == "Header mismatch (-32020)"
    assert flagged(other, "header-mismatch") == []


async def test_a_stateless_error_over_http_without_status_400_is_flagged_error_status() -> None:
    missing = {"code": -32021, "message": "Missing required client capability"}
    async with connected() as (session, server):
        wrong = server.answer(await call(session, server, "tools/list"), error=missing, http={"status": 500})
        right = server.answer(await call(session, server, "tools/list"), error=missing, http={"status": 400})
        stdio = server.answer(await call(session, server, "tools/list"), error=missing)
    assert flagged(wrong, "error-status") == ["warning"]
    assert flagged(right, "error-status") == []
    assert flagged(stdio, "error-status") == []


async def test_a_stateless_log_nobody_asked_for_is_flagged_unrequested_log() -> None:
    async with connected(stateless()) as (session, server):
        unasked = server.server_sends(LOG)
        await session.set_logging_level("info")
        asked = server.server_sends(LOG)
    assert flagged(unasked, "unrequested-log") == ["warning"]
    assert flagged(asked, "unrequested-log") == []


async def test_a_tool_with_a_bad_x_mcp_header_annotation_is_flagged_x_mcp_header() -> None:
    bad = {"type": "object", "properties": {"where": {"type": "object", "x-mcp-header": "Where"}}}
    good = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    async with connected(stateless()) as (session, server):
        listed = server.answer(
            await call(session, server, "tools/list"),
            {"resultType": "complete", "tools": [{"name": "bad", "inputSchema": bad}]},
        )
        fine = server.answer(
            await call(session, server, "tools/list"),
            {"resultType": "complete", "tools": [{"name": "good", "inputSchema": good}]},
        )
        headers = session.param_headers(
            {"method": "tools/call", "params": {"name": "good", "arguments": {"region": "eu"}}}
        )
    assert flagged(listed, "x-mcp-header") == ["error"]
    assert flagged(fine, "x-mcp-header") == []
    assert headers == {"Mcp-Param-Region": "eu"}


# --- subscriptions/listen (stateless) -----------------------------------------------------

FEATURES: dict[str, Any] = {"capabilities": {"tools": {}, "prompts": {}}}


def on_stream(method: str, stream: Any, **params: Any) -> dict[str, Any]:
    """A listen-stream notification carrying the stream's subscription id (``None``: no ``_meta``)."""
    if stream is not None:
        params["_meta"] = {SUBSCRIPTION_ID: stream}
    return notification(method, **params)


@contextlib.asynccontextmanager
async def listening(
    honored: dict[str, Any] | None = None, **handshake: Any
) -> AsyncIterator[tuple[ScriptedTransport, Sent, Callable[[dict[str, Any]], Frame]]]:
    """A stateless session with a subscriptions/listen in flight; yields a way to acknowledge it."""
    async with connected(stateless(), **(handshake or FEATURES)) as (session, server):
        listen = asyncio.create_task(session.listen([]))
        request = await server.next_sent("subscriptions/listen")

        def acknowledge(notifications: dict[str, Any]) -> Frame:
            return server.server_sends(on_stream(ACKNOWLEDGED, request.id, notifications=notifications))

        try:
            yield server, request, acknowledge
        finally:
            if not listen.done():
                listen.cancel()
            with contextlib.suppress(asyncio.CancelledError, McpError):
                await listen


async def test_a_list_change_off_any_listen_stream_is_flagged_outside_listen() -> None:
    async with listening() as (server, request, acknowledge):
        acknowledge(request.params["notifications"])
        outside = server.server_sends(on_stream("notifications/tools/list_changed", None))
        inside = server.server_sends(on_stream("notifications/tools/list_changed", request.id))
    assert flagged(outside, "outside-listen") == ["error"]
    assert inside.verdicts == [] and inside.note == f"on subscriptions/listen {request.id!r}"


async def test_an_acknowledgement_without_a_subscription_id_is_flagged_subscription_id() -> None:
    async with listening() as (server, request, acknowledge):
        anonymous = server.server_sends(on_stream(ACKNOWLEDGED, None, notifications={}))
        named = acknowledge(request.params["notifications"])
    assert flagged(anonymous, "subscription-id") == ["error"]
    assert flagged(named, "subscription-id") == []


async def test_a_frame_naming_no_open_listen_is_flagged_unknown_subscription() -> None:
    async with listening() as (server, request, acknowledge):
        acknowledge(request.params["notifications"])
        stray = server.server_sends(on_stream("notifications/tools/list_changed", 999))
        known = server.server_sends(on_stream("notifications/tools/list_changed", request.id))
    assert flagged(stray, "unknown-subscription") == ["error"]
    assert flagged(known, "unknown-subscription") == []


async def test_a_change_before_the_acknowledgement_is_flagged_before_acknowledged() -> None:
    async with listening() as (server, request, acknowledge):
        early = server.server_sends(on_stream("notifications/tools/list_changed", request.id))
        acknowledge(request.params["notifications"])
        later = server.server_sends(on_stream("notifications/tools/list_changed", request.id))
    assert flagged(early, "before-acknowledged") == ["error"]
    assert flagged(later, "before-acknowledged") == []


async def test_a_change_the_stream_did_not_acknowledge_is_flagged_unrequested_notification() -> None:
    async with listening() as (server, request, acknowledge):
        assert request.params["notifications"] == {"toolsListChanged": True, "promptsListChanged": True}
        ack = acknowledge({"toolsListChanged": True})  # prompts asked for, not honoured
        prompts = server.server_sends(on_stream("notifications/prompts/list_changed", request.id))
        tools = server.server_sends(on_stream("notifications/tools/list_changed", request.id))
    assert ack.note is not None and "not honoured: promptsListChanged" in ack.note
    assert flagged(prompts, "unrequested-notification") == ["error"]
    assert flagged(tools, "unrequested-notification") == []


async def test_an_acknowledgement_of_more_than_was_asked_is_flagged_ack_not_requested() -> None:
    async with listening(capabilities={"tools": {}}) as (_, request, acknowledge):
        generous = acknowledge({"toolsListChanged": True, "resourcesListChanged": True})
    async with listening(capabilities={"tools": {}}) as (_, request, acknowledge):
        exact = acknowledge({"toolsListChanged": True})
    assert flagged(generous, "ack-not-requested") == ["error"]
    assert flagged(exact, "ack-not-requested") == []


async def test_a_second_acknowledgement_is_flagged_duplicate_ack() -> None:
    async with listening() as (_, request, acknowledge):
        first = acknowledge(request.params["notifications"])
        second = acknowledge(request.params["notifications"])
    assert flagged(first, "duplicate-ack") == []
    assert flagged(second, "duplicate-ack") == ["error"]


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


# --- tools' output schemas ----------------------------------------------------------------

OUTPUT_SCHEMA = {"type": "object", "properties": {"result": {"type": "number"}}, "required": ["result"]}


def tool(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **fields}


async def call_result(
    session: ClientSession, server: ScriptedTransport, name: str, result: dict[str, Any], **params: Any
) -> Frame:
    """Call tool ``name`` and answer it with ``result``; return the result's frame."""
    sent = await call(session, server, "tools/call", {"name": name, "arguments": {}, **params})
    return server.answer(sent, result)


async def test_structured_content_that_breaks_the_output_schema_is_flagged_output_schema() -> None:
    async with connected() as (session, server):
        listing = await call(session, server, "tools/list")
        server.answer(listing, {"tools": [tool("add", outputSchema=OUTPUT_SCHEMA), tool("plain")]})
        text = [{"type": "text", "text": "5"}]
        good = await call_result(
            session, server, "add", {"content": text, "structuredContent": {"result": 5}}
        )
        bad = await call_result(
            session, server, "add", {"content": text, "structuredContent": {"result": "5"}}
        )
        failed = await call_result(
            session, server, "add", {"content": text, "isError": True, "structuredContent": {"oops": 1}}
        )
        unschemed = await call_result(
            session, server, "plain", {"content": text, "structuredContent": {"x": 1}}
        )
    assert (
        flagged(good, "output-schema") == []
        and good.note == "structuredContent matches the tool's outputSchema"
    )
    assert flagged(bad, "output-schema") == ["error"]
    assert "at result: '5' is not of type 'number'" in bad.verdicts[0].message
    assert failed.verdicts == []  # an error result is not the tool's output
    assert unschemed.verdicts == [] and unschemed.note is None


async def test_a_result_without_structured_content_is_flagged_structured_content() -> None:
    async with connected() as (session, server):
        server.answer(
            await call(session, server, "tools/list"), {"tools": [tool("add", outputSchema=OUTPUT_SCHEMA)]}
        )
        text = [{"type": "text", "text": "5"}]
        missing = await call_result(session, server, "add", {"content": text})
        failed = await call_result(session, server, "add", {"content": text, "isError": True})
        # A task-augmented call is answered with a CreateTaskResult: no structuredContent expected.
        task = {"taskId": "t1", "status": "working", "createdAt": "2025-01-01T00:00:00Z", "ttl": 1000}
        tasked = await call_result(session, server, "add", {"task": task}, task={"ttl": 1000})
        # A new listing replaces the tool's schema: this one declares none.
        server.answer(await call(session, server, "tools/list"), {"tools": [tool("add")]})
        relisted = await call_result(session, server, "add", {"content": text})
    assert flagged(missing, "structured-content") == ["error"]
    assert failed.verdicts == [] and relisted.verdicts == []
    # (The scripted server declares no tasks, which the tasks rules flag: only the output rules matter here.)
    assert flagged(tasked, "structured-content") == [] and flagged(tasked, "output-schema") == []


async def test_an_output_schema_that_is_no_json_schema_is_flagged_output_schema() -> None:
    async with connected() as (session, server):
        broken = tool("add", outputSchema={"type": "object", "properties": {"result": {"type": 5}}})
        server.answer(await call(session, server, "tools/list"), {"tools": [broken]})
        frame = await call_result(session, server, "add", {"content": [], "structuredContent": {"result": 1}})
    assert flagged(frame, "output-schema") == ["error"]
    assert "not a valid JSON Schema" in frame.verdicts[0].message


# --- notifications the server's capabilities do not allow ----------------------------------


async def test_notifications_beyond_the_servers_capabilities_are_flagged_undeclared_notification() -> None:
    changes = [f"notifications/{kind}/list_changed" for kind in ("tools", "prompts", "resources")]
    updated = notification("notifications/resources/updated", uri="file:///a")
    async with connected(capabilities={"tools": {}, "prompts": {}, "resources": {}}) as (_, server):
        undeclared = [server.server_sends(LOG), server.server_sends(updated)]
        undeclared += [server.server_sends(notification(method)) for method in changes]
    everything = {
        "logging": {},
        "tools": {"listChanged": True},
        "prompts": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
    }
    async with connected(capabilities=everything) as (session, server):
        await call(session, server, "resources/subscribe", {"uri": "file:///a"})
        declared = [server.server_sends(LOG), server.server_sends(updated)]
        declared += [server.server_sends(notification(method)) for method in changes]
    assert [flagged(frame, "undeclared-notification") for frame in undeclared] == [["warning"]] * 5
    assert "did not declare the 'logging' capability" in undeclared[0].verdicts[0].message
    assert "did not declare resources.subscribe" in undeclared[1].verdicts[0].message
    assert [frame.verdicts for frame in declared] == [[]] * 5


# --- races the protocol allows are info, not errors ----------------------------------------


async def test_progress_after_our_cancel_is_late_progress_info_like_a_late_response() -> None:
    async with connected() as (session, server):
        handle = await session.start_request("tools/call", {"name": "slow", "arguments": {}})
        sent = await server.next_sent("tools/call")
        await handle.cancel()
        await server.next_sent("notifications/cancelled")
        crossed = server.server_sends(progress(sent.params["_meta"]["progressToken"], 1))
        late = server.answer(sent, {"content": []})
        after = server.server_sends(progress(sent.params["_meta"]["progressToken"], 2))
    assert crossed.verdicts == [v for v in crossed.verdicts if v.code == "late-progress"]
    assert flagged(crossed, "late-progress") == flagged(late, "late-response") == ["info"]
    assert crossed.note == "late progress on a request that was cancelled"
    # After the response, progress is no race: the request is over.
    assert flagged(after, "unknown-progress-token") == ["error"]


# --- -32022: the server's own list of versions -------------------------------------------------


def unsupported(*supported: str) -> dict[str, Any]:
    data = {"supported": list(supported), "requested": STATELESS}
    return {"code": -32022, "message": "Unsupported protocol version", "data": data}


@contextlib.asynccontextmanager
async def discovering(client: ClientOptions) -> AsyncIterator[tuple[ClientSession, ScriptedTransport, Any]]:
    """A session whose initialize (in ``client``'s mode) runs as a task while the test answers it."""
    server = ScriptedTransport()
    session = ClientSession(server, client)
    await session.open()
    initializing = asyncio.create_task(session.initialize())
    try:
        yield session, server, initializing
    finally:
        initializing.cancel()
        await asyncio.gather(initializing, return_exceptions=True)
        await session.aclose()


async def test_a_32022_that_lists_the_version_asked_for_is_retried_once() -> None:
    async with discovering(stateless()) as (session, server, initializing):
        first = await server.next_sent("server/discover")
        server.answer(first, error=unsupported(STATELESS), http={"status": 400})
        second = await server.next_sent("server/discover")
        server.answer(second, discover_result())
        await initializing
        assert session.state == "ready" and session.protocol_version == STATELESS
    assert second.params["_meta"]["io.modelcontextprotocol/protocolVersion"] == STATELESS


async def test_a_32022_retry_is_bounded_and_auto_then_falls_back_to_initialize() -> None:
    async with discovering(stateless()) as (session, server, initializing):
        for _ in range(2):
            server.answer(await server.next_sent("server/discover"), error=unsupported(STATELESS))
        with pytest.raises(McpError) as refused:
            await initializing
        assert refused.value.code == -32022 and session.state == "failed"
        assert [s.method for s in server.sent].count("server/discover") == 2
    async with discovering(options(mode="auto")) as (session, server, initializing):
        for _ in range(2):
            server.answer(await server.next_sent("server/discover"), error=unsupported(STATELESS))
        server.answer(await server.next_sent("initialize"), initialize_result())
        await initializing
        assert session.mode == "handshake" and session.state == "ready"
        assert [s.method for s in server.sent].count("server/discover") == 2


async def test_an_input_request_in_an_undeclared_mode_is_flagged_and_ends_the_call_at_once() -> None:
    form_only = ClientCapabilities(elicitation_form=True, elicitation_url=False)
    async with connected(stateless(capabilities=form_only)) as (session, server):
        recorder = Recorder(session)
        handle = await session.start_request("tools/call", {"name": "t", "arguments": {}})
        url = elicitation(0, mode="url", url="https://x.test/", elicitationId="e")
        asked = server.answer(
            await server.next_sent("tools/call"),
            {
                "resultType": "input_required",
                "inputRequests": {"sign-in": {k: url[k] for k in ("method", "params")}},
            },
        )
        with pytest.raises(McpError) as refused:
            await handle
    assert flagged(asked, "undeclared-capability") == ["error"]
    assert refused.value.code == -32602
    assert not [e for e in recorder.events if isinstance(e, PendingRequest)]
