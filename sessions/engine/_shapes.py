"""Rules on what a server's messages hold that the schema checks let through (or that run without them).

An elicitation's ``requestedSchema`` that nests objects, icons with a scheme a client must reject,
resource blobs that are not base64, tool names outside the characters 2025-11-25 allows, and
resource updates for a URI nobody subscribed to. Pure functions over parsed messages; every rule code
is listed in docs/engine.md.
"""

from __future__ import annotations

import binascii
import math
import re
from collections.abc import Iterator
from typing import Any

from ._frames import Frame

__all__ = [
    "check_result",
    "elicitation_schema_problem",
    "invalid_id_problem",
    "remember_subscription",
    "unsubscribed_update",
]

PRIMITIVE_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})
# A tool name as 2025-11-25 says it SHOULD be: 1 to 128 of these characters.
TOOL_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
TOOL_NAMES_SINCE = "2025-11-25"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# Browsers drop these anywhere in a URL ("java\tscript:" is javascript:).
_URL_IGNORED = str.maketrans("", "", "\t\n\r")
_MAX_REF_DEPTH = 8


# --- elicitation's requestedSchema -----------------------------------------------------------


def elicitation_schema_problem(schema: Any) -> str | None:
    """Why a form elicitation's ``requestedSchema`` is not the flat object of primitives the spec
    allows (a nested object, an array of objects or arrays), or None.

    Lenient where real servers differ without nesting: optional fields as ``anyOf`` with ``null``,
    ``type`` lists of primitives, arrays of enum strings (2025-11-25 multi-select), local ``$ref``s
    to a primitive.
    """
    if schema is None:
        return None  # missing: the schema verdict's business, and a form without fields asks nothing
    if not isinstance(schema, dict):
        return "requestedSchema must be an object schema"
    if schema.get("type", "object") != "object":
        return f"requestedSchema must have type 'object', not {schema.get('type')!r}"
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return "requestedSchema.properties must be an object"
    for name, prop in properties.items():
        problem = _property_problem(prop, schema, 0)
        if problem is not None:
            return f"requestedSchema property {name!r} {problem}; only flat primitive properties are allowed"
    return None


def _property_problem(prop: Any, root: dict[str, Any], depth: int) -> str | None:
    if not isinstance(prop, dict):
        return "is not a schema object"
    if depth > _MAX_REF_DEPTH:
        return "has $refs nested too deeply"
    ref = prop.get("$ref")
    if isinstance(ref, str):
        target = _local_ref(root, ref)
        return _property_problem(target, root, depth + 1) if target is not None else None
    kind = prop.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds or isinstance(prop.get("properties"), dict):
        return "is a nested object"
    if "array" in kinds:
        items = prop.get("items")
        if isinstance(items, dict) and _property_problem(items, root, depth + 1) is not None:
            return "is an array of objects or arrays"
        if isinstance(items, dict) and items.get("type") == "array":
            return "is an array of arrays"
    for key in ("anyOf", "oneOf", "allOf"):
        options = prop.get(key)
        for option in options if isinstance(options, list) else []:
            if isinstance(option, dict) and "const" not in option:
                problem = _property_problem(option, root, depth + 1)
                if problem is not None:
                    return problem
    return None


def _local_ref(root: dict[str, Any], ref: str) -> Any:
    """The value a ``#/...`` reference names inside ``root``, or None (remote or broken refs)."""
    if not ref.startswith("#/"):
        return None
    value: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


# --- request ids -----------------------------------------------------------------------------


def tool_results_problem(messages: Any) -> str | None:
    """2025-11-25 tool-enabled sampling: a user message with tool results holds nothing else, and each
    tool use of an assistant message is answered by a tool result in the user message that follows."""
    if not isinstance(messages, list):
        return None
    for at, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        content = _sampling_blocks(message)
        results = [block for block in content if block.get("type") == "tool_result"]
        if message.get("role") == "user" and results and len(results) != len(content):
            return f"messages[{at}] mixes tool results with other content"
        uses = [block.get("id") for block in content if block.get("type") == "tool_use"]
        if message.get("role") != "assistant" or not uses:
            continue
        following = messages[at + 1] if at + 1 < len(messages) else None
        answered = set()
        if isinstance(following, dict) and following.get("role") == "user":
            answered = {
                b.get("toolUseId") for b in _sampling_blocks(following) if b.get("type") == "tool_result"
            }
        missing = [use for use in uses if use not in answered]
        if missing:
            return f"messages[{at}]'s tool use {missing[0]!r} has no tool result in the user message after it"
    return None


def _sampling_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [
        block for block in (content if isinstance(content, list) else [content]) if isinstance(block, dict)
    ]


def invalid_id_problem(request_id: Any) -> str:
    """What is wrong with a request id that is neither a string nor an integer."""
    if request_id is None:
        return "request id must be a string or an integer, never null"
    if isinstance(request_id, bool):
        return f"request id {str(request_id).lower()} is a boolean; it must be a string or an integer"
    if isinstance(request_id, float):
        what = "a fractional number" if math.isfinite(request_id) else "not a finite number"
        return f"request id {request_id!r} is {what}; it must be a string or an integer"
    kind = "an array" if isinstance(request_id, list) else "an object"
    return f"request id is {kind}; it must be a string or an integer"


