"""Models a person chats with: the OpenAI-compatible chat completions API and Anthropic's Messages API,
with tool calling and streaming. Pure asyncio and httpx, no Django (a contract in pyproject.toml)."""

from sessions.providers._client import complete
from sessions.providers._config import DEFAULT_KEY, parse_models
from sessions.providers._sse import Event, SseParser
from sessions.providers._tools import read_arguments, result_text, tool_specs
from sessions.providers._turns import JudgedCall, Turn, judge_calls, take_turn
from sessions.providers._types import (
    ChatRequest,
    Message,
    ModelConfig,
    ProviderError,
    Reply,
    ToolCall,
    ToolSpec,
)

__all__ = [
    "DEFAULT_KEY",
    "ChatRequest",
    "Event",
    "JudgedCall",
    "Message",
    "ModelConfig",
    "ProviderError",
    "Reply",
    "SseParser",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "complete",
    "judge_calls",
    "parse_models",
    "read_arguments",
    "result_text",
    "take_turn",
    "tool_specs",
]
