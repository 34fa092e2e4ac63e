"""Anthropic's Messages API: text and tool_use blocks, tool results sent back as the user's."""

from __future__ import annotations

import json
from typing import Any

from sessions.providers._tools import read_arguments
from sessions.providers._types import ChatRequest, Message, ModelConfig, ProviderError, Reply

VERSION = "2023-06-01"
STOPS = {
    "end_turn": "end",
    "stop_sequence": "stop_sequence",
    "max_tokens": "max_tokens",
    "tool_use": "tool_use",
}


def endpoint(config: ModelConfig) -> str:
    return config.url.rstrip("/") + "/messages"


def headers(config: ModelConfig) -> dict[str, str]:
    found = {
        "Content-Type": "application/json",
        "Accept": "text/event-stream, application/json",
        "anthropic-version": VERSION,
    }
    if config.api_key:
        found["x-api-key"] = config.api_key
    return found


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.text,
                "is_error": message.is_error,
            }
        ]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.text}] if message.text else []
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return blocks


def messages(conversation: list[Message]) -> list[dict[str, Any]]:
    """The conversation as the API takes it: roles alternate, so a tool's results and a person's next
    words, which are all the user's, go in one message."""
    found: list[dict[str, Any]] = []
    for message in conversation:
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if found and found[-1]["role"] == role:
            found[-1]["content"].extend(blocks)
        else:
            found.append({"role": role, "content": blocks})
    return found


def body(config: ModelConfig, request: ChatRequest, stream: bool) -> dict[str, Any]:
    found: dict[str, Any] = {
        "model": config.model,
        "max_tokens": min(request.max_tokens or config.max_tokens, config.max_tokens),
        "messages": messages(request.messages),
    }
    if request.system:
        found["system"] = request.system
    if request.tools:
        found["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if request.must_call:
            found["tool_choice"] = {"type": "any"}
    if request.temperature is not None:
        found["temperature"] = request.temperature
    if request.stop:
        found["stop_sequences"] = list(request.stop)
    if stream:
        found["stream"] = True
    return found


def _usage(reply: Reply, usage: Any) -> None:
    if isinstance(usage, dict):
        if isinstance(usage.get("input_tokens"), int):
            reply.input_tokens = usage["input_tokens"]
        if isinstance(usage.get("output_tokens"), int):
            reply.output_tokens = usage["output_tokens"]


def parse_response(answer: Any) -> Reply:
    """A whole (not streamed) answer: its content blocks in order."""
    try:
        if answer.get("type") == "error":
            raise ProviderError(f"the API answered an error: {error_text(answer)}")
        reply = Reply(
            stop=STOPS.get(str(answer.get("stop_reason")), "end"), model=str(answer.get("model") or "")
        )
        for block in answer["content"]:
            if block["type"] == "text":
                reply.text += str(block["text"])
            elif block["type"] == "tool_use":
                reply.tool_calls.append(
                    read_arguments(str(block["id"]), str(block["name"]), block.get("input"))
                )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ProviderError(
            f"the answer is not a Messages API message ({type(exc).__name__}: {exc})"
        ) from None
    _usage(reply, answer.get("usage"))
    return reply


class StreamAssembler:
    """A streamed answer put together from its events: each content block opened, filled by its deltas
    (text, or a tool_use's input as pieces of JSON text) and closed; the stop reason and usage come last.
    Pieces are joined once, at the end: adding each to a string would cost the square of the answer."""

    def __init__(self) -> None:
        self.reply = Reply()
        self._blocks: dict[int, dict[str, Any]] = {}
        self.pieces = 0  # pieces of text so far: it grows with the text
        self.done = False

    def feed(self, event: str, data: str) -> None:
        try:
            payload = json.loads(data)
        except ValueError:
            raise ProviderError(f"a streamed event is not JSON: {data[:120]!r}") from None
        if not isinstance(payload, dict):
            raise ProviderError(f"a streamed event is not a JSON object: {data[:120]!r}")
        kind = payload.get("type", event)
        try:
            self._event(kind, payload)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ProviderError(f"a streamed {kind} event is not as the API sends it ({exc})") from None

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "error":
            raise ProviderError(f"the stream ended with an error: {error_text(payload)}")
        if kind == "message_start":
            message = payload["message"]
            self.reply.model = str(message.get("model") or "")
            _usage(self.reply, message.get("usage"))
        elif kind == "content_block_start":
            block = dict(payload["content_block"])
            block["parts"] = [str(block.get("text") or "")]
            block["json"] = []
            self._blocks[int(payload["index"])] = block
        elif kind == "content_block_delta":
            block = self._blocks[int(payload["index"])]
            delta = payload["delta"]
            if delta["type"] == "text_delta":
                block["parts"].append(str(delta["text"]))
                self.pieces += 1
            elif delta["type"] == "input_json_delta":
                block["json"].append(str(delta["partial_json"]))
        elif kind == "message_delta":
            stop = payload.get("delta", {}).get("stop_reason")
            if stop:
                self.reply.stop = STOPS.get(str(stop), "end")
            usage = payload.get("usage") or {}
            if isinstance(usage.get("output_tokens"), int):
                self.reply.output_tokens = usage["output_tokens"]
        elif kind == "message_stop":
            self.done = True

    def text(self) -> str:
        """The answer's text so far: its text blocks, in order."""
        blocks = (self._blocks[index] for index in sorted(self._blocks))
        return "".join("".join(b["parts"]) for b in blocks if b.get("type") == "text")

    def result(self) -> Reply:
        self.reply.text, self.reply.tool_calls = self.text(), []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.get("type") == "tool_use":
                # The input comes whole in the start event or in pieces of JSON text: never both.
                raw = "".join(block["json"]) if block["json"] else block.get("input") or {}
                self.reply.tool_calls.append(
                    read_arguments(str(block.get("id")), str(block.get("name")), raw)
                )
        if not self.reply.stop:
            self.reply.stop = "tool_use" if self.reply.tool_calls else "end"
        return self.reply


def error_text(answer: Any) -> str:
    """What an error answer's body says (``{"type": "error", "error": {"message": …}}``)."""
    if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
        return str(answer["error"].get("message") or answer["error"].get("type") or "")[:300]
    return ""
