"""A chat's entries as the conversation a model reads, and what a tool's MCP result says in words."""

from __future__ import annotations

import json
from typing import Any

from sessions.playground.models import ChatEntry
from sessions.providers import Message, ToolCall

MAX_RESULT_TEXT = 20_000  # what a model is sent of one tool's result; a page or a frame shows it all


def result_text(result: Any, error: Any = None) -> str:
    """A tool's result as the model reads it: its text blocks, other blocks named, the structured
    content when there is no text; an MCP error as what it says."""
    if error is not None:
        message = error.get("message") if isinstance(error, dict) else error
        return f"error: {message}"[:MAX_RESULT_TEXT]
    if not isinstance(result, dict):
        return ""
    parts = []
    for block in result.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "resource_link":
            parts.append(f"[resource link {block.get('uri', '')}]")
        else:
            parts.append(f"[{block.get('type', 'unknown')} content]")
    if not parts and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts)[:MAX_RESULT_TEXT]


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
