"""Reading the JSON files the CLI is given (config, collection, replies, OAuth credentials)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["read_json"]


def read_json(path: str, what: str, error: type[Exception]) -> Any:
    """The JSON in ``path``; an unreadable file or bad JSON raises ``error`` with a message that names
    ``what`` it is ("config file", "collection", ...) and why."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise error(f"invalid JSON in {what} {path}: {exc}") from None