def echoable_id(request_id: Any) -> Any:
    """The id an Invalid Request answer carries: the one received when JSON-RPC allows it, else null."""
    if isinstance(request_id, float) and math.isfinite(request_id):
        return request_id
    if isinstance(request_id, int | str) and not isinstance(request_id, bool):
        return request_id
    return None


# --- results ---------------------------------------------------------------------------------


def check_result(method: str, result: Any, frame: Frame, at: str, version: str | None) -> None:
    """Icons, base64 blobs and tool names in a result to one of the client's requests."""
    if not isinstance(result, dict):
        return
    if method in ("initialize", "server/discover"):
        info = result.get("serverInfo")
        if isinstance(info, dict):
            _check_icons(info, "serverInfo", frame, at)
    elif method in _LISTED:
        key = _LISTED[method]
        items = result.get(key)
        for item in items if isinstance(items, list) else []:
            if not isinstance(item, dict):
                continue
            name = item.get("name", item.get("uriTemplate", item.get("uri")))
            _check_icons(item, f"{key[:-1]} {name!r}", frame, at)
            if method == "tools/list":
                _check_tool_name(item.get("name"), frame, at, version)
    elif method == "resources/read":
        contents = result.get("contents")
        for i, item in enumerate(contents if isinstance(contents, list) else []):
            _check_blob(item, f"contents[{i}]", frame, at)
    elif method in ("tools/call", "tasks/result", "prompts/get"):
        for where, block in _content_blocks(result):
            if block.get("type") == "resource":
                _check_blob(block.get("resource"), f"{where}.resource", frame, at)
            elif block.get("type") == "resource_link":
                _check_icons(block, f"{where} (resource link)", frame, at)


# What each list result holds its items under.
_LISTED = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}


def _content_blocks(result: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    content = result.get("content")
    for i, block in enumerate(content if isinstance(content, list) else []):
        if isinstance(block, dict):
            yield f"content[{i}]", block
    messages = result.get("messages")
    for i, message in enumerate(messages if isinstance(messages, list) else []):
        block = message.get("content") if isinstance(message, dict) else None
        if isinstance(block, dict):
            yield f"messages[{i}].content", block


def _check_icons(owner: dict[str, Any], what: str, frame: Frame, at: str) -> None:
    icons = owner.get("icons")
    for i, icon in enumerate(icons if isinstance(icons, list) else []):
        src = icon.get("src") if isinstance(icon, dict) else None
        if not isinstance(src, str):
            continue
        match = _SCHEME.match(src.translate(_URL_IGNORED).lstrip("\x00 \x0b\x0c"))
        scheme = match.group(1).lower() if match else None
        if scheme in ("https", "data"):
            continue
        shown = src if len(src) <= 80 else src[:77] + "..."
        if scheme == "http" or scheme is None:
            # Relative (the TypeScript SDK's example server sends "./mcp.svg") or plain http: as safe as
            # the server's own URL, but not the https or data: URI the spec asks for.
            said = "plain http" if scheme else "a relative URI"
            frame.flag(
                "icon-uri",
                "warning",
                f"{at}{what} icon {i} is {said} ({shown!r}); icons should be https or data: URIs",
            )
        else:
            frame.flag(
                "icon-uri",
                "error",
                f"{at}{what} icon {i} has scheme {scheme + ':'!r} ({shown!r}): a client MUST reject icons "
                "that are not https or data:",
            )


def _check_blob(item: Any, where: str, frame: Frame, at: str) -> None:
    blob = item.get("blob") if isinstance(item, dict) else None
    if not isinstance(blob, str):
        return
    try:
        binascii.a2b_base64(blob, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        frame.flag("invalid-base64", "error", f"{at}{where}.blob is not valid base64 ({exc})")


def _check_tool_name(name: Any, frame: Frame, at: str, version: str | None) -> None:
    if not isinstance(name, str) or version is None or version < TOOL_NAMES_SINCE:
        return
    if TOOL_NAME.fullmatch(name) is None:
        frame.flag(
            "tool-name",
            "warning",
            f"{at}tool name {name!r} should be 1-128 characters of A-Z a-z 0-9 _ - . only",
        )


# --- resource subscriptions ------------------------------------------------------------------


def remember_subscription(message: Any, subscribed: set[str]) -> None:
    """Keep the URI of a resources/subscribe the client sends (an update may name it from now on)."""
    params = message.get("params") if isinstance(message, dict) else None
    uri = params.get("uri") if isinstance(params, dict) else None
    if isinstance(uri, str):
        subscribed.add(uri)


def unsubscribed_update(params: dict[str, Any], subscribed: set[str]) -> str | None:
    """Why a notifications/resources/updated is for no subscription, or None.

    An update may name a sub-resource of the subscribed one, so a URI under any subscribed URI counts.
    """
    uri = params.get("uri")
    if not isinstance(uri, str) or any(uri.startswith(s) for s in subscribed):
        return None
    return f"an update of {uri!r}, which the client never subscribed to (resources/subscribe)"
