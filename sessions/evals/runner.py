"""One test run against one model: the prompt, then the model's turns (``sessions.providers.take_turn``,
the Playground's) with every tool call it makes run at once through ``call_tool``, until it answers
without calling a tool; the transcript, judged."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sessions.evals.expect import judge
from sessions.evals.suite import DEFAULT_TURNS, Suite, TestCase
from sessions.providers import Message, ModelConfig, ToolCall, result_text, take_turn

if TYPE_CHECKING:
    import httpx

__all__ = ["CallTool", "CaseResult", "ToolOutcome", "run_case"]


@dataclasses.dataclass
class ToolOutcome:
    """What a tool call came to: the MCP result, or an error (JSON-RPC's, or a sentence when it could
    not be sent), its latency, and where it is (a session's frames: ``request_seq``, ``response_seq``)."""

    result: Any = None
    error: Any = None
    latency_ms: float | None = None
    links: dict[str, Any] = dataclasses.field(default_factory=dict)


CallTool = Callable[[str, dict[str, Any]], Awaitable[ToolOutcome]]


@dataclasses.dataclass
class CaseResult:
    test: str
    model: str
    attempt: int
    passed: bool
    reasons: list[str]
    transcript: list[dict[str, Any]]
    ms: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


async def _run_call(call: ToolCall, mcp_name: str, call_tool: CallTool) -> tuple[dict[str, Any], str, bool]:
    outcome = await call_tool(mcp_name, call.arguments)
    result = outcome.result
    failed = outcome.error is not None or (isinstance(result, dict) and result.get("isError") is True)
    text = result_text(result, outcome.error)
    entry = {
        "status": "failed" if failed else "done",
        "text": text,
        "result": {"error": outcome.error} if outcome.error is not None else result,
        "latency_ms": outcome.latency_ms,
        **outcome.links,
    }
    return entry, text, failed


async def run_case(
    config: ModelConfig,
    suite: Suite,
    test: TestCase,
    tools: list[dict[str, Any]],
    call_tool: CallTool,
    attempt: int = 1,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
) -> CaseResult:
    """Run ``test`` once against the model over ``tools`` (a ``tools/list`` result's); never raises for
    what the model or a tool got wrong: the transcript says it and the result fails with the reason."""
    limit = test.expect.max_turns or DEFAULT_TURNS
    transcript: list[dict[str, Any]] = [{"kind": "user", "text": test.prompt}]
    messages = [Message("user", test.prompt)]
    started = time.perf_counter()
    answers = 0
    while True:
        if answers >= limit:
            transcript.append(
                {"kind": "error", "text": f"Stopped: the model still called tools after {limit} turns."}
            )
            break
        turn = await take_turn(config, suite.system, messages, tools, suite.temperature, transport=transport)
        if turn.reply is None:
            transcript.append({"kind": "error", "text": turn.error, "ms": round(turn.ms, 1)})
            break
        answers += 1
        reply = turn.reply
        transcript.append(
            {
                "kind": "assistant",
                "text": reply.text,
                "model": reply.model,
                "ms": round(turn.ms, 1),
                "input_tokens": reply.input_tokens,
                "output_tokens": reply.output_tokens,
            }
        )
        said = Message("assistant", reply.text)
        messages.append(said)
        if not turn.calls:
            break
        for judged in turn.calls:
            call = judged.call
            entry: dict[str, Any] = {
                "kind": "tool",
                "name": call.name,
                "tool": judged.mcp_name,
                "arguments": call.arguments,
            }
            if judged.problem:
                entry.update(status="invalid", text=judged.problem, raw=call.raw)
                text, failed, raw = judged.problem, True, ""
            else:
                ran, text, failed = await _run_call(call, judged.mcp_name, call_tool)
                entry.update(ran)
                raw = call.raw
            transcript.append(entry)
            # Arguments that were not a JSON object go back as an empty one, as the Playground sends them.
            said.tool_calls.append(ToolCall(call.id, call.name, call.arguments, raw))
            messages.append(Message("tool", text, tool_call_id=call.id, is_error=failed))
    reasons = judge(test.expect, transcript)
    ms = (time.perf_counter() - started) * 1000
    return CaseResult(test.name, config.key, attempt, not reasons, reasons, transcript, round(ms, 1))
