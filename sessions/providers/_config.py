"""Which models a chat may use, from the settings: a JSON list, and the sampling drafts' model."""

from __future__ import annotations

import json
import re
from typing import Any

from sessions.providers._types import Api, ModelConfig

_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
APIS: tuple[Api, ...] = ("openai", "anthropic")
DEFAULT_KEY = "default"


def _entry(number: int, entry: Any, taken: set[str]) -> ModelConfig:
    where = f"model {number + 1}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is not a JSON object")
    api = entry.get("api", "openai")
    if api not in APIS:
        raise ValueError(f"{where}: api must be one of {', '.join(APIS)}")
    for field in ("url", "model"):
        if not isinstance(entry.get(field), str) or not entry[field].strip():
            raise ValueError(f"{where}: {field} is required (a string)")
    if not entry["url"].startswith(("http://", "https://")):
        raise ValueError(f"{where}: url must start with http:// or https://")
    key = entry.get("name", entry["model"])
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"{where}: name must be 1 to 64 letters, digits, '_', '.' or '-'")
    if key in taken:
        raise ValueError(f"{where}: the name {key!r} is used twice")
    timeout = entry.get("timeout", 120)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 0 < timeout <= 3600:
        raise ValueError(f"{where}: timeout must be a number of seconds from 0 to 3600")
    max_tokens = entry.get("max_tokens", 4096)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 0 < max_tokens <= 1_000_000:
        raise ValueError(f"{where}: max_tokens must be a whole number from 1 to 1000000")
    api_key = entry.get("api_key", "")
    if not isinstance(api_key, str):
        raise ValueError(f"{where}: api_key must be a string")
    label = entry.get("label") or key
    return ModelConfig(
        key, str(label), api, entry["url"], entry["model"], api_key, float(timeout), max_tokens
    )


def parse_models(text: str, url: str = "", model: str = "", api_key: str = "") -> list[ModelConfig]:
    """The models configured: ``text`` is a JSON list of ``{"name", "api", "url", "model", "api_key",
    "label", "timeout", "max_tokens"}``; the sampling drafts' model (``url``, ``model``) comes first when
    set. ``ValueError`` says which entry is wrong and why (never with its key)."""
    found: list[ModelConfig] = []
    taken: set[str] = set()
    if url and model:
        found.append(ModelConfig(DEFAULT_KEY, model, "openai", url, model, api_key))
        taken.add(DEFAULT_KEY)
    if text.strip():
        try:
            entries = json.loads(text)
        except ValueError as exc:
            raise ValueError(
                f"not JSON ({exc.__class__.__name__} at position {getattr(exc, 'pos', '?')})"
            ) from None
        if not isinstance(entries, list):
            raise ValueError("must be a JSON list of models")
        for number, entry in enumerate(entries):
            config = _entry(number, entry, taken)
            taken.add(config.key)
            found.append(config)
    return found
