"""HTTP header values of the stateless revision (2026-07-28), and ``Mcp-Param-*`` headers.

A tool's input schema may mark a property with ``"x-mcp-header": "Token"``; over Streamable HTTP a
client then mirrors that argument of each tools/call into an ``Mcp-Param-Token`` header, so that
gateways can route on it without reading the body. The annotation is valid only on a string,
integer or boolean property reached from the root through ``properties`` alone, must be an RFC 9110
token, and unique (case-insensitively) within the schema. A client drops a tool whose annotations
are invalid; the inspector keeps it, flags it, and sends no headers for it.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any

X_MCP_HEADER = "x-mcp-header"
PARAM_PREFIX = "Mcp-Param-"
_HEADER_SAFE = re.compile(r"[\x20-\x7e]*")
_B64_SENTINEL = re.compile(r"=\?base64\?.*\?=")
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TYPES = frozenset({"string", "integer", "boolean"})
# JSON Schema keywords whose values are subschemas. Only `properties` keeps a position reachable
# for a header; crossing any of these puts what lies beneath out of reach.
_ONE = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def header_value(value: str) -> str:
    """A value as an HTTP field: printable ASCII as is, anything else as ``=?base64?…?=`` (UTF-8)."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not _B64_SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def _positions(schema: Any) -> Iterator[tuple[tuple[str, ...] | None, dict[str, Any]]]:
    """Every subschema with its path of `properties` names (``None`` once off that path)."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                stack.extend(
                    ((*path, name) if path is not None else None, sub) for name, sub in value.items()
                )
            elif key in _ONE:
                stack.append((None, value))
            elif key in _LIST and isinstance(value, list):
                stack.extend((None, sub) for sub in value)
            elif key in _MAP and isinstance(value, dict):
                stack.extend((None, sub) for sub in value.values())


def problem(schema: Any) -> str | None:
    """Why the schema's ``x-mcp-header`` annotations are invalid, or ``None`` when they are fine."""
    seen: dict[str, str] = {}
    for path, node in _positions(schema):
        if X_MCP_HEADER not in node:
            continue
        if not path:
            return f"{X_MCP_HEADER} sits where no properties-only path reaches"
        where = ".".join(path)
        token = node[X_MCP_HEADER]
        if not isinstance(token, str) or not _TOKEN.fullmatch(token):
            return f"{X_MCP_HEADER} {token!r} on {where!r} is not an HTTP token"
        if node.get("type") not in _TYPES:
            return (
                f"{X_MCP_HEADER} on {where!r} needs type string, integer or boolean, not {node.get('type')!r}"
            )
        if token.lower() in seen:
            return f"{X_MCP_HEADER} {token!r} on {where!r} repeats the one on {seen[token.lower()]!r}"
        seen[token.lower()] = where
    return None


def header_map(schema: Any) -> dict[tuple[str, ...], str]:
    """The argument paths a tools/call mirrors into headers, each with its token (assumes no problem)."""
    return {
        path: node[X_MCP_HEADER]
        for path, node in _positions(schema)
        if path and isinstance(node.get(X_MCP_HEADER), str)
    }


def param_headers(mapping: Mapping[tuple[str, ...], str], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers for these arguments; a missing, null or non-scalar value sends none."""
    headers: dict[str, str] = {}
    for path, token in mapping.items():
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, str | int | float):
            rendered = str(value)
        else:
            continue
        headers[PARAM_PREFIX + token] = header_value(rendered)
    return headers
