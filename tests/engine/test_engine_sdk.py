"""The engine against servers built with the official `mcp` Python SDK, over stdio and HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support.engine import EventLog

from sessions.engine import ClientOptions, Frame, HttpTarget, McpError, PendingRequest, StdioTarget, connect

pytestmark = pytest.mark.slow


@pytest.fixture(params=["stdio", "http-sse", "http-json"])
def target(request: pytest.FixtureRequest) -> Any:
    if request.param == "stdio":
        spec = request.getfixturevalue("sdk_stdio")
        target: Any = StdioTarget(spec["command"], spec["args"])
    else:
        url = request.getfixturevalue("sdk_http_sse" if request.param == "http-sse" else "sdk_http_json")
        target = HttpTarget(url, transport="http")
    return request.param, target


async def test_structured_output_tools_resources_and_prompts(target: Any) -> None:
    session = connect(target[1], ClientOptions(timeout=20))
    log = EventLog(session)
    async with session:
        tools = {t["name"]: t for t in await session.list_all("tools/list", "tools")}
        assert "outputSchema" in tools["add"]
        added = await session.call_tool("add", {"a": 2, "b": 3})
        assert added["structuredContent"] == {"result": 5}
        failed = await session.call_tool("fail", {})
        assert failed["isError"] is True
        info = await session.read_resource("info://server")
        assert info["contents"][0]["text"]
        templates = await session.list_all("resources/templates/list", "resourceTemplates")
        assert templates[0]["uriTemplate"] == "greeting://{name}"
        greeting = await session.read_resource("greeting://Ada")
        assert "Ada" in greeting["contents"][0]["text"]
        prompt = await session.get_prompt("greet", {"name": "Ada"})
        assert "Ada" in str(prompt["messages"])
        await session.set_logging_level("debug")
        with pytest.raises(McpError) as bad_level:
            await session.set_logging_level("loud")
        assert bad_level.value.code == -32602
    assert not [v for f in log.frames for v in f.verdicts if v.severity == "error"]


async def test_progress_and_logs_arrive_on_the_reply_stream(target: Any) -> None:
    kind, target = target
    session = connect(target, ClientOptions(timeout=20))
    log = EventLog(session)
    seen: list[float] = []
    async with session:
        await session.set_logging_level("debug")
        await session.call_tool(
            "slow", {"steps": 3, "delay": 0.01}, on_progress=lambda p: seen.append(p.progress)
        )
    if kind == "http-json":
        # JSON reply mode has no stream to carry notifications: the SDK drops them.
        assert not seen and not log.messages("in", "notifications/progress")
        return
    assert seen == [1, 2, 3]
    assert log.messages("in", "notifications/message")


async def test_elicitation_sampling_and_roots_through_the_sdk(sdk_stdio: dict[str, Any]) -> None:
    roots = [{"uri": "file:///work", "name": "work"}]
    session = connect(
        StdioTarget(sdk_stdio["command"], sdk_stdio["args"]), ClientOptions(timeout=20, roots=roots)
    )
    log = EventLog(session)
    async with session:
        ask = asyncio.ensure_future(session.call_tool("ask_name", {}))
        pending = await log.pending("elicitation/create")
        session.respond(pending.key, {"action": "accept", "content": {"name": "Grace"}})
        assert "Hello, Grace!" in str(await asyncio.wait_for(ask, 10))
        declined = asyncio.ensure_future(session.call_tool("ask_name", {}))
        second = await log.wait_for(lambda e: isinstance(e, PendingRequest) and e.key != pending.key)
        session.respond(second.key, {"action": "decline"})
        assert "decline" in str(await asyncio.wait_for(declined, 10))
        listed = await session.call_tool("list_roots", {})
        assert "file:///work" in str(listed)
    requests = [
        f for f in log.frames if isinstance(f, Frame) and f.rpc_kind == "request" and f.direction == "in"
    ]
    assert {f.method for f in requests} == {"elicitation/create", "roots/list"}
