"""Which messages a breakpoint stops: "Pause on" rules, read by the tap without Django.

A rule is a JSON object the inspector sends over the control channel (``_control``)::

    {"direction": "out" | "in" | "", "method": "tools/", "name": "echo", "query": TREE | null, "text": "..."}

Every field given must match (``method`` is a prefix, as in the timeline's filter; ``name`` is the
tool's or prompt's ``name`` or the resource's ``uri``, whole). ``query`` is a query of the search
syntax (``sessions/timeline/search.py``), parsed by the inspector and sent as its tree::

    {"op": "and" | "or", "parts": [TREE, ...]}  |  {"key": KEY, "value": "...", "quoted": false}

with KEY one of ``method`` (a prefix), ``dir``, ``status`` (only ``error``), ``server`` (part of the
tap's name or command) or ``""`` (words of the message: a word matches the words it begins, a quoted
phrase those words in order, as the search's full-text index does). What is judged only after a message
passed (``rule:``, ``status:violation``, ``latency:``) cannot stop it, and the inspector refuses it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Described", "RuleError", "describe", "matches", "checked_rule"]

MAX_RULES = 20
MAX_DEPTH = 20
_WORD = re.compile(r"\w+")
KEYS = ("method", "dir", "status", "server", "")


class RuleError(ValueError):
    """A rule the tap cannot run, said so a person can fix it."""


@dataclass(slots=True)
class Described:
    """What a rule looks at in one message: parsed once, only when rules exist."""

    direction: str  # "out": host → server; "in": server → host
    message: Any
    raw: bytes
    method: str = ""  # a response's is its request's, when the tap saw the request
    name: str = ""
    rpc_id: Any = None
    kind: str = "invalid"  # request, notification, result, error, batch, invalid
    _words: list[str] | None = None

    @property
    def words(self) -> list[str]:
        if self._words is None:
            self._words = _WORD.findall(self.raw.decode("utf-8", "replace").lower())
        return self._words


def describe(direction: str, raw: bytes, message: Any) -> Described:
    """The facts of a message the rules read (``message``: the parsed JSON, or None)."""
    found = Described(direction, message, raw)
    if isinstance(message, list):
        found.kind = "batch"
    if not isinstance(message, dict):
        return found
    method, found.rpc_id = message.get("method"), message.get("id")
    if isinstance(method, str):
        found.method = method
        found.kind = "notification" if found.rpc_id is None else "request"
        params = message.get("params")
        if isinstance(params, dict):
            name = params.get("name", params.get("uri"))
            found.name = name if isinstance(name, str) else ""
    else:
        found.kind = "error" if "error" in message else "result"
    return found


def matches(rule: dict[str, Any], message: Described, server: str = "") -> bool:
    """Whether ``rule`` stops ``message``; ``server``: the tap's name and command, for ``server:``."""
    if rule.get("direction") and rule["direction"] != message.direction:
        return False
    if rule.get("method") and not message.method.startswith(rule["method"]):
        return False
    if rule.get("name") and rule["name"] != message.name:
        return False
    query = rule.get("query")
    return query is None or _holds(query, message, server.lower())


def _holds(node: dict[str, Any], message: Described, server: str) -> bool:
    if "op" in node:
        parts = (_holds(part, message, server) for part in node["parts"])
        return any(parts) if node["op"] == "or" else all(parts)
    key, value = node["key"], node["value"]
    if key == "method":
        return message.method.startswith(value)
    if key == "dir":
        return message.direction == value
    if key == "status":
        return _is_error(message.message)
    if key == "server":
        return value.lower() in server
    return _has_words(message.words, _WORD.findall(value.lower()), exact=bool(node.get("quoted")))


def _is_error(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    result = message.get("result")
    return "error" in message or (isinstance(result, dict) and result.get("isError") is True)


def _has_words(words: list[str], wanted: list[str], *, exact: bool) -> bool:
    """``wanted`` in order in ``words``; unquoted, the last one may be the start of a longer word."""
    if not wanted:
        return False
    *whole, last = wanted
    for i in range(len(words) - len(wanted) + 1):
        tail = words[i + len(whole)]
        if words[i : i + len(whole)] == whole and (tail == last if exact else tail.startswith(last)):
            return True
    return False


def checked_rule(rule: Any) -> dict[str, Any]:
    """A rule as the control channel received it, checked whole; ``RuleError`` says what is wrong."""
    if not isinstance(rule, dict):
        raise RuleError("a rule is a JSON object")
    direction = rule.get("direction") or ""
    if direction not in ("", "in", "out"):
        raise RuleError("direction is in, out or empty")
    checked: dict[str, Any] = {"direction": direction}
    for field in ("method", "name"):
        value = rule.get(field) or ""
        if not isinstance(value, str) or len(value) > 500:
            raise RuleError(f"{field} is text of at most 500 characters")
        checked[field] = value
    query = rule.get("query")
    checked["query"] = None if query is None else _checked_node(query, 0)
    text = rule.get("text")
    checked["text"] = text[:500] if isinstance(text, str) and query is not None else ""  # the query as typed
    if not (direction or checked["method"] or checked["name"] or query is not None):
        raise RuleError("a rule needs a direction, a method, a name or a query: it would stop everything")
    return checked


def _checked_node(node: Any, depth: int) -> dict[str, Any]:
    if depth > MAX_DEPTH or not isinstance(node, dict):
        raise RuleError("a query is a tree of at most 20 levels of objects")
    if "op" in node:
        parts = node.get("parts")
        if node["op"] not in ("and", "or") or not isinstance(parts, list) or not parts:
            raise RuleError("a query group has op and or or, and parts")
        return {"op": node["op"], "parts": [_checked_node(p, depth + 1) for p in parts]}
    key, value = node.get("key"), node.get("value")
    if key not in KEYS or not isinstance(value, str) or not value or len(value) > 500:
        raise RuleError(f"a query term's key is one of {', '.join(repr(k) for k in KEYS)}, with a value")
    if key == "dir" and value not in ("in", "out"):
        raise RuleError("dir: is in or out")
    if key == "status" and value != "error":
        raise RuleError("only status:error is known before a message is forwarded")
    return {"key": key, "value": value, "quoted": bool(node.get("quoted"))}
