"""The clients under test, each an async context manager that yields ``call()``: one tools/call echo.

``raw_stdio`` and ``raw_http`` are the minimal hand-written JSON-RPC baselines: no reader task, no
bookkeeping, just write a request and read until its response. ``engine`` is sessions.engine;
``sdk`` is the official ``mcp`` Python SDK client.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import httpx

Call = Callable[[], Awaitable[Any]]
PROTOCOL = "2025-11-25"
INIT_PARAMS = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


def _request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


def _check(response: dict[str, Any]) -> dict[str, Any]:
    if "result" not in response:
        raise RuntimeError(f"call failed: {response}")
    return response["result"]  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def raw_stdio(argv: Sequence[str], tool: str, args: dict[str, Any]) -> AsyncIterator[Call]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=1 << 24,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout, ids = proc.stdin, proc.stdout, itertools.count(1)

    async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(ids)
        stdin.write(_request(request_id, method, params) + b"\n")
        await stdin.drain()
        while True:  # skip notifications and anything else that is not our response
            message = json.loads(await stdout.readline())
            if message.get("id") == request_id and "method" not in message:
                return _check(message)

    try:
        await rpc("initialize", INIT_PARAMS)
        stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        await stdin.drain()
        yield lambda: rpc("tools/call", {"name": tool, "arguments": args})
    finally:
        stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 3)
        except TimeoutError:
            proc.kill()
            await proc.wait()


@contextlib.asynccontextmanager
async def raw_http(url: str, tool: str, args: dict[str, Any]) -> AsyncIterator[Call]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ids = itertools.count(1)
    async with httpx.AsyncClient(timeout=30) as client:

        async def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
            request_id = next(ids)
            response = await client.post(url, content=_request(request_id, method, params), headers=headers)
            response.raise_for_status()
            if method == "initialize" and "mcp-session-id" in response.headers:
                headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                for line in response.text.splitlines():
                    if line.startswith("data:") and line[5:].strip():  # skip empty priming events
                        message = json.loads(line[5:])
                        if message.get("id") == request_id:
                            return _check(message)
                raise RuntimeError("the SSE reply held no response")
            return _check(response.json())

        await rpc("initialize", INIT_PARAMS)
        headers["MCP-Protocol-Version"] = PROTOCOL
        initialized = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        (await client.post(url, content=initialized, headers=headers)).raise_for_status()
        yield lambda: rpc("tools/call", {"name": tool, "arguments": args})
        with contextlib.suppress(httpx.HTTPError):
            await client.delete(url, headers=headers)


@contextlib.asynccontextmanager
async def engine(target: Any, validate: bool, tool: str, args: dict[str, Any]) -> AsyncIterator[Call]:
    from sessions.engine import ClientOptions, connect

    async with connect(target, ClientOptions(validate=validate)) as session:
        yield lambda: session.call_tool(tool, args)


@contextlib.asynccontextmanager
async def sdk(server: Sequence[str] | str, tool: str, args: dict[str, Any]) -> AsyncIterator[Call]:
    """The official SDK client (mcp 2.x ``Client``), with the classic initialize handshake."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    if isinstance(server, str):
        transport: Any = server
    else:
        params = StdioServerParameters(command=server[0], args=list(server[1:]))
        transport = stdio_client(params, errlog=open(os.devnull, "w"))  # noqa: SIM115
    async with Client(transport, mode="legacy", cache=None) as client:

        async def call() -> Any:
            result = await client.call_tool(tool, args)
            if result.is_error:
                raise RuntimeError(f"call failed: {result}")
            return result

        yield call
