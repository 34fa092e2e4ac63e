"""MCP tools as the model sees them, and the model's tool calls read back."""

from __future__ import annotations

import json
import re
from typing import Any

from sessions.providers._types import ToolCall, ToolSpec

# What both APIs accept as a function name; an MCP tool name may hold dots, slashes or more characters.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64
MAX_RESULT_TEXT = 20_000  # what a model is sent of one tool's result; a page or a frame shows it all


def _provider_name(mcp_name: str, taken: set[str]) -> str:
    if _NAME.fullmatch(mcp_name) and mcp_name not in taken:
        return mcp_name
    base = _NOT_NAME.sub("_", mcp_name)[:MAX_NAME] or "tool"
    name, number = base, 2
    while name in taken:
        suffix = f"_{number}"
        name, number = base[: MAX_NAME - len(suffix)] + suffix, number + 1
    return name


def tool_specs(tools: list[Any]) -> list[ToolSpec]:
    """The MCP tools of a listing (``tools/list`` results' ``tools``) as specs for the model: each
    named as the APIs allow (renamed only when it must be, uniquely), its inputSchema as parameters."""
    specs: list[ToolSpec] = []
    taken: set[str] = set()
    for tool in tools:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            continue
        schema = tool.get("inputSchema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            schema = {"type": "object", "properties": {}}
        name = _provider_name(tool["name"], taken)
        taken.add(name)
        description = tool.get("description") if isinstance(tool.get("description"), str) else ""
        specs.append(ToolSpec(name, tool["name"], description or tool.get("title") or "", schema))
    return specs


def read_arguments(call_id: str, name: str, raw: Any) -> ToolCall:
    """A tool call from its arguments as the API sent them: a JSON object's text (OpenAI) or the object
    itself (Anthropic); anything else keeps what came and says what is wrong with it."""
    if isinstance(raw, dict):
        return ToolCall(call_id, name, raw, json.dumps(raw, ensure_ascii=False))
    text = raw if isinstance(raw, str) else json.dumps(raw)
    if not text.strip():
        return ToolCall(call_id, name, {}, text)
    try:
        value = json.loads(text)
    except ValueError as exc:
        return ToolCall(call_id, name, {}, text, f"its arguments are not JSON ({exc})")
    if not isinstance(value, dict):
        return ToolCall(call_id, name, {}, text, "its arguments are not a JSON object")
    return ToolCall(call_id, name, value, text)


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
