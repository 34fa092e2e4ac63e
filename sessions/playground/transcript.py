"""A chat's entries as the conversation a model reads, and what a tool's MCP result says in words."""

from __future__ import annotations

from sessions.playground.models import ChatEntry
from sessions.providers import Message, ToolCall, result_text

__all__ = ["conversation", "result_text"]


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
