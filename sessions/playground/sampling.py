"""Sampling requests a tool sends while a chat calls it, answered by the chat's model when the chat says
so: the request's messages go to the model, its answer back to the server as the client's, on the
session's timeline as any sampling answer, and in the chat as an entry with its tokens and cost."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sessions.models import McpSession, PendingReview
from sessions.playground import costs
from sessions.playground.models import Chat, ChatEntry
from sessions.providers import (
    ChatRequest,
    Message,
    ModelConfig,
    ProviderError,
    Reply,
    ToolCall,
    ToolSpec,
    complete,
    tool_specs,
)
from sessions.runtime import client
from sessions.runtime import messages as m

__all__ = ["answered_while", "offered_tools", "sampling_request", "sampling_result"]

SAMPLING = "sampling/createMessage"
STOP_REASONS = {
    "end": "endTurn",
    "stop_sequence": "stopSequence",
    "max_tokens": "maxTokens",
    "tool_use": "toolUse",
}
_Result = TypeVar("_Result")


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [
        block for block in (content if isinstance(content, list) else [content]) if isinstance(block, dict)
    ]


def _text(content: Any) -> str:
    """The text of MCP content (a block or a list of them); what is not text is named, not sent."""
    parts = []
    for block in _blocks(content):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type"):
            parts.append(f"[{block['type']} content left out]")
    return "\n".join(parts)


def offered_tools(params: Any) -> list[dict[str, Any]]:
    """The tools a tool-enabled ``sampling/createMessage`` offers (2025-11-25), none when its
    ``toolChoice`` is ``none``."""
    if not isinstance(params, dict):
        return []
    choice = params.get("toolChoice")
    if isinstance(choice, dict) and choice.get("mode") == "none":
        return []
    tools = params.get("tools")
    return (
        [t for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]
        if isinstance(tools, list)
        else []
    )


def _messages(params: dict[str, Any], names: dict[str, str]) -> list[Message]:
    """The request's messages for the model: an assistant's tool uses as its tool calls, a user's tool
    results as the tools' answers (``names``: MCP tool name → the name the model knows it by)."""
    messages: list[Message] = []
    for message in params.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        blocks = _blocks(message.get("content"))
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        rest = [b for b in blocks if b.get("type") not in ("tool_use", "tool_result")]
        if message["role"] == "assistant":
            calls = [
                ToolCall(
                    str(b.get("id") or ""),
                    names.get(str(b.get("name")), str(b.get("name"))),
                    _dict(b.get("input")),
                )
                for b in uses
            ]
            messages.append(Message("assistant", _text(rest), tool_calls=calls))
            continue
        for result in results:
            answer = _text(result.get("content")) or json.dumps(
                result.get("structuredContent"), ensure_ascii=False
            )
            messages.append(
                Message(
                    "tool",
                    answer,
                    tool_call_id=str(result.get("toolUseId") or ""),
                    is_error=result.get("isError") is True,
                )
            )
        if rest or not results:
            messages.append(Message("user", _text(rest)))
    return messages


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _name(use: dict[str, Any], names: dict[str, str]) -> str:
    name = str(use.get("name"))
    return names.get(name, name)


def sampling_request(params: dict[str, Any], temperature: float | None = None) -> ChatRequest:
    """The model request for a ``sampling/createMessage``'s params: its system prompt and messages, its
    maxTokens and stop sequences, its temperature (else ``temperature``), and the tools it offers
    (2025-11-25), named as the model's API allows, a call required when its toolChoice says so."""
    tools = tool_specs(offered_tools(params))
    system = params.get("systemPrompt") if isinstance(params.get("systemPrompt"), str) else ""
    asked = params.get("temperature")
    if isinstance(asked, int | float) and not isinstance(asked, bool):
        temperature = float(asked)
    limit = params.get("maxTokens")
    max_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None
    stops = params.get("stopSequences")
    stop = tuple(str(s) for s in stops if isinstance(s, str) and s) if isinstance(stops, list) else ()
    messages = _messages(params, {spec.mcp_name: spec.name for spec in tools})
    choice = params.get("toolChoice")
    must = bool(tools) and isinstance(choice, dict) and choice.get("mode") == "required"
    return ChatRequest(system or "", messages, tools, temperature, max_tokens, stop, must)


