"""Draft a sampling reply with a model, for a person to review, edit and approve.

A server's ``sampling/createMessage`` asks the client's LLM. The inspector answers by a person; when
models are configured (the installation's, ``INSPECTOR_LLM_MODELS`` or ``INSPECTOR_LLM_URL`` and
``_MODEL``, and the session team's own), the review card also offers "Draft with" one of them, the
first the request's model hints name chosen unless the person picks another. The request goes to it
as a Playground chat's sampling requests go (``sessions.playground.sampling``), and its answer fills
the reply, which the person still reviews and approves. Keys stay on the server: never in a page, a
frame or a log.
"""

from __future__ import annotations

import json
import time
from typing import Any

from asgiref.sync import sync_to_async

from sessions.models import McpSession, PendingReview
from sessions.playground import turns
from sessions.playground.sampling import sampling_request, sampling_result
from sessions.providers import ProviderError, complete
from sessions.teams import team_models

__all__ = ["LlmError", "choices", "draft", "offered_to", "preferred"]


class LlmError(Exception):
    """The model could not draft a reply; the message says why, without the key."""


def choices(team_id: int | None) -> list[dict[str, str]]:
    """The models a review card offers (``key``, ``label``, ``model``): the installation's, then the
    team's own; no key is read."""
    installation, _ = turns.configured()
    found = [{"key": c.key, "label": c.label, "model": c.model} for c in installation]
    if team_id is not None:
        taken = {c.key for c in installation}
        found += [
            {"key": m.name, "label": m.label or m.name, "model": m.model}
            for m in team_models.listed(team_id)
            if m.name not in taken
        ]
    return found


def offered_to(session: McpSession, reviews: list[PendingReview]) -> list[dict[str, str]]:
    """The models the review cards of ``reviews`` offer to draft with: none when no sampling request
    is among them (nothing read then)."""
    return choices(session.team_id) if any(review.is_sampling for review in reviews) else []


def preferred(params: Any, offered: list[dict[str, str]]) -> str:
    """The model a card offers first: the first of the request's ``modelPreferences.hints`` that is part
    of an offered model's name or id (as the specification lets a client match them), else the first."""
    prefs = params.get("modelPreferences") if isinstance(params, dict) else None
    hints = prefs.get("hints") if isinstance(prefs, dict) else None
    for hint in hints if isinstance(hints, list) else []:
        name = hint.get("name") if isinstance(hint, dict) else None
        if isinstance(name, str) and name.strip():
            wanted = name.strip().lower()
            for choice in offered:
                if any(wanted in choice[part].lower() for part in ("key", "label", "model")):
                    return choice["key"]
    return offered[0]["key"] if offered else ""


async def draft(session: McpSession, key: str, params: dict[str, Any]) -> dict[str, Any]:
    """Ask the model named ``key`` (none: the one the card offers first); return ``{"key", "text",
    "model", "stop_reason", "ms", "tool_name", "tool_input", "more_tools"}`` or raise LlmError. A model
    that calls the request's tools (2025-11-25) fills the card's tool use with its first call."""
    if not key:
        key = preferred(params, await sync_to_async(choices)(session.team_id))
    config = await sync_to_async(turns.model_named)(key, session.team_id)
    if config is None:
        raise LlmError(f"no model named {key[:64]!r} is configured for this team")
    started = time.perf_counter()
    asked = sampling_request(params)
    try:
        reply = await complete(config, asked)
    except ProviderError as exc:
        raise LlmError(str(exc)) from None
    result = sampling_result(reply, config, asked.tools)
    content = result["content"] if isinstance(result["content"], list) else [result["content"]]
    uses = [block for block in content if block["type"] == "tool_use"]
    return {
        "key": config.key,
        "text": reply.text,
        "model": result["model"],
        "stop_reason": result["stopReason"],
        "ms": (time.perf_counter() - started) * 1000,
        "tool_name": uses[0]["name"] if uses else "",
        "tool_input": json.dumps(uses[0]["input"], indent=2, ensure_ascii=False) if uses else "",
        "more_tools": len(uses) - 1 if uses else 0,
    }
