"""One fast test per verdict rule code (docs/engine.md), each with the well-behaved variant beside it.

The server is scripted in memory (``sessions.engine.testing.ScriptedTransport``). No process, no socket,
no sleeping. The stateless revision's rules are in test_stateless_rules.py, the transports' in
test_transport_rules.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support.rules import (
    LOG,
    STATELESS,
    call,
    connected,
    flagged,
    notification,
    options,
    progress,
    stateless,
)

from sessions.engine import (
    ClientCapabilities,
    ClientOptions,
    ClientSession,
    Frame,
    McpError,
    PendingRequest,
    RequestTimeout,
)
from sessions.engine.testing import (
    ManualClock,
    Recorder,
    ScriptedTransport,
    discover_result,
    initialize_result,
)

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
