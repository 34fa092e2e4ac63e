"""The specification's published JSON schemas (``schemas/``), for what the ``mcp-types`` models lack.

``mcp-types`` has no method table entry for the tasks of 2025-11-25 (``tasks/*``,
``notifications/tasks/status``, ``CreateTaskResult``); the spec publishes them in its JSON schema,
which is shipped beside this module and checked with ``jsonschema``. Imported only when schema
verdicts are asked for.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from ._frames import Verdict

__all__ = ["check", "has", "request_definition", "result_definition"]

SCHEMA_DIR = Path(__file__).parent / "schemas"
_MAX_ERRORS = 5
_MAX_MESSAGE = 200


@functools.cache
def _definitions(version: str) -> dict[str, Any]:
    """The ``$defs`` of a revision's published schema (empty when none is shipped)."""
    path = SCHEMA_DIR / f"{version}.json"
    if not path.is_file():
        return {}
    defs = json.loads(path.read_text(encoding="utf-8")).get("$defs")
    return defs if isinstance(defs, dict) else {}


@functools.cache
def _by_method(version: str) -> dict[str, str]:
    """Method name → the definition of its request or notification (``"method": {"const": …}``)."""
    found: dict[str, str] = {}
    for name, definition in _definitions(version).items():
        method = definition.get("properties", {}).get("method", {}).get("const")
        if isinstance(method, str) and (name.endswith("Request") or name.endswith("Notification")):
            found[method] = name
    return found


@functools.cache
def _validator(version: str, name: str) -> Any:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": _definitions(version),
        "$ref": f"#/$defs/{name}",
    }
    return jsonschema.Draft202012Validator(schema)


def has(version: str, name: str) -> bool:
    return name in _definitions(version)


def request_definition(version: str, method: str) -> str | None:
    """The definition of a request or notification ``method`` in the revision's schema."""
    return _by_method(version).get(method)


def result_definition(version: str, method: str) -> str | None:
    """The definition of ``method``'s result: ``GetTaskRequest`` is answered by ``GetTaskResult``."""
    request = request_definition(version, method)
    if request is None or not request.endswith("Request"):
        return None
    result = request[: -len("Request")] + "Result"
    return result if has(version, result) else None


def _describe(error: Any) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(root)"
    message = str(error.message)
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + "…"
    return f"{where}: {message}"


def check(version: str, name: str, value: Any, what: str) -> list[Verdict]:
    """Hold ``value`` to definition ``name``; a ``schema`` verdict describes what does not match."""
    errors = sorted(_validator(version, name).iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return []
    described = "; ".join(_describe(e) for e in errors[:_MAX_ERRORS])
    more = len(errors) - _MAX_ERRORS
    if more > 0:
        described += f" (+{more} more)"
    return [Verdict("schema", "error", f"{what} does not match {version} ({name}): {described}")]
