"""A small MCP server built on the Python SDK (mcp 2.3.0 ``MCPServer``), used by the test suite.

Usage:
    python tests/servers/sdk_server.py stdio
    python tests/servers/sdk_server.py http --port N [--json] [--stateless]

Over HTTP it serves Streamable HTTP at ``http://127.0.0.1:N/mcp`` (bound to 127.0.0.1 only);
``--json`` answers requests with ``application/json`` instead of SSE, ``--stateless`` issues no session id.

Tools: add, echo, slow (progress), ask_name (elicitation), ask_llm (sampling), list_roots (roots),
fail (isError result), needs_login (error -32042: a URL elicitation required). Resource ``info://server``,
template ``greeting://{name}``, prompt ``greet``.
``logging/setLevel`` is served; ``echo`` and ``slow`` send ``notifications/message`` logs.

``SDK_SERVER_VARIANT=next`` in the environment (or ``--next`` after the transport, where the environment is
shared with another build) makes it the next build of itself, for replays: ``add`` takes an optional
third integer ``c``, ``echo`` answers ``TEXT!`` and logs nothing, ``ask_llm`` answers ``canned: 4``
without sampling, ``slow`` waits three times as long between its steps and ``needs_login`` is gone.
``SDK_SERVER_PAGE_SIZE=N`` pages resources/list (below). ``SDK_SERVER_RANDOM=1`` adds ``lucky``, whose
answer is a random number each time (neither a time nor a UUID): what only a baseline tells from a change.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import warnings

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, UrlElicitationRequiredError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel, Field

# Logging, sampling and roots are deprecated as of 2026-07-28; this server exercises them on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]

server = MCPServer(
    "sdk-test-server",
    version="1.0.0",
    instructions="Test server for the MCP inspector test suite.",
    log_level="WARNING",
)

# logging/setLevel threshold; per process (stdio has one client; HTTP sessions share it).
_state = {"level": "debug"}
NEXT = os.environ.get("SDK_SERVER_VARIANT") == "next" or "--next" in sys.argv[2:]


async def _log(ctx: Context, level: str, data: object) -> None:
    if LEVELS.index(level) >= LEVELS.index(_state["level"]):
        await ctx.log(level, data, logger_name="sdk-test-server")  # type: ignore[arg-type]


async def _set_level(ctx: object, params: types.SetLevelRequestParams) -> types.EmptyResult:
    _state["level"] = params.level
    return types.EmptyResult()


server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)


# --- tools -----------------------------------------------------------------------------------------------


if NEXT:

    @server.tool(description="Add two integers (structured output).")
    def add(a: int, b: int, c: int = 0) -> int:
        return a + b + c

else:

    @server.tool(description="Add two integers (structured output).")
    def add(a: int, b: int) -> int:
        return a + b


@server.tool(description="Echo the text back; also logs it at level info.")
async def echo(text: str, ctx: Context) -> str:
    if not NEXT:  # the next build logs no more
        await _log(ctx, "info", f"echo: {text}")
    return f"{text}!" if NEXT else text


@server.tool(description="Sleep `steps` times `delay` seconds, reporting progress after each step.")
async def slow(ctx: Context, steps: int = 5, delay: float = 0.1) -> str:
    for i in range(1, steps + 1):
        await anyio.sleep(delay * 3 if NEXT else delay)
        await ctx.report_progress(i, steps, f"step {i}/{steps}")
        await _log(ctx, "debug", {"step": i})
    return f"done after {steps} steps"


class NameForm(BaseModel):
    name: str = Field(description="Your name")


@server.tool(description="Ask the user for their name via elicitation.")
async def ask_name(ctx: Context) -> str:
    result = await ctx.elicit("What is your name?", NameForm)
    if result.action == "accept":
        return f"Hello, {result.data.name}!"
    return f"elicitation {result.action}"


@server.tool(description="Ask the client's LLM via sampling; returns the reply text.")
async def ask_llm(prompt: str, ctx: Context) -> str:
    if NEXT:
        return "canned: 4"  # the next build answers without asking the client's LLM
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else str(content)
    return f"{result.model}: {text}"


@server.tool(description="Ask the client for its roots; returns them as JSON.")
async def list_roots(ctx: Context) -> str:
    # Request-scoped (rides on the tools/call reply stream) rather than session.list_roots(),
    # which over HTTP would need the client's standalone GET stream.
    result = await ctx.session.send_request(
        types.ListRootsRequest(),
        types.ListRootsResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )
    return result.model_dump_json(by_alias=True, exclude_none=True)


if os.environ.get("SDK_SERVER_RANDOM") == "1":

    @server.tool(description="A lucky number, new each time.")
    def lucky() -> str:
        return f"your lucky number is {secrets.randbelow(10**12)}"


@server.tool(description="Always fails (isError result).")
def fail() -> str:
    raise ToolError("this tool always fails")


def needs_login(url: str = "https://auth.example.com/authorize?session=42") -> str:
    need = types.ElicitRequestURLParams(
        mode="url", message="Sign in to example.com to continue.", url=url, elicitation_id="login-1"
    )
    raise UrlElicitationRequiredError([need])


if not NEXT:
    server.tool(description="Refuse with -32042: the user must open a URL (URL elicitation required) first.")(
        needs_login
    )


# --- resources and prompts -------------------------------------------------------------------------------


@server.resource("info://server", name="server-info", mime_type="text/plain", description="About this server")
def server_info() -> str:
    return "sdk-test-server 1.0.0"


@server.resource("greeting://{name}", mime_type="text/plain", description="A greeting for `name`.")
def greeting(name: str) -> str:
    return f"Hello, {name}!"


@server.prompt(description="Greet someone by name.")
def greet(name: str) -> str:
    return f"Please greet {name} warmly."


# ``SDK_SERVER_PAGE_SIZE=N``: resources/list answers N resources a page (three more resources, page://1..3),
# each next page under a cursor made afresh for it, as a server that signs its cursors would make them.
PAGE_SIZE = int(os.environ.get("SDK_SERVER_PAGE_SIZE") or 0)
_pages: dict[str, int] = {}


async def _list_resources_a_page_at_a_time(
    ctx: object, params: types.PaginatedRequestParams
) -> types.ListResourcesResult:
    resources = await server.list_resources()
    if params.cursor is not None and params.cursor not in _pages:
        raise MCPError(-32602, f"unknown cursor {params.cursor!r}")
    start = _pages.pop(params.cursor, 0) if params.cursor is not None else 0
    cursor = None
    if start + PAGE_SIZE < len(resources):
        cursor = secrets.token_hex(8)
        _pages[cursor] = start + PAGE_SIZE
    return types.ListResourcesResult(resources=resources[start : start + PAGE_SIZE], next_cursor=cursor)


if PAGE_SIZE:
    for number in (1, 2, 3):
        server.resource(f"page://{number}", name=f"page-{number}", mime_type="text/plain")(lambda: "a page")
    server._lowlevel_server.add_request_handler(
        "resources/list", types.PaginatedRequestParams, _list_resources_a_page_at_a_time
    )


# --- entry point -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="transport", required=True)
    stdio = sub.add_parser("stdio")
    stdio.add_argument("--next", action="store_true", help="the next build (as SDK_SERVER_VARIANT=next)")
    http = sub.add_parser("http")
    http.add_argument("--next", action="store_true", help="the next build (as SDK_SERVER_VARIANT=next)")
    http.add_argument("--port", type=int, required=True)
    http.add_argument("--json", action="store_true", help="answer with application/json instead of SSE")
    http.add_argument("--stateless", action="store_true", help="no sessions")
    http.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS with this PEM pair")
    args = parser.parse_args()

    if args.transport == "stdio":
        server.run("stdio")
        return

    import uvicorn

    app = server.streamable_http_app(json_response=args.json, stateless_http=args.stateless, host="127.0.0.1")
    cert, key = args.tls or (None, None)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )


if __name__ == "__main__":
    main()
