"""A replay's outcome as data: each step with its differences, and the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessions.replay._diff import Difference

__all__ = ["StepReport", "summary"]


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
    """How many steps there were and how many changed, with every step's report."""
    return {
        "steps": len(steps),
        "changed": sum(1 for step in steps if step.changed),
        "report": [step.to_dict() for step in steps],
    }
