"""The OpenAI-compatible chat completions API (OpenAI, Ollama, vLLM, LiteLLM, most gateways)."""

from __future__ import annotations

import json
from typing import Any

from sessions.providers._tools import read_arguments
from sessions.providers._types import ChatRequest, Message, ModelConfig, ProviderError, Reply

# Finish reasons → the chat's own stop reasons.
STOPS = {"stop": "end", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use"}


def endpoint(config: ModelConfig) -> str:
    return config.url.rstrip("/") + "/chat/completions"


def headers(config: ModelConfig) -> dict[str, str]:
    found = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
    if config.api_key:
        found["Authorization"] = f"Bearer {config.api_key}"
    return found


def _message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "assistant" and message.tool_calls:
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.raw or json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
        return {"role": "assistant", "content": message.text or None, "tool_calls": calls}
    return {"role": message.role, "content": message.text}


def body(config: ModelConfig, request: ChatRequest, stream: bool) -> dict[str, Any]:
    """The request body: the system prompt first, then the conversation, the tools as functions."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    found: dict[str, Any] = {
        "model": config.model,
        "messages": messages + [_message(m) for m in request.messages],
    }
    if request.tools:
        found["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
        if request.must_call:
            found["tool_choice"] = "required"
    if request.temperature is not None:
        found["temperature"] = request.temperature
    if request.max_tokens is not None:
        found["max_tokens"] = min(request.max_tokens, config.max_tokens)
    if request.stop:
        found["stop"] = list(request.stop[:4])  # the API takes four at most
    if stream:
        found["stream"] = True
        found["stream_options"] = {"include_usage": True}
    return found


def _usage(reply: Reply, usage: Any) -> None:
    if isinstance(usage, dict):
        if isinstance(usage.get("prompt_tokens"), int):
            reply.input_tokens = usage["prompt_tokens"]
        if isinstance(usage.get("completion_tokens"), int):
            reply.output_tokens = usage["completion_tokens"]


def parse_response(answer: Any) -> Reply:
    """A whole (not streamed) answer."""
    try:
        choice = answer["choices"][0]
        message = choice["message"]
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise TypeError("tool_calls is not a list")
        reply = Reply(
            text=message.get("content") or "",
            stop=STOPS.get(str(choice.get("finish_reason")), "end"),
            model=str(answer.get("model") or ""),
        )
        for number, call in enumerate(calls):
            function = call["function"]
            reply.tool_calls.append(
                read_arguments(
                    str(call.get("id") or f"call_{number}"), str(function["name"]), function.get("arguments")
                )
            )
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise ProviderError(f"the answer is not a chat completion ({type(exc).__name__}: {exc})") from None
    if not isinstance(reply.text, str):
        raise ProviderError("the answer's content is not text")
    _usage(reply, answer.get("usage"))
    return reply


class StreamAssembler:
    """A streamed answer put together from its chunks (``data:`` events): the content's pieces, and
    each tool call's id, name and arguments, which arrive in pieces keyed by the call's index. Pieces
    are joined once, at the end: adding each to a string would cost the square of the answer."""

    def __init__(self) -> None:
        self.reply = Reply()
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self.done = False

    @property
    def pieces(self) -> int:
        """How many pieces of text have come: it grows with the text."""
        return len(self._text)

    def feed(self, data: str) -> None:
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            raise ProviderError(f"a streamed chunk is not JSON: {data[:120]!r}") from None
        if not isinstance(chunk, dict):
            raise ProviderError(f"a streamed chunk is not a JSON object: {data[:120]!r}")
        if "error" in chunk:
            error = chunk["error"]
            raise ProviderError(f"the stream ended with an error: {_error_text(error)}")
        if chunk.get("model"):
            self.reply.model = str(chunk["model"])
        _usage(self.reply, chunk.get("usage"))
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                raise ProviderError("a streamed choice is not a JSON object")
            delta = choice.get("delta")
            self._delta({} if delta is None else delta)
            if choice.get("finish_reason"):
                self.reply.stop = STOPS.get(str(choice["finish_reason"]), "end")

    def _delta(self, delta: Any) -> None:
        if not isinstance(delta, dict):
            raise ProviderError("a streamed delta is not a JSON object")
        if isinstance(delta.get("content"), str) and delta["content"]:
            self._text.append(delta["content"])
        for piece in delta.get("tool_calls") or []:
            if not isinstance(piece, dict):
                raise ProviderError("a streamed tool call is not a JSON object")
            index = piece.get("index", len(self._calls))
            if not isinstance(index, int):
                raise ProviderError("a streamed tool call's index is not a number")
            call = self._calls.setdefault(index, {"id": "", "name": [], "arguments": []})
            if piece.get("id"):
                call["id"] = str(piece["id"])
            function = piece.get("function") or {}
            if isinstance(function, dict):
                call["name"].append(str(function.get("name") or ""))
                call["arguments"].append(str(function.get("arguments") or ""))

    def text(self) -> str:
        """The answer's text so far."""
        return "".join(self._text)

    def result(self) -> Reply:
        """The answer so far, with its tool calls read (a call with no name is what a stream cut off left)."""
        self.reply.text = self.text()
        self.reply.tool_calls = []
        for index in sorted(self._calls):
            call = self._calls[index]
            name = "".join(call["name"])
            if not name:
                raise ProviderError(f"the stream gave tool call {index} no name")
            arguments = "".join(call["arguments"])
            self.reply.tool_calls.append(read_arguments(call["id"] or f"call_{index}", name, arguments))
        if not self.reply.stop:
            self.reply.stop = "tool_use" if self.reply.tool_calls else "end"
        return self.reply


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or error)[:300]
    return str(error)[:300]


def error_text(answer: Any) -> str:
    """What an error answer's body says (``{"error": {"message": …}}``), if it is that shape."""
    return _error_text(answer["error"]) if isinstance(answer, dict) and "error" in answer else ""
