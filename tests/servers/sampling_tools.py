"""An MCP server (the Python SDK's ``MCPServer``, stdio) whose tool asks the client's LLM with tools:
2025-11-25 tool-enabled sampling, used by the test suite.

Usage: python tests/servers/sampling_tools.py [auto|required|none]

Tool ``forecast(city)``: sends ``sampling/createMessage`` offering the tool ``get_weather`` (its
``toolChoice`` the mode given, ``auto`` by default). When the answer uses the tool, the server runs it
(``sunny in <city>``) and asks again with the tool use and its result in the messages; it returns
``<model>: <text>`` of the last answer, or ``tool <name> <input as JSON>`` when the second answer uses
a tool again.
"""

from __future__ import annotations

import json
import sys
import warnings

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

MODE = sys.argv[1] if len(sys.argv) > 1 else "auto"
WEATHER = types.Tool(
    name="get_weather",
    description="The weather in a city.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

server = MCPServer("sampling-tools-server", version="1.0.0")


def _uses(content: object) -> list[types.ToolUseContent]:
    blocks = content if isinstance(content, list) else [content]
    return [block for block in blocks if isinstance(block, types.ToolUseContent)]


def _text(content: object) -> str:
    blocks = content if isinstance(content, list) else [content]
    return " ".join(block.text for block in blocks if isinstance(block, types.TextContent))


@server.tool(description="Ask the client's LLM for a forecast, offering it the get_weather tool.")
async def forecast(city: str, ctx: Context) -> str:
    messages = [
        types.SamplingMessage(role="user", content=types.TextContent(type="text", text=f"Weather in {city}?"))
    ]
    choice = types.ToolChoice(mode=MODE)  # type: ignore[arg-type]
    first = await ctx.session.create_message(
        messages, max_tokens=100, tools=[WEATHER], tool_choice=choice, related_request_id=ctx.request_id
    )
    uses = _uses(first.content)
    if not uses:
        return f"{first.model}: {_text(first.content)}"
    use = uses[0]
    answer = f"sunny in {use.input.get('city', '?')}"
    messages.append(types.SamplingMessage(role="assistant", content=first.content))
    result = types.ToolResultContent(
        type="tool_result", tool_use_id=use.id, content=[types.TextContent(type="text", text=answer)]
    )
    messages.append(types.SamplingMessage(role="user", content=[result]))
    second = await ctx.session.create_message(
        messages, max_tokens=100, tools=[WEATHER], related_request_id=ctx.request_id
    )
    again = _uses(second.content)
    if again:
        return f"tool {again[0].name} {json.dumps(again[0].input, sort_keys=True)}"
    return f"{second.model}: {_text(second.content)}"


if __name__ == "__main__":
    server.run("stdio")
