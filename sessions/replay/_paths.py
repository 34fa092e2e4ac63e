"""JSON paths: where a difference is (``$.result.tools[?(@.name=="add")].inputSchema``), and the small
JSONPath subset ``--ignore`` takes to say where differences do not count."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

__all__ = ["Item", "Path", "PathError", "Pattern", "render"]


@dataclass(frozen=True, slots=True)
class Item:
    """A list item found by its key rather than its place: ``[?(@.name=="add")]``."""

    key: str
    value: str


Segment = str | int | Item
Path = tuple[Segment, ...]
"""Keys, indexes and items from the answer's root (``$``)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def render(path: Path) -> str:
    """The path as JSONPath text: ``$.result.content[0].text``."""
    parts = ["$"]
    for segment in path:
        if isinstance(segment, Item):
            parts.append(f"[?(@.{segment.key}=={json.dumps(segment.value, ensure_ascii=False)})]")
        elif isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif _NAME.fullmatch(segment):
            parts.append(f".{segment}")
        else:
            parts.append(f"[{json.dumps(segment, ensure_ascii=False)}]")
    return "".join(parts)


class PathError(ValueError):
    """An ``--ignore`` path outside the subset this understands."""


# A step of a pattern: a key, an index, any child (``*``), or any depth before a key (``..key``).
_ANY = "*"
_DEEP = object()
_STEP = re.compile(
    r"""\.\.(?P<deep>[A-Za-z_][A-Za-z0-9_]*|\*)   # ..key, ..*
      | \.(?P<key>[A-Za-z_][A-Za-z0-9_]*|\*)      # .key, .*
      | \[(?P<index>\d+)\]                        # [0]
      | \[\*\]                                    # [*]
      | \[(?P<quoted>'[^']*'|"[^"]*")\]           # ['key'], ["key"]
    """,
    re.VERBOSE,
)


class Pattern:
    """A JSONPath of the subset ``$``, ``.key``, ``['key']``, ``[n]``, ``[*]``, ``.*`` and ``..key``.

    ``[*]`` and ``.*`` match any one key, index or item; ``..key`` the key at any depth below.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        if not text.startswith("$"):
            raise PathError(f"{text!r}: a path starts with $ (e.g. $.result.content[*].text)")
        steps: list[object] = []
        at = 1
        while at < len(text):
            match = _STEP.match(text, at)
            if match is None:
                raise PathError(
                    f"{text!r}: cannot read {text[at:]!r} (use .key, ['key'], [n], [*], .* or ..key)"
                )
            at = match.end()
            if match["deep"] is not None:
                steps += [_DEEP, match["deep"]]
            elif match["key"] is not None:
                steps.append(match["key"])
            elif match["index"] is not None:
                steps.append(int(match["index"]))
            elif match["quoted"] is not None:
                steps.append(match["quoted"][1:-1])
            else:
                steps.append(_ANY)
        self._steps = tuple(steps)

    def __repr__(self) -> str:
        return f"Pattern({self.text!r})"

    def covers(self, path: Path) -> bool:
        """Whether ``path`` is at or below what this pattern names."""
        return _covers(self._steps, path)


def _one(step: object, segment: Segment) -> bool:
    if step is _ANY:
        return True
    if isinstance(segment, Item):
        return False
    return type(step) is type(segment) and step == segment


def _covers(steps: tuple[object, ...], path: Path) -> bool:
    if not steps:
        return True  # everything below a matched path is matched too
    if not path:
        return False
    head = steps[0]
    if head is _DEEP:
        rest = steps[1:]
        return any(_one(rest[0], path[at]) and _covers(rest[1:], path[at + 1 :]) for at in range(len(path)))
    return _one(head, path[0]) and _covers(steps[1:], path[1:])
