"""The engine against @modelcontextprotocol/server-everything over stdio, Streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
from support.engine import EventLog, wait_for_tool

from sessions.engine import (
    ClientCapabilities,
    ClientOptions,
    Frame,
    HttpTarget,
    McpError,
    PendingResolved,
    Progress,
    StdioTarget,
    connect,
)

pytestmark = pytest.mark.slow

ALL_CAPS = ClientCapabilities(elicitation_url=True)


@pytest.fixture(params=["stdio", "http", "sse"])
def target(request: pytest.FixtureRequest) -> Any:
    if request.param == "stdio":
        spec = request.getfixturevalue("everything_stdio")
        return StdioTarget(spec["command"], spec["args"])
    if request.param == "http":
        return HttpTarget(request.getfixturevalue("everything_http"), transport="http")
    return HttpTarget(request.getfixturevalue("everything_sse"), transport="sse")


def options(**kwargs: Any) -> ClientOptions:
    kwargs.setdefault("capabilities", ALL_CAPS)
    kwargs.setdefault("timeout", 30)
    return ClientOptions(**kwargs)


async def test_it_initializes_and_records_the_handshake(target: Any) -> None:
    session = connect(target, options(roots=[{"uri": "file:///tmp/project", "name": "project"}]))
    log = EventLog(session)
    async with session:
        assert session.protocol_version == "2025-11-25"
        assert session.server_info["name"] == "mcp-servers/everything"
        assert "tools" in session.server_capabilities
        out_methods = [f.method for f in log.messages("out")]
        assert out_methods[:2] == ["initialize", "notifications/initialized"]
        response = log.messages("in")[0]
        assert response.rpc_kind == "result"
        assert response.pair_seq == log.messages("out")[0].seq
        assert response.latency_ms is not None and response.latency_ms >= 0
        assert [f.transport["state"] for f in log.frames if f.kind == "state"][-1] == "ready"
    assert session.state == "closed"
    # Every frame is numbered in order, without gaps.
    seqs = [f.seq for f in log.frames]
    assert seqs == list(range(1, len(seqs) + 1))
    assert not [f for f in log.frames if any(v.severity == "error" for v in f.verdicts)]


async def test_tools_list_changes_with_declared_capabilities(target: Any) -> None:
    session = connect(target, options())
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "get-roots-list")
        full = {t["name"] for t in await session.list_all("tools/list", "tools")}
    bare = ClientCapabilities(roots=False, sampling=False, elicitation_form=False)
    async with connect(target, options(capabilities=bare)) as session:
        plain = {t["name"] for t in await session.list_all("tools/list", "tools")}
    assert {"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request"} <= full
    assert not {"get-roots-list", "trigger-sampling-request", "trigger-elicitation-request"} & plain
    assert "echo" in plain


async def test_tool_results_carry_structured_content_links_and_images(target: Any) -> None:
    async with connect(target, options()) as session:
        echo = await session.call_tool("echo", {"message": "hello"})
        assert echo["content"] == [{"type": "text", "text": "Echo: hello"}]
        structured = await session.call_tool("get-structured-content", {"location": "Chicago"})
        assert set(structured["structuredContent"]) >= {"temperature", "conditions", "humidity"}
        links = await session.call_tool("get-resource-links", {"count": 2})
        kinds = [c["type"] for c in links["content"]]
        assert kinds.count("resource_link") == 2
        image = await session.call_tool("get-tiny-image", {})
        png = next(c for c in image["content"] if c["type"] == "image")
        assert png["mimeType"] == "image/png"
        assert base64.b64decode(png["data"]).startswith(b"\x89PNG")


async def test_resources_templates_and_subscriptions(target: Any) -> None:
    session = connect(target, options())
    log = EventLog(session)
    async with session:
        resources = await session.list_all("resources/list", "resources")
        uri = resources[0]["uri"]
        read = await session.read_resource(uri)
        assert read["contents"][0]["uri"] == uri and "text" in read["contents"][0]
        templates = await session.list_all("resources/templates/list", "resourceTemplates")
        assert any("{resourceId}" in t["uriTemplate"] for t in templates)
        blob = await session.read_resource("demo://resource/dynamic/blob/3")
        assert "blob" in blob["contents"][0]
        with pytest.raises(McpError):
            await session.read_resource("demo://no/such/thing")
        await session.subscribe_resource(uri)
        await session.call_tool("toggle-subscriber-updates", {})
        updated = await log.wait_for(
            lambda e: isinstance(e, Frame) and e.method == "notifications/resources/updated", timeout=20
        )
        assert updated.message["params"]["uri"] == uri
        await session.unsubscribe_resource(uri)


async def test_prompts_and_completions(target: Any) -> None:
    async with connect(target, options()) as session:
        prompts = {p["name"] for p in await session.list_all("prompts/list", "prompts")}
        assert {"simple-prompt", "args-prompt", "completable-prompt"} <= prompts
        got = await session.get_prompt("args-prompt", {"city": "Paris", "state": "TX"})
        assert "Paris" in str(got["messages"])
        completion = await session.complete(
            {"type": "ref/prompt", "name": "completable-prompt"}, {"name": "department", "value": "E"}
        )
        assert completion["completion"]["values"]
        assert all(v.startswith("E") for v in completion["completion"]["values"])


async def test_logging_level_and_log_notifications(target: Any) -> None:
    session = connect(target, options())
    log = EventLog(session)
    async with session:
        await session.set_logging_level("debug")
        await session.call_tool("toggle-simulated-logging", {})
        message = await log.wait_for(
            lambda e: isinstance(e, Frame) and e.method == "notifications/message", timeout=20
        )
        assert message.direction == "in" and "level" in message.message["params"]


async def test_progress_is_reported_against_its_request(target: Any) -> None:
    reports: list[Progress] = []
    async with connect(target, options()) as session:
        result = await session.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=reports.append
        )
    assert "completed" in str(result).lower()
    assert [r.progress for r in reports] == [1, 2, 3, 4]
    assert all(r.total == 4 for r in reports)


async def test_a_sampling_request_waits_for_a_person_and_gets_the_answer(target: Any) -> None:
    session = connect(target, options(timeout=5))
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "trigger-sampling-request")
        call = asyncio.ensure_future(session.call_tool("trigger-sampling-request", {"prompt": "Say hi"}))
        pending = await log.pending("sampling/createMessage")
        assert pending.params["messages"][0]["content"]["text"].endswith("Say hi")
        reply = {
            "role": "assistant",
            "content": {"type": "text", "text": "Hi from a person"},
            "model": "human",
            "stopReason": "endTurn",
        }
        session.respond(pending.key, reply, note="edited")
        result = await asyncio.wait_for(call, 15)
        assert "Hi from a person" in str(result)
        answer = next(
            f for f in log.messages("out") if f.rpc_id == pending.request_id and f.rpc_kind == "result"
        )
        assert answer.note == "edited"
        assert answer.pair_seq == pending.frame_seq


async def test_a_rejected_sampling_request_answers_error_minus_one(target: Any) -> None:
    session = connect(target, options())
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "trigger-sampling-request")
        call = asyncio.ensure_future(session.call_tool("trigger-sampling-request", {"prompt": "x"}))
        pending = await log.pending("sampling/createMessage")
        session.reject(pending.key)
        await asyncio.wait_for(asyncio.gather(call, return_exceptions=True), 15)
        error = next(
            f for f in log.messages("out") if f.rpc_id == pending.request_id and f.rpc_kind == "error"
        )
        assert error.message["error"]["code"] == -1
        assert any(isinstance(e, PendingResolved) and e.outcome == "rejected" for e in log.events)


async def test_elicitation_form_is_answered_by_a_person(target: Any) -> None:
    session = connect(target, options())
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "trigger-elicitation-request")
        call = asyncio.ensure_future(session.call_tool("trigger-elicitation-request", {}))
        pending = await log.pending("elicitation/create")
        schema = pending.params["requestedSchema"]
        assert schema["type"] == "object" and schema["properties"]
        content = {k: v["default"] for k, v in schema["properties"].items() if "default" in v}
        for name in schema.get("required", []):
            prop = schema["properties"][name]
            content.setdefault(name, 1 if prop.get("type") in ("number", "integer") else "Ada")
            if "enum" in prop:
                content[name] = prop["enum"][0]
        session.respond(pending.key, {"action": "accept", "content": content})
        result = await asyncio.wait_for(call, 15)
        assert "accept" in str(result).lower()


async def test_roots_are_answered_from_the_session(target: Any) -> None:
    roots = [{"uri": "file:///srv/project", "name": "project"}]
    session = connect(target, options(roots=roots))
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "get-roots-list")
        result = await session.call_tool("get-roots-list", {})
        assert "file:///srv/project" in str(result)
        assert log.messages("in", "roots/list")
        await session.set_roots([{"uri": "file:///srv/other", "name": "other"}])
        assert log.messages("out", "notifications/roots/list_changed")


async def test_ping_measures_a_round_trip(target: Any) -> None:
    async with connect(target, options()) as session:
        assert await session.ping() > 0
