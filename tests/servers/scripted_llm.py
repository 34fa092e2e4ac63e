"""A model that answers from a script: the OpenAI-compatible chat completions API and Anthropic's
Messages API, for tests (a real model cannot run here).

Usage: python tests/servers/scripted_llm.py PORT SCRIPT_FILE LOG_FILE

POST /v1/chat/completions speaks OpenAI's API, POST /v1/messages Anthropic's. SCRIPT_FILE is JSON:
``{"key": "…", "steps": [step, …]}``; with a key, a request without it (``Authorization: Bearer`` or
``x-api-key``) is refused with 401. Each request takes the first step not yet used whose ``match`` (if
any) is in the text of the request's last message (a person's words or a tool's result); ``repeat``
keeps a step for every request it matches. A step answers with:

- ``text`` and ``tool_calls`` (``[{"id", "name", "arguments"}]``: an object, or a string sent as it
  is, which is how a malformed tool call is made), streamed when the request asks (``stream``: false
  answers whole anyway), in pieces of ``chunk`` characters, ``chunk_delay`` seconds apart;
- ``status`` with ``error`` (an HTTP error in the API's shape), or ``raw`` (a body sent as it is:
  garbage), with ``content_type``;
- ``delay``: seconds to wait before answering (a slow model).

Every request body is appended to LOG_FILE as a JSON line, with its path.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOCK = threading.Lock()
USED: set[int] = set()


def _script() -> dict[str, Any]:
    with open(sys.argv[2], encoding="utf-8") as f:
        return json.load(f)


def _text(content: Any) -> str:
    """The text of a message's content in either API (a string, or blocks with text or tool results)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            parts.append(_text(block.get("text") or block.get("content") or ""))
    return "\n".join(parts)


def _pick(steps: list[dict[str, Any]], last: str) -> dict[str, Any] | None:
    with LOCK:
        for number, step in enumerate(steps):
            if number in USED or step.get("match", "") not in last:
                continue
            if not step.get("repeat"):
                USED.add(number)
            return step
    return None


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (the http.server API)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        script = _script()
        anthropic = self.path == "/v1/messages"
        if self.path not in ("/v1/chat/completions", "/v1/messages"):
            self._json(404, {"error": {"message": f"no such path {self.path}"}})
            return
        key = script.get("key")
        given = self.headers.get("x-api-key") if anthropic else self.headers.get("Authorization")
        if key and given != (key if anthropic else f"Bearer {key}"):
            self._json(
                401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}
            )
            return
        request = json.loads(body)
        with LOCK, open(sys.argv[3], "a", encoding="utf-8") as log:
            log.write(json.dumps({"path": self.path, **request}) + "\n")
        messages = request.get("messages") or [{}]
        step = _pick(script.get("steps") or [], _text(messages[-1].get("content")))
        if step is None:
            self._json(500, {"error": {"message": "the script has no answer for this request"}})
            return
        time.sleep(float(step.get("delay", 0)))
        if "raw" in step:
            self._send(
                step.get("status", 200), step["raw"].encode(), step.get("content_type", "application/json")
            )
        elif "status" in step:
            message = step.get("error", "scripted error")
            error = {"type": "error", "error": {"type": "api_error", "message": message}}
            self._json(step["status"], error if anthropic else {"error": {"message": message}})
        elif request.get("stream") and step.get("stream", True):
            events = _anthropic_events(step) if anthropic else _openai_chunks(step)
            self._stream(events, float(step.get("chunk_delay", 0)))
        else:
            self._json(200, _anthropic_message(step) if anthropic else _openai_completion(step))

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode(), "application/json")

    def _stream(self, events: list[str], pause: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events:
            self.wfile.write(event.encode())
            self.wfile.flush()
            time.sleep(pause)
        self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


MODEL = "scripted-1"


def _openai_completion(step: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": _arguments_text(c["arguments"])},
        }
        for c in step.get("tool_calls") or []
    ]
    message: dict[str, Any] = {"role": "assistant", "content": step.get("text") or None}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return {"id": "cmpl-1", "object": "chat.completion", "model": MODEL, "choices": [choice], "usage": usage}


def _openai_chunks(step: dict[str, Any]) -> list[str]:
    size = int(step.get("chunk", 4))

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {"id": "cmpl-1", "object": "chat.completion.chunk", "model": MODEL, "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}
        ]}  # fmt: skip
        return f"data: {json.dumps(body)}\n\n"

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in _pieces(step.get("text") or "", size)]
    calls = step.get("tool_calls") or []
    for index, call in enumerate(calls):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        events.append(chunk({"tool_calls": [head]}))
        for piece in _pieces(_arguments_text(call["arguments"]), size):
            events.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    events.append(chunk({}, "tool_calls" if calls else "stop"))
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    events.append(f"data: {json.dumps({'id': 'cmpl-1', 'model': MODEL, 'choices': [], 'usage': usage})}\n\n")
    return [*events, "data: [DONE]\n\n"]


def _anthropic_message(step: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": step["text"]}] if step.get("text") else []
    for call in step.get("tool_calls") or []:
        content.append(
            {"type": "tool_use", "id": call["id"], "name": call["name"], "input": call["arguments"]}
        )
    stop = "tool_use" if step.get("tool_calls") else "end_turn"
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 13, "output_tokens": 5},
    }  # fmt: skip


def _anthropic_events(step: dict[str, Any]) -> list[str]:
    size = int(step.get("chunk", 4))

    def event(kind: str, body: dict[str, Any]) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}\n\n"

    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL, "content": [],
               "usage": {"input_tokens": 13, "output_tokens": 1}}  # fmt: skip
    events = [event("message_start", {"message": message}), event("ping", {})]
    index = 0
    if step.get("text"):
        events.append(
            event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        )
        for piece in _pieces(step["text"], size):
            events.append(
                event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
            )
        events.append(event("content_block_stop", {"index": 0}))
        index = 1
    for call in step.get("tool_calls") or []:
        block = {"type": "tool_use", "id": call["id"], "name": call["name"], "input": {}}
        events.append(event("content_block_start", {"index": index, "content_block": block}))
        for piece in _pieces(_arguments_text(call["arguments"]), size):
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(event("content_block_delta", {"index": index, "delta": delta}))
        events.append(event("content_block_stop", {"index": index}))
        index += 1
    stop = "tool_use" if step.get("tool_calls") else "end_turn"
    events.append(event("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}}))
    return [*events, event("message_stop", {})]


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