def sampling_result(reply: Reply, config: ModelConfig, tools: list[ToolSpec] | None = None) -> dict[str, Any]:
    """The model's answer as ``CreateMessageResult``: its text, and each tool it called as a
    ``tool_use`` block under the MCP tool's own name (``tools``: the request's specs)."""
    names = {spec.name: spec.mcp_name for spec in tools or []}
    uses = [
        {"type": "tool_use", "id": call.id, "name": names.get(call.name, call.name), "input": call.arguments}
        for call in reply.tool_calls
    ]
    text = [{"type": "text", "text": reply.text}] if reply.text or not uses else []
    content: Any = text + uses if uses else text[0]
    return {
        "role": "assistant",
        "content": content,
        "model": reply.model or config.model,
        "stopReason": "toolUse" if uses else STOP_REASONS.get(reply.stop, "endTurn"),
    }


async def _answer(chat: Chat, session: McpSession, config: ModelConfig, user_id: int, key: str) -> None:
    review = await PendingReview.objects.filter(
        session=session, key=key, method=SAMPLING, status=PendingReview.Status.WAITING
    ).afirst()
    if review is None:
        return  # another request, or one that closed: the event tells of both
    params = review.params if isinstance(review.params, dict) else {}
    entry = ChatEntry(chat=chat, kind=ChatEntry.Kind.SAMPLING, session=session, request_seq=review.frame_seq)
    started = time.perf_counter()
    try:
        asked = sampling_request(params, chat.temperature)
        reply = await complete(config, asked)
    except ProviderError as exc:
        entry.is_error, entry.text = True, f"{config.label} could not answer the sampling request: {exc}"
        await client.call(
            session, m.Reject(key=key, code=-1, message=entry.text, user_id=user_id, by=config.label)
        )
    else:
        entry.text, entry.model_name = reply.text, reply.model[:200]
        entry.input_tokens, entry.output_tokens = reply.input_tokens, reply.output_tokens
        entry.cost = costs.cost_of(config.key, reply.input_tokens, reply.output_tokens)
        note = f"answered by {config.label} for Playground chat {chat.pk}"
        result = sampling_result(reply, config, asked.tools)
        await client.call(session, m.Respond(key=key, result=result, edited=True, note=note, user_id=user_id))
    entry.ms = (time.perf_counter() - started) * 1000
    await sync_to_async(entry.save)()


async def answered_while(
    chat: Chat, session: McpSession, config: ModelConfig | None, user_id: int, work: Awaitable[_Result]
) -> _Result:
    """Run ``work`` (a tool call through the session); meanwhile, when the chat has its model answer
    sampling, answer each sampling request the session opens. The session's events say when one opens:
    the channel joins its group before the call is sent, so none is missed."""
    if chat.sampling != Chat.Sampling.MODEL or config is None:
        return await work
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(session.group_name, channel)
    task = asyncio.ensure_future(work)
    try:
        while True:
            receive = asyncio.ensure_future(layer.receive(channel))
            done, _ = await asyncio.wait({task, receive}, return_when=asyncio.FIRST_COMPLETED)
            if receive not in done:
                receive.cancel()
                return task.result()
            message = receive.result()
            if message.get("event") == m.ReviewChanged.NAME:
                # A request that closed meanwhile: the timeline says how.
                with contextlib.suppress(client.CommandFailed):
                    await _answer(chat, session, config, user_id, str(message.get("key") or ""))
    finally:
        if not task.done():
            task.cancel()
        await layer.group_discard(session.group_name, channel)
