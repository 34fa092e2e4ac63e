"""What a chat with a model is made of, whichever API carries it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import httpx

Api = Literal["openai", "anthropic"]


class ProviderError(Exception):
    """The model could not answer; the message says why in a sentence a person can act on, never the key."""


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """One model a chat may use: which API speaks for it, where, and with which key."""

    key: str  # how a form names it: never the URL or the key
    label: str
    api: Api
    url: str
    model: str
    api_key: str = dataclasses.field(default="", repr=False)
    timeout: float = 120.0
    max_tokens: int = 4096
    # Makes the transport every request to it goes through (a team's model: held to the egress rules).
    connect: Callable[[], httpx.AsyncBaseTransport] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: the name it sees, the MCP tool's name, its description and schema."""

    name: str
    mcp_name: str
    description: str
    input_schema: dict[str, Any]


@dataclasses.dataclass
class ToolCall:
    """A tool call the model asked for; ``problem`` says why it cannot run as asked (its arguments)."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw: str = ""
    problem: str = ""


@dataclasses.dataclass
class Message:
    """A turn of the conversation: a person's text, the model's text and tool calls, or a tool's result."""

    role: Literal["user", "assistant", "tool"]
    text: str = ""
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    tool_call_id: str = ""
    is_error: bool = False


@dataclasses.dataclass
class Reply:
    """What the model answered: text, tool calls, why it stopped, and the token counts when it gave them."""

    text: str = ""
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    stop: str = ""
    model: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """One request to a model: the conversation so far, the tools it may call and how to sample."""

    system: str
    messages: list[Message]
    tools: list[ToolSpec]
    temperature: float | None = None
    max_tokens: int | None = None  # at most the model's own (its ``ModelConfig.max_tokens``)
    stop: tuple[str, ...] = ()  # sequences that end the answer
    must_call: bool = False  # the model must call one of the tools (a sampling request's toolChoice required)
