"""Real clients come out clean: what our engine, our CLI (``--record``) and the Python SDK's client
send to real servers, judged by the client rules as a tap's observer would, draws no client verdict.

False positives matter as much as misses: a host that does nothing wrong must not be blamed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession as SdkSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from support.cli import result_of, run_cli, target
from support.engine import EventLog
from support.paths import REPO

from sessions.engine import (
    ClientConduct,
    ClientOptions,
    Frame,
    HttpTarget,
    StdioTarget,
    check_client_frame,
    connect,
    observe_server_frame,
)
from sessions.frames import frame_from_record

pytestmark = pytest.mark.slow

RELAY = REPO / "tests/servers/line_relay.py"
SDK_SERVER = REPO / "tests/servers/sdk_server.py"


def judge(frames: list[Frame], transport: str) -> tuple[list[str], ClientConduct]:
    """Every client verdict a conversation draws: the client's frames judged, the server's observed."""
    conduct = ClientConduct(transport=transport)  # type: ignore[arg-type]
    found = []
    for seen in frames:
        frame = Frame(seen.kind, seen.direction, seen.raw, transport=seen.transport, seq=seen.seq)
        if seen.direction == "out":
            check_client_frame(frame, conduct)
            found += [
                f"{frame.seq} {frame.method}: {v.code} ({v.severity}) {v.message}" for v in frame.verdicts
            ]
        elif seen.direction == "in":
            observe_server_frame(frame, conduct)
    return found, conduct


@pytest.fixture(params=["stdio", "http-sse"])
def sdk_target(request: pytest.FixtureRequest) -> tuple[str, Any]:
    if request.param == "stdio":
        spec = request.getfixturevalue("sdk_stdio")
        return "stdio", StdioTarget(spec["command"], spec["args"])
    return "http", HttpTarget(request.getfixturevalue("sdk_http_sse"), transport="http")


async def test_our_engine_as_a_host_draws_no_client_verdict(sdk_target: tuple[str, Any]) -> None:
    kind, where = sdk_target
    roots = [{"uri": "file:///work", "name": "work"}]
    session = connect(where, ClientOptions(timeout=20, roots=roots))
    log = EventLog(session)
    async with session:
        await session.list_all("tools/list", "tools")
        await session.call_tool("add", {"a": 2, "b": 3})
        await session.call_tool("slow", {"steps": 2, "delay": 0.01}, on_progress=lambda p: None)
        await session.set_logging_level("info")
        await session.read_resource("info://server")
        await session.get_prompt("greet", {"name": "Ada"})
        await session.ping()
        await session.call_tool("list_roots", {})
        ask = asyncio.ensure_future(session.call_tool("ask_name", {}))
        pending = await log.pending("elicitation/create")
        session.respond(pending.key, {"action": "accept", "content": {"name": "Grace"}})
        await asyncio.wait_for(ask, 10)
        llm = asyncio.ensure_future(session.call_tool("ask_llm", {"prompt": "hi"}))
        pending = await log.pending("sampling/createMessage")
        reply = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}
        session.respond(pending.key, reply)
        await asyncio.wait_for(llm, 10)
        slow = await session.start_request(
            "tools/call", {"name": "slow", "arguments": {"steps": 50, "delay": 0.2}}
        )
        await slow.cancel("the test stops it")
    verdicts, conduct = judge(log.frames, kind)
    assert verdicts == []
    assert conduct.phase == "operating" and conduct.protocol_version
    assert log.messages("out", "notifications/cancelled"), "the cancellation was judged too"
    if kind == "http":
        assert conduct.session_id, "the session id came from the initialize reply's head"


def _recorded(path: Path) -> list[Frame]:
    return [frame_from_record(json.loads(line), n) for n, line in enumerate(path.read_text().splitlines(), 1)]


def test_our_cli_calling_a_tool_as_a_task_draws_no_client_verdict(
    tmp_path: Path, everything_stdio: dict
) -> None:
    record = tmp_path / "frames.jsonl"
    args = ["--method", "tools/call", "--tool-name", "simulate-research-query", "--tool-arg", "topic=tides"]
    result_of(run_cli(*target(everything_stdio), *args, "--task", "60000", "--record", str(record)))
    verdicts, conduct = judge(_recorded(record), "stdio")
    assert verdicts == []
    assert conduct.server_capabilities.get("tasks"), "the task rules had a server that declares tasks"


def test_our_cli_over_http_draws_no_client_verdict(tmp_path: Path, sdk_http_sse: str) -> None:
    record = tmp_path / "frames.jsonl"
    args = ["--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=1", "--tool-arg", "b=2"]
    result_of(run_cli(sdk_http_sse, "--transport", "http", *args, "--record", str(record)))
    frames = _recorded(record)
    verdicts, conduct = judge(frames, "http")
    assert verdicts == []
    assert conduct.session_id and any(f.kind == "http" and f.direction == "out" for f in frames)


# Logging, sampling and roots are deprecated in the SDK as of 2026-07-28; this host uses them on purpose.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_the_python_sdk_client_draws_no_client_verdict(tmp_path: Path) -> None:
    log = tmp_path / "relay.jsonl"
    relayed = StdioServerParameters(
        command=sys.executable, args=[str(RELAY), str(log), "--", sys.executable, str(SDK_SERVER), "stdio"]
    )

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hello"), model="m"
        )

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    with anyio.fail_after(30):
        async with (
            stdio_client(relayed) as (read, write),
            SdkSession(
                read,
                write,
                sampling_callback=sampling,
                elicitation_callback=elicitation,
                list_roots_callback=roots,
            ) as sdk,
        ):
            await sdk.initialize()
            await sdk.list_tools()
            await sdk.call_tool("add", {"a": 2, "b": 3})
            await sdk.call_tool("slow", {"steps": 2, "delay": 0.01}, progress_callback=_ignore)
            await sdk.set_logging_level("info")
            await sdk.read_resource("info://server")
            await sdk.get_prompt("greet", {"name": "Ada"})
            await sdk.send_ping()
            await sdk.call_tool("ask_name", {})
            await sdk.call_tool("ask_llm", {"prompt": "hi"})
            await sdk.call_tool("list_roots", {})
            await sdk.send_roots_list_changed()
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    frames = [
        Frame(
            "message", "out" if line["from"] == "client" else "in", line["line"].rstrip("\n").encode(), seq=n
        )
        for n, line in enumerate(lines, 1)
    ]
    verdicts, conduct = judge(frames, "stdio")
    assert verdicts == []
    sent = {json.loads(f.raw).get("method") for f in frames if f.direction == "out"}
    assert {"initialize", "notifications/initialized", "notifications/roots/list_changed"} <= sent
    assert {"sampling", "elicitation", "roots"} <= set(conduct.capabilities)


async def _ignore(progress: float, total: float | None, message: str | None) -> None:
    """A progress callback (the SDK sends a progress token only when there is one)."""
