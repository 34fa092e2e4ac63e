"""Sampling requests a tool sends while a chat calls it, answered by the chat's model when the chat says
so: the request's messages go to the model, its answer back to the server as the client's, on the
session's timeline as any sampling answer, and in the chat as an entry with its tokens and cost."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from sessions.models import McpSession, PendingReview
from sessions.playground import costs
from sessions.playground.models import Chat, ChatEntry
from sessions.providers import ChatRequest, Message, ModelConfig, ProviderError, Reply, complete
from sessions.runtime import client
from sessions.runtime import messages as m

__all__ = ["answered_while", "sampling_request", "sampling_result"]

SAMPLING = "sampling/createMessage"
STOP_REASONS = {"end": "endTurn", "max_tokens": "maxTokens", "tool_use": "toolUse"}
_Result = TypeVar("_Result")


def _text(content: Any) -> str:
    """The text of MCP content (a block or a list of them); what is not text is named, not sent."""
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type"):
            parts.append(f"[{block['type']} content left out]")
    return "\n".join(parts)


def sampling_request(params: dict[str, Any], temperature: float | None) -> ChatRequest:
    """The model request for a ``sampling/createMessage``'s params: its system prompt and messages, and
    its temperature (else the chat's). No tools: the server asked for words."""
    messages = [
        Message(message["role"], _text(message.get("content")))
        for message in params.get("messages") or []
        if isinstance(message, dict) and message.get("role") in ("user", "assistant")
    ]
    system = params.get("systemPrompt") if isinstance(params.get("systemPrompt"), str) else ""
    asked = params.get("temperature")
    if isinstance(asked, int | float) and not isinstance(asked, bool):
        temperature = float(asked)
    return ChatRequest(system or "", messages, [], temperature)


def sampling_result(reply: Reply, config: ModelConfig) -> dict[str, Any]:
    """The model's answer as ``CreateMessageResult``."""
    return {
        "role": "assistant",
        "content": {"type": "text", "text": reply.text},
        "model": reply.model or config.model,
        "stopReason": STOP_REASONS.get(reply.stop, "endTurn"),
    }


def _max_tokens(params: dict[str, Any], config: ModelConfig) -> ModelConfig:
    asked = params.get("maxTokens")
    if isinstance(asked, int) and not isinstance(asked, bool) and 0 < asked < config.max_tokens:
        return dataclasses.replace(config, max_tokens=asked)
    return config


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
        reply = await complete(_max_tokens(params, config), sampling_request(params, chat.temperature))
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
        result = sampling_result(reply, config)
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
