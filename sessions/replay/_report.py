"""A replay's outcome as data: each step with its differences, and the summary; and the same shaped for
a page (values as text, the rules counted), which the CLI's HTML report and the web's view both show."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sessions.replay._diff import Difference

__all__ = ["SHOWN_CHARS", "StepReport", "for_page", "shown", "summary"]

SHOWN_CHARS = 4000
"""Characters of a value a page shows; the JSON report has all of it."""


@dataclass
class StepReport:
    """One step of a replay: initialize (step 0) or a request, and what changed in its answer."""

    number: int
    method: str
    differences: list[Difference] = field(default_factory=list)
    recorded_ms: float | None = None
    replayed_ms: float | None = None
    label: str | None = None
    """What the request names, if anything: a tool, a prompt, a resource's URI."""

    @property
    def changed(self) -> bool:
        return bool(self.differences)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.number,
            "method": self.method,
            "label": self.label,
            "changed": self.changed,
            "recorded_ms": self.recorded_ms,
            "replayed_ms": self.replayed_ms,
            "differences": [d.to_dict() for d in self.differences],
        }


def summary(steps: list[StepReport]) -> dict[str, Any]:
    """How many steps there were and how many changed, the differences counted by rule, and every step's
    report."""
    rules = Counter(d.rule for step in steps for d in step.differences)
    return {
        "steps": len(steps),
        "changed": sum(1 for step in steps if step.changed),
        "by_rule": dict(sorted(rules.items(), key=lambda item: (-item[1], item[0]))),
        "report": [step.to_dict() for step in steps],
    }


def shown(value: Any, absent: bool = False, limit: int = SHOWN_CHARS) -> str:
    """A value as a page shows it: indented JSON (a text as it is), cut at ``limit`` characters."""
    if absent:
        return "(absent)"
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ms(value: Any) -> str:
    return f"{value:.1f} ms" if isinstance(value, int | float) else ""


def for_page(data: dict[str, Any]) -> dict[str, Any]:
    """A replay's data (``summary``'s, with any more keys) with what a page needs: each difference's values
    as text (``was``, ``now``), each step's times as text, and the rules counted as pairs."""
    steps = []
    for step in data["report"]:
        differences = [
            {
                **difference,
                "was": shown(difference["recorded"], difference.get("absent") == "recorded"),
                "now": shown(difference["replayed"], difference.get("absent") == "replayed"),
            }
            for difference in step["differences"]
        ]
        steps.append(
            {
                **step,
                "differences": differences,
                "recorded_time": _ms(step.get("recorded_ms")),
                "replayed_time": _ms(step.get("replayed_ms")),
            }
        )
    by_rule = data.get("by_rule") or {}
    return {
        **data,
        "report": steps,
        "rules": list(by_rule.items()),
        "unchanged": data["steps"] - data["changed"],
    }
