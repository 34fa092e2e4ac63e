"""The SDK test server plus tools that ask for input the stateless (2026-07-28) way.

Usage (as for sdk_server.py, whose tools, resources and prompts it keeps):
    python tests/servers/sdk_stateless.py stdio
    python tests/servers/sdk_stateless.py http --port N [--json] [--stateless]

Every ``mcp`` 2.3 server answers ``server/discover``; these tools add the input-required flow: instead
of sending a server→client request mid-call, a tool answers ``InputRequiredResult`` and reads the
client's answers from ``ctx.input_responses`` when the client retries.

- ``confirm_name``: asks (elicitation) for a name; ``requestState`` is echoed back and checked.
- ``roots_and_llm``: asks for the roots and a sampling reply at once, in one round.
- ``two_rounds``: elicits twice, one question per round.
- ``routed``: two arguments marked ``x-mcp-header``, which a client mirrors into ``Mcp-Param-*``
  headers over HTTP (the server refuses a call without them with -32020).
- ``touch`` and ``change_tools``: publish a resource update or a tool list change to the client's
  ``subscriptions/listen`` streams.

It also completes prompt and template arguments from a short list of names.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import Context
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sdk_server  # noqa: E402  (the script directory is on sys.path only from here)

server = sdk_server.server

_NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _elicit(message: str) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=_NAME_SCHEMA)  # type: ignore[arg-type]
    )


@server.tool(description="Ask for a name through an input-required round (elicitation).")
async def confirm_name(greeting: str, ctx: Context) -> str | types.InputRequiredResult:
    answers = ctx.input_responses
    if not answers:
        return types.InputRequiredResult(
            input_requests={"name": _elicit("Who is there?")}, request_state="state-1"
        )
    if ctx.request_state != "state-1":
        return f"bad request state {ctx.request_state!r}"
    answer = answers["name"]
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept" or not answer.content:
        return f"elicitation {getattr(answer, 'action', '?')}"
    return f"{greeting}, {answer.content['name']}!"


@server.tool(description="Ask for the roots and a sampling reply in one input-required round.")
async def roots_and_llm(ctx: Context) -> str | types.InputRequiredResult:
    answers = ctx.input_responses
    if not answers:
        sampling = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=[
                    types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi?"))
                ],
                max_tokens=10,
            )
        )
        return types.InputRequiredResult(input_requests={"roots": types.ListRootsRequest(), "llm": sampling})
    roots = answers["roots"]
    llm = answers["llm"]
    uris = [str(r.uri) for r in roots.roots] if isinstance(roots, types.ListRootsResult) else []
    text = getattr(getattr(llm, "content", None), "text", "?")
    return json.dumps({"roots": uris, "llm": text})


@server.tool(description="Elicit twice: one question per input-required round.")
async def two_rounds(ctx: Context) -> str | types.InputRequiredResult:
    answers = ctx.input_responses or {}
    if "first" not in answers and ctx.request_state is None:
        return types.InputRequiredResult(input_requests={"first": _elicit("First?")}, request_state="1")
    if ctx.request_state == "1":
        first = answers["first"]
        name = first.content["name"] if isinstance(first, types.ElicitResult) and first.content else "?"
        return types.InputRequiredResult(
            input_requests={"second": _elicit("Second?")}, request_state=f"2:{name}"
        )
    second = answers["second"]
    name = second.content["name"] if isinstance(second, types.ElicitResult) and second.content else "?"
    return f"{(ctx.request_state or '')[2:]} and {name}"


@server.tool(description="Route by region: `region` and `count` are mirrored into Mcp-Param-* headers.")
async def routed(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})] = 1,
) -> str:
    return f"{region} x{count}"


@server.tool(description="Announce that the resource at `uri` changed (to subscriptions/listen streams).")
async def touch(uri: str, ctx: Context) -> str:
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@server.tool(description="Announce that the tool list changed (to subscriptions/listen streams).")
async def change_tools(ctx: Context) -> str:
    await ctx.notify_tools_changed()
    return "tools changed"


@server.completion()
async def complete_names(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: object,
) -> types.Completion:
    names = ["Ada", "Alan", "Barbara", "Grace"]
    return types.Completion(values=[n for n in names if n.startswith(argument.value)])


if __name__ == "__main__":
    sdk_server.main()
