"""One fast test per verdict rule of the stateless revision (2026-07-28) and its subscriptions/listen
stream, each with the well-behaved variant beside it; the server scripted in memory."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from support.rules import (
    ACKNOWLEDGED,
    LOG,
    SERVER_INFO_META,
    call,
    connected,
    flagged,
    notification,
    stateless,
)

from sessions.engine import (
    SUBSCRIPTION_ID,
    Frame,
    McpError,
)
from sessions.engine.testing import (
    ScriptedTransport,
    Sent,
)

# --- the stateless revision (2026-07-28) -------------------------------------------------


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
