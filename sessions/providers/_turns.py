"""One turn of a model over MCP tools: ask it, and judge each tool call it made against the tools it was
offered. The Playground's steps and the evals' runs both take their model turns here."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sessions.providers._client import complete
from sessions.providers._tools import tool_specs
from sessions.providers._types import (
    ChatRequest,
    Message,
    ModelConfig,
    ProviderError,
    Reply,
    ToolCall,
    ToolSpec,
)

if TYPE_CHECKING:
    import httpx


@dataclasses.dataclass
class JudgedCall:
    """A tool call of the model, the MCP tool it names, and why it cannot run ("" when it can)."""

    call: ToolCall
    mcp_name: str
    problem: str = ""


@dataclasses.dataclass
class Turn:
    """A model's turn: what it was asked, its answer and calls, or why there is no answer."""

    request: ChatRequest
    reply: Reply | None
    calls: list[JudgedCall]
    error: str
    ms: float


def judge_calls(reply: Reply, specs: list[ToolSpec]) -> list[JudgedCall]:
    """Each tool call of the answer with the MCP tool it calls; a tool that was not offered, or arguments
    that are not a JSON object, are a problem the model is told as the call's error result."""
    by_name = {spec.name: spec for spec in specs}
    judged = []
    for call in reply.tool_calls:
        spec = by_name.get(call.name)
        if spec is None:
            problem = f"There is no tool named {call.name!r} in this session: it was not called."
            judged.append(JudgedCall(call, "", problem))
        elif call.problem:
            judged.append(
                JudgedCall(call, spec.mcp_name, f"The call of {call.name!r} was not made: {call.problem}.")
            )
        else:
            judged.append(JudgedCall(call, spec.mcp_name))
    return judged


async def take_turn(
    config: ModelConfig,
    system: str,
    messages: list[Message],
    tools: list[dict[str, Any]],
    temperature: float | None = None,
    *,
    on_text: Callable[[str], Awaitable[None]] | None = None,
    text_every: float = 0.25,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Turn:
    """Ask the model with the conversation so far and the MCP ``tools`` (a listing's); never raises for
    what the model got wrong: ``Turn.error`` says it in a sentence."""
    request = ChatRequest(system, messages, tool_specs(tools), temperature)
    started = time.perf_counter()
    try:
        reply = await complete(config, request, on_text=on_text, text_every=text_every, transport=transport)
    except ProviderError as exc:
        ms = (time.perf_counter() - started) * 1000
        return Turn(request, None, [], f"{config.label} could not answer: {exc}", ms)
    ms = (time.perf_counter() - started) * 1000
    return Turn(request, reply, judge_calls(reply, request.tools), "", ms)
