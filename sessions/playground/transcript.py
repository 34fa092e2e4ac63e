"""A chat's entries as the conversation a model reads, and what a tool's MCP result says in words."""

from __future__ import annotations

import json
from typing import Any

from sessions.playground.models import ChatEntry
from sessions.providers import Message, ToolCall, result_text

__all__ = ["conversation", "result_text", "with_view_contexts"]

MAX_VIEW_CONTEXT = 16 * 1024
"""Characters of one view's context the model is given at most (its JSON is cut, and says so)."""


def conversation(entries: list[ChatEntry]) -> list[Message]:
    """The messages a model is sent: the person's, its own answers with the tool calls it made, and each
    call's result (a denied or impossible call's reason, so the model knows it did not run)."""
    messages: list[Message] = []
    for entry in entries:
        if entry.kind == ChatEntry.Kind.USER:
            messages.append(Message("user", entry.text))
        elif entry.kind == ChatEntry.Kind.ASSISTANT:
            messages.append(Message("assistant", entry.text))
        elif entry.kind == ChatEntry.Kind.TOOL and messages and messages[-1].role in ("assistant", "tool"):
            owner = next(m for m in reversed(messages) if m.role == "assistant")
            arguments = entry.arguments if isinstance(entry.arguments, dict) else {}
            # Arguments that were not a JSON object go back as an empty one: an API may refuse them.
            raw = "" if entry.status == ChatEntry.Status.INVALID else entry.raw_arguments
            owner.tool_calls.append(ToolCall(entry.call_id, entry.tool_name, arguments, raw))
            messages.append(Message("tool", entry.text, tool_call_id=entry.call_id, is_error=entry.is_error))
    return messages


def with_view_contexts(system: str, entries: list[ChatEntry]) -> str:
    """The system prompt with what the chat's MCP App views asked to give the model: each view's last
    ``ui/update-model-context`` (its text blocks, and its structured content as JSON)."""
    parts = [system] if system else []
    for entry in entries:
        context = entry.view_context
        if entry.kind != ChatEntry.Kind.TOOL or not isinstance(context, dict):
            continue
        content = context.get("content")
        blocks: list[Any] = content if isinstance(content, list) else []
        texts = [
            block["text"]
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        ]
        if context.get("structuredContent") is not None:
            texts.append(json.dumps(context["structuredContent"], ensure_ascii=False, sort_keys=True))
        said = "\n".join(texts)
        if len(said) > MAX_VIEW_CONTEXT:
            said = said[:MAX_VIEW_CONTEXT] + f" [cut at {MAX_VIEW_CONTEXT} characters]"
        if said:
            parts.append(f"Context from the view of the {entry.tool_name} call {entry.call_id}:\n{said}")
    return "\n\n".join(parts)
