"""Two builds of one small MCP server (the Python SDK's low-level ``Server``) that differ in planted ways,
for the replay's proof: a recording made against build A and replayed against build B reports each
planted change once, and nothing else.

Usage:
    python tests/servers/planted.py stdio [--build A|B]
    python tests/servers/planted.py http --port N [--build A|B]

``PLANTED_BUILD=B`` in the environment does what ``--build B`` does; A is the default. Build B:

- ``retired`` is gone (a tool removed) and ``fresh`` is new (a tool added);
- ``greet``'s ``greeting`` is required (a schema field made required);
- ``hello`` answers ``hello, world!`` (a result's text changed);
- ``picture`` answers an image rather than text (a content item's type changed);
- ``divide`` fails with ``isError`` (a tool now failing);
- the ``prompts`` capability is dropped (no prompts/list);
- ``wait`` sleeps 0.5 s where A answers at once (a slower step).

Every tool answers content only (no ``structuredContent``), so each change shows in one place.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

SLOWER_SECONDS = 0.5
# One red pixel, as PNG: build B's picture.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _build() -> str:
    if "--build" in sys.argv:
        at = sys.argv.index("--build")
        return sys.argv[at + 1] if at + 1 < len(sys.argv) else "A"
    return os.environ.get("PLANTED_BUILD", "A")


B = _build().upper() == "B"


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_TEXT = {"type": "string"}
TOOLS = [
    types.Tool(name="hello", description="Say hello.", input_schema=_object({}, [])),
    types.Tool(
        name="greet",
        description="Greet someone.",
        input_schema=_object({"name": _TEXT, "greeting": _TEXT}, ["name", "greeting"] if B else ["name"]),
    ),
    types.Tool(name="picture", description="A picture, of sorts.", input_schema=_object({}, [])),
    types.Tool(
        name="divide",
        description="Divide a by b.",
        input_schema=_object({"a": {"type": "number"}, "b": {"type": "number"}}, ["a", "b"]),
    ),
    types.Tool(name="wait", description="Answer after a while.", input_schema=_object({}, [])),
    types.Tool(
        name="fresh" if B else "retired", description="Here in one build only.", input_schema=_object({}, [])
    ),
]


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error)


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    arguments = params.arguments or {}
    name = params.name
    if name == "hello":
        return _text("hello, world!" if B else "hello, world")
    if name == "greet":
        return _text(f"{arguments.get('greeting', 'hi')}, {arguments.get('name')}")
    if name == "picture":
        if B:
            return types.CallToolResult(
                content=[types.ImageContent(type="image", data=PIXEL, mime_type="image/png")]
            )
        return _text("a red pixel")
    if name == "divide":
        if B:
            return _text("divide is out of order", error=True)
        return _text(str(float(arguments.get("a", 0)) / float(arguments.get("b", 1))))
    if name == "wait":
        if B:
            await anyio.sleep(SLOWER_SECONDS)
        return _text("waited")
    if name in ("fresh", "retired") and name == ("fresh" if B else "retired"):
        return _text(name)
    raise MCPError(-32602, f"Unknown tool: {name}")


async def list_prompts(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="plain", description="A prompt.")])


async def get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    message = types.PromptMessage(
        role="user", content=types.TextContent(type="text", text="Say something plain.")
    )
    return types.GetPromptResult(messages=[message])


server: Server[Any] = Server(
    "planted",
    version="1.0.0",
    instructions="A server with planted changes between its builds.",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    **({} if B else {"on_list_prompts": list_prompts, "on_get_prompt": get_prompt}),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="transport", required=True)
    stdio = sub.add_parser("stdio")
    stdio.add_argument("--build", choices=["A", "B"], default=None)
    http = sub.add_parser("http")
    http.add_argument("--build", choices=["A", "B"], default=None)
    http.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    if args.transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
        return

    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
