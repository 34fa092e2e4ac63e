"""What changed between a recorded answer and the replayed one, semantically.

An answer is compared as the JSON-RPC message's ``result`` or ``error`` (paths start at ``$``, the
message: ``$.result.content[0].text``). Error against result, ``isError``, JSON types, content items
by type, and every value are compared; the four list methods' items are matched by their name (or URI)
rather than their place, and a schema's ``required`` names as a set. A tool result whose ``isError``
flipped is that one change (its content says why it fails now, or why it failed). Values that differ
from run to run are not changes: ISO 8601 timestamps, times of day and UUIDs (also inside a longer text,
and inside a base64 ``blob`` that holds text), the ids the replay mapped to the new server's (a cursor,
a task id), and whatever an ignore pattern covers.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessions.replay._paths import Item, Path, Pattern, render

__all__ = [
    "ABSENT",
    "LIST_KEYS",
    "Difference",
    "compare_answers",
    "compare_asked",
    "compare_latency",
    "compare_notified",
    "masked",
]

# The list methods whose items are matched by a key: method -> (the result's list, the item's keys).
LIST_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tools/list": ("tools", ("name",)),
    "prompts/list": ("prompts", ("name",)),
    "resources/list": ("resources", ("uri", "name")),
    "resources/templates/list": ("resourceTemplates", ("uriTemplate", "name")),
}
SLOWER_FACTOR = 2.0
SLOWER_MS = 50.0
"""A step is slower when it took more than twice as long as recorded and 50 ms more."""
WAITING_METHODS = frozenset({"tasks/result"})
"""Requests answered when something else is done (a task): their time says nothing of the server's speed."""


class _Absent:
    """No value here (a key that is missing on one side)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?", re.IGNORECASE
)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
# A time of day to the second, as a clock or a locale prints it ("20:43:55", "8:43:55 PM").
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?:\s?[AP]M)?\b", re.IGNORECASE)


def masked(text: str) -> str:
    """``text`` with every ISO 8601 timestamp, time of day and UUID in it replaced by a placeholder."""
    return _UUID.sub("<uuid>", _CLOCK.sub("<time>", _TIMESTAMP.sub("<timestamp>", text)))


def _blob_text(value: str) -> str | None:
    """A base64 ``blob``'s bytes as text, when they are UTF-8; else None."""
    try:
        return base64.b64decode(value, validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class Difference:
    """One change: where (the step and the JSON path), which rule it broke, and both values."""

    step: int
    method: str
    path: str
    rule: str
    recorded: Any
    replayed: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "method": self.method,
            "path": self.path,
            "rule": self.rule,
            "recorded": None if self.recorded is ABSENT else self.recorded,
            "replayed": None if self.replayed is ABSENT else self.replayed,
            **({"absent": "recorded" if self.recorded is ABSENT else "replayed"} if self._absent else {}),
        }

    @property
    def _absent(self) -> bool:
        return self.recorded is ABSENT or self.replayed is ABSENT


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class _Comparison:
    """One answer's comparison: the rules, applied from the root down, collecting differences."""

    def __init__(self, step: int, method: str, ignore: Sequence[Pattern], mapped: Mapping[str, str]) -> None:
        self.step, self.method, self.ignore, self.mapped = step, method, ignore, mapped
        self.found: list[Difference] = []

    def add(self, path: Path, rule: str, recorded: Any, replayed: Any) -> None:
        if not any(pattern.covers(path) for pattern in self.ignore):
            self.found.append(Difference(self.step, self.method, render(path), rule, recorded, replayed))

    def ignored(self, path: Path) -> bool:
        return any(pattern.covers(path) for pattern in self.ignore)

    def value(self, path: Path, recorded: Any, replayed: Any) -> None:
        if self.ignored(path):
            return
        if recorded is ABSENT or replayed is ABSENT:
            self.add(path, "added" if recorded is ABSENT else "removed", recorded, replayed)
            return
        kinds = _json_type(recorded), _json_type(replayed)
        if kinds[0] != kinds[1]:
            self.add(path, "type changed", recorded, replayed)
        elif isinstance(recorded, dict):
            self.object(path, recorded, replayed)
        elif isinstance(recorded, list):
            self.array(path, recorded, replayed)
        elif recorded != replayed and not self.same_text(recorded, replayed, blob=path[-1:] == ("blob",)):
            self.add(path, "value changed", recorded, replayed)

    def same_text(self, recorded: Any, replayed: Any, blob: bool = False) -> bool:
        if not isinstance(recorded, str):
            return False
        if self.mapped.get(recorded) == replayed or masked(recorded) == masked(replayed):
            return True
        # A resource's text sent as base64: its times and ids are recognised in the text it holds.
        if blob and isinstance(replayed, str):
            was, now = _blob_text(recorded), _blob_text(replayed)
            return was is not None and now is not None and masked(was) == masked(now)
        return False

    def object(self, path: Path, recorded: dict[str, Any], replayed: dict[str, Any]) -> None:
        for key in [*recorded, *(k for k in replayed if k not in recorded)]:
            here = (*path, key)
            was, now = recorded.get(key, ABSENT), replayed.get(key, ABSENT)
            if key == "content" and isinstance(was, list) and isinstance(now, list):
                self.content(here, was, now)
            elif key == "required" and _schema(recorded, replayed) and _names(was) and _names(now):
                self.required(here, was, now)
            else:
                self.value(here, was, now)

    def array(self, path: Path, recorded: list[Any], replayed: list[Any]) -> None:
        for index in range(max(len(recorded), len(replayed))):
            was = recorded[index] if index < len(recorded) else ABSENT
            now = replayed[index] if index < len(replayed) else ABSENT
            self.value((*path, index), was, now)

    def content(self, path: Path, recorded: list[Any], replayed: list[Any]) -> None:
        """Content items: when their types differ in order, that is the one change to tell."""
        if self.ignored(path):
            return
        types = [_content_type(item) for item in recorded], [_content_type(item) for item in replayed]
        if types[0] != types[1]:
            self.add(path, "content types changed", types[0], types[1])
        else:
            self.array(path, recorded, replayed)

    def required(self, path: Path, recorded: list[str], replayed: list[str]) -> None:
        """A schema's required names are a set: a name made required (or optional) is the one change."""
        if not self.ignored(path) and set(recorded) != set(replayed):
            self.add(path, "required changed", recorded, replayed)

    def listing(self, path: Path, names: tuple[str, ...], recorded: Any, replayed: Any) -> None:
        """A list result's items matched by name (or URI): added, removed, or changed in their paths."""
        if not (isinstance(recorded, list) and isinstance(replayed, list)):
            self.value(path, recorded, replayed)
            return
        was, now = _keyed(recorded, names), _keyed(replayed, names)
        if was is None or now is None:  # items without their key: compare them by place
            self.array(path, recorded, replayed)
            return
        for item_key in [*was, *(k for k in now if k not in was)]:
            here = (*path, Item(item_key[0], item_key[1]))
            self.value(here, was.get(item_key, ABSENT), now.get(item_key, ABSENT))


