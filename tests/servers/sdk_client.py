"""A host built on the Python SDK's client, for the tap's tests: connects, lists the tools, calls one, and
prints what it got as JSON on stdout.

    python sdk_client.py TOOL ARGS_JSON stdio COMMAND [ARGS...]
    python sdk_client.py TOOL ARGS_JSON http URL

The server's process gets this process's whole environment (as a host's config ``env`` would give it),
so a tap started as COMMAND finds its data folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


async def main(tool: str, arguments: dict[str, Any], kind: str, target: str, rest: list[str]) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if kind == "stdio":
            params = StdioServerParameters(command=target, args=rest, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
        else:
            read, write = await stack.enter_async_context(streamable_http_client(target))
        session = await stack.enter_async_context(ClientSession(read, write))
        with anyio.fail_after(30):
            init = await session.initialize()
            tools = await session.list_tools()
            call = await session.call_tool(tool, arguments)
    out = {
        "server": init.server_info.model_dump(mode="json", by_alias=True, exclude_none=True),
        "tools": [t.name for t in tools.tools],
        "call": call.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 5 or sys.argv[3] not in ("stdio", "http"):
        sys.exit("usage: sdk_client.py TOOL ARGS_JSON (stdio COMMAND [ARGS...] | http URL)")
    anyio.run(main, sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:])
