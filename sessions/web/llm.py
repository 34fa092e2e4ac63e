"""Draft a sampling reply with a real model, for a person to review, edit and approve.

A server's ``sampling/createMessage`` asks the client's LLM. The inspector answers by a person; with
``INSPECTOR_LLM_URL`` and ``INSPECTOR_LLM_MODEL`` set (any OpenAI-compatible chat completions API:
OpenAI, a local Ollama or vLLM, a gateway), the review card also offers "Draft with <model>": the
request's messages, system prompt, maxTokens, temperature and stop sequences go to that API, and its
answer fills the reply, which the person still reviews and approves. The key
(``INSPECTOR_LLM_API_KEY`` or ``_FILE``) stays on the server: never in a page, a frame or a log.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

# OpenAI finish reasons → MCP stop reasons.
STOP_REASONS = {
    "stop": "endTurn",
    "length": "maxTokens",
    "content_filter": "endTurn",
    "tool_calls": "toolUse",
}
TIMEOUT = 120.0


class LlmError(Exception):
    """The model could not draft a reply; the message says why, without the key."""


def configured_model() -> str:
    """The model drafts come from, or "" when drafting is not set up."""
    return settings.INSPECTOR_LLM_MODEL if settings.INSPECTOR_LLM_URL and settings.INSPECTOR_LLM_MODEL else ""


def _text(content: Any) -> str:
    """The text of MCP content (a block or a list of them); what cannot be text is named, not sent."""
    blocks = content if isinstance(content, list) else [content]
    parts = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind:
            parts.append(f"[{kind} content left out]")
    return "\n".join(parts)


def chat_request(params: dict[str, Any], model: str) -> dict[str, Any]:
    """The chat completions body for a sampling request's params."""
    messages: list[dict[str, str]] = []
    if isinstance(params.get("systemPrompt"), str) and params["systemPrompt"]:
        messages.append({"role": "system", "content": params["systemPrompt"]})
    for message in params.get("messages") or []:
        if isinstance(message, dict) and message.get("role") in ("user", "assistant"):
            messages.append({"role": message["role"], "content": _text(message.get("content"))})
    body: dict[str, Any] = {"model": model, "messages": messages}
    if isinstance(params.get("maxTokens"), int):
        body["max_tokens"] = params["maxTokens"]
    if isinstance(params.get("temperature"), int | float):
        body["temperature"] = params["temperature"]
    if isinstance(params.get("stopSequences"), list) and params["stopSequences"]:
        body["stop"] = [str(s) for s in params["stopSequences"]][:4]
    return body


async def draft(params: dict[str, Any]) -> dict[str, Any]:
    """Ask the configured model; return ``{"text", "model", "stop_reason", "ms"}`` or raise LlmError."""
    import httpx

    model = configured_model()
    if not model:
        raise LlmError("no model is configured (set INSPECTOR_LLM_URL and INSPECTOR_LLM_MODEL)")
    url = settings.INSPECTOR_LLM_URL.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    if settings.INSPECTOR_LLM_API_KEY:
        headers["Authorization"] = f"Bearer {settings.INSPECTOR_LLM_API_KEY}"
    started = time.perf_counter()
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client:
            response = await client.post(url, json=chat_request(params, model), headers=headers)
    except httpx.HTTPError as exc:
        raise LlmError(f"cannot reach {url}: {type(exc).__name__}") from None
    if response.status_code != 200:
        raise LlmError(f"{url} answered HTTP {response.status_code}: {response.text[:200]}")
    try:
        answer = response.json()
        choice = answer["choices"][0]
        text = choice["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError):
        raise LlmError(f"{url} did not answer like a chat completions API") from None
    return {
        "text": str(text),
        "model": str(answer.get("model") or model),
        "stop_reason": STOP_REASONS.get(str(choice.get("finish_reason")), "endTurn"),
        "ms": (time.perf_counter() - started) * 1000,
    }