def _schema(recorded: dict[str, Any], replayed: dict[str, Any]) -> bool:
    """Whether both objects are JSON Schemas of objects (their ``required`` names the properties)."""
    return all("properties" in side or side.get("type") == "object" for side in (recorded, replayed))


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _content_type(item: Any) -> str:
    return str(item.get("type")) if isinstance(item, dict) else _json_type(item)


def _keyed(items: list[Any], names: tuple[str, ...]) -> dict[tuple[str, str], Any] | None:
    """Items by their first key present (``name``, ``uri``...); ``None`` if one has none or two share one."""
    keyed: dict[tuple[str, str], Any] = {}
    for item in items:
        key = next(
            (
                (name, item[name])
                for name in names
                if isinstance(item, dict) and isinstance(item.get(name), str)
            ),
            None,
        )
        if key is None or key in keyed:
            return None
        keyed[key] = item
    return keyed


def compare_answers(
    step: int,
    method: str,
    recorded: Mapping[str, Any],
    replayed: Mapping[str, Any],
    *,
    ignore: Sequence[Pattern] = (),
    mapped: Mapping[str, str] | None = None,
) -> list[Difference]:
    """The differences between two answers to the same request (each a message: ``result`` or ``error``).

    ``mapped``: recorded ids the replay sent as the new server's (a cursor, a task id) -> those.
    """
    comparison = _Comparison(step, method, ignore, mapped or {})
    was_error, now_error = "error" in recorded, "error" in replayed
    if was_error != now_error:
        comparison.add(
            (),
            "now an error" if now_error else "no longer an error",
            recorded.get("error" if was_error else "result"),
            replayed.get("error" if now_error else "result"),
        )
        return comparison.found
    if was_error:
        comparison.value(("error",), recorded.get("error"), replayed.get("error"))
        return comparison.found
    was, now = recorded.get("result", ABSENT), replayed.get("result", ABSENT)
    if not (isinstance(was, dict) and isinstance(now, dict)):
        comparison.value(("result",), was, now)
        return comparison.found
    if bool(was.get("isError")) != bool(now.get("isError")) and not comparison.ignored(("result", "isError")):
        # A tool that now fails (or no longer does) says why in its content: that is the one change, as an
        # error where a result was is.
        comparison.add(
            ("result", "isError"), "isError changed", bool(was.get("isError")), bool(now.get("isError"))
        )
        return comparison.found
    listed = LIST_KEYS.get(method)
    for key in [*was, *(k for k in now if k not in was)]:
        here: Path = ("result", key)
        if key == "isError":
            continue
        if listed is not None and key == listed[0]:
            comparison.listing(here, listed[1], was.get(key, ABSENT), now.get(key, ABSENT))
        elif key == "content" and isinstance(was.get(key), list) and isinstance(now.get(key), list):
            comparison.content(here, was[key], now[key])
        else:
            comparison.value(here, was.get(key, ABSENT), now.get(key, ABSENT))
    return comparison.found


def compare_latency(
    step: int, method: str, recorded_ms: float | None, replayed_ms: float | None
) -> list[Difference]:
    """``slower`` when the replayed answer took more than twice as long as recorded, and 50 ms more
    (never for tasks/result, which waits for its task)."""
    if recorded_ms is None or replayed_ms is None or method in WAITING_METHODS:
        return []
    if replayed_ms > SLOWER_FACTOR * recorded_ms and replayed_ms - recorded_ms > SLOWER_MS:
        return [
            Difference(step, method, "latency_ms", "slower", round(recorded_ms, 1), round(replayed_ms, 1))
        ]
    return []


def compare_asked(step: int, method: str, recorded: list[str], replayed: list[str]) -> list[Difference]:
    """``server requests changed`` when the server asked the client otherwise during the step (sampling,
    elicitation: the methods, in order)."""
    if recorded == replayed:
        return []
    return [Difference(step, method, "server requests", "server requests changed", recorded, replayed)]


def compare_notified(
    step: int, method: str, recorded: Mapping[str, int], replayed: Mapping[str, int]
) -> list[Difference]:
    """``notifications changed`` for each method the server notified a different number of times during
    the step (its progress), at ``notifications["METHOD"]``, with both counts."""
    return [
        Difference(step, method, f"notifications[{json.dumps(name)}]", "notifications changed", was, now)
        for name in sorted({*recorded, *replayed})
        if (was := recorded.get(name, 0)) != (now := replayed.get(name, 0))
    ]
