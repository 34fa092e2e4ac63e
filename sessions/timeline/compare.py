"""Compare two sessions: what a server offers now against what it (or another build) offered before.

For each side it takes the session's facts (server info, protocol, capabilities, instructions) and the
newest listing of each feature seen on its timeline since it last connected — tools, prompts,
resources and templates, every page of it — and says what was added, removed or changed, with a
line diff of each changed item's JSON. Typical use: a recording of yesterday's build against today's
live session.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet

from sessions.frames import message_of
from sessions.models import McpSession, TimelineFrame

# method → (the result's list key, the field naming an item)
LISTINGS = {
    "tools/list": ("tools", "name"),
    "prompts/list": ("prompts", "name"),
    "resources/list": ("resources", "uri"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
}


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _since_connect(session: McpSession) -> int:
    """The seq where the newest connection began (items listed before it may be gone)."""
    start = (
        TimelineFrame.objects.filter(session=session, kind="state", transport__state="connecting")
        .order_by("-seq")
        .values_list("seq", flat=True)
        .first()
    )
    return start or 0


def listing(session: McpSession, method: str) -> dict[str, Any] | None:
    """Every item of the newest listing run (all its pages) since the session last connected, by key."""
    key, ident = LISTINGS[method]
    frames = TimelineFrame.objects.filter(
        session=session, method=method, direction="in", rpc_kind="result", seq__gt=_since_connect(session)
    ).order_by("seq")
    items: dict[str, Any] = {}
    seen = False
    for frame in frames:
        result = message_of(frame.raw).get("result")
        if not isinstance(result, dict):
            continue
        seen = True
        for item in result.get(key) or []:
            if isinstance(item, dict) and isinstance(item.get(ident), str):
                items[item[ident]] = item  # the newest listing of an item wins
    return items if seen else None


@dataclass
class Section:
    title: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    same: int = 0
    missing: str = ""

    @property
    def differs(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def _diff(before: Any, after: Any, a: str, b: str) -> list[tuple[str, str]]:
    """A unified diff of two values' JSON, each line with its kind: add, del, hunk or ctx."""
    lines = difflib.unified_diff(
        _pretty(before).splitlines(), _pretty(after).splitlines(), fromfile=a, tofile=b, lineterm="", n=2
    )
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [("head" if line[:3] in ("---", "+++") else kinds.get(line[:1], "ctx"), line) for line in lines]


def _compare_items(title: str, left: dict[str, Any] | None, right: dict[str, Any] | None) -> Section:
    section = Section(title)
    if left is None or right is None:
        which = {
            (True, True): "Neither session has",
            (True, False): "The first session has not",
            (False, True): "The second session has not",
        }[(left is None, right is None)]
        section.missing = (
            f"{which} listed {title.lower()} since it last connected: list them there to compare"
        )
        return section
    for name in sorted(right.keys() - left.keys()):
        section.added.append(name)
    for name in sorted(left.keys() - right.keys()):
        section.removed.append(name)
    for name in sorted(left.keys() & right.keys()):
        if left[name] == right[name]:
            section.same += 1
        else:
            section.changed.append((name, _diff(left[name], right[name], f"a/{name}", f"b/{name}")))
    return section


def _facts(session: McpSession) -> dict[str, Any]:
    return {
        "serverInfo": session.server_info,
        "protocolVersion": session.protocol_version,
        "mode": session.mode,
        "capabilities": session.server_capabilities,
        "instructions": session.instructions,
    }


def compare(a: McpSession, b: McpSession) -> dict[str, Any]:
    facts_a, facts_b = _facts(a), _facts(b)
    facts = [
        (name, _diff(facts_a[name], facts_b[name], "a", "b"))
        for name in facts_a
        if facts_a[name] != facts_b[name]
    ]
    sections = [
        _compare_items(title, listing(a, method), listing(b, method))
        for title, method in (
            ("Tools", "tools/list"),
            ("Prompts", "prompts/list"),
            ("Resources", "resources/list"),
            ("Templates", "resources/templates/list"),
        )
    ]
    return {"a": a, "b": b, "facts": facts, "sections": sections}


def sessions_of(sessions: QuerySet[McpSession]) -> list[McpSession]:
    """Of ``sessions`` (a team's), those that can be compared: newest first, that have listed anything."""
    listed = TimelineFrame.objects.filter(Q(method__in=LISTINGS), direction="in").values("session_id")
    return list(sessions.filter(pk__in=listed).order_by("-created")[:200])
