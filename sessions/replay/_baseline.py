"""What differs between two replays against the same build (a baseline), so that it is not counted as a
change against another: a random value, a time the recognisers do not know, an id of the server's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessions.replay._diff import Difference
from sessions.replay._report import StepReport

__all__ = ["Baseline"]


def _at_or_below(path: str, above: str) -> bool:
    return path == above or (path.startswith(above) and path[len(above)] in ".[")


@dataclass
class Baseline:
    """The differences between two runs of the baseline, step by step: where values vary from run to run."""

    varying: list[Difference] = field(default_factory=list)

    @classmethod
    def learn(cls, second_run: list[StepReport]) -> Baseline:
        """From the second run's reports against the first run (``as_recorded``)."""
        return cls([difference for step in second_run for difference in step.differences])

    def explains(self, difference: Difference) -> Difference | None:
        """The baseline's own difference at or above this one's path, in the same step, if any."""
        return next(
            (
                varying
                for varying in self.varying
                if varying.step == difference.step and _at_or_below(difference.path, varying.path)
            ),
            None,
        )

    def sift(self, steps: list[StepReport]) -> list[dict[str, Any]]:
        """Take out of each step the differences the baseline explains; what was taken out, each saying
        which of the baseline's differences explained it (its path and rule)."""
        dropped: list[dict[str, Any]] = []
        for step in steps:
            kept = []
            for difference in step.differences:
                varying = self.explains(difference)
                if varying is None:
                    kept.append(difference)
                else:
                    dropped.append(
                        {
                            **difference.to_dict(),
                            "because": "baseline",
                            "varies": {"path": varying.path, "rule": varying.rule},
                        }
                    )
            step.differences = kept
        return dropped

    def to_list(self) -> list[dict[str, Any]]:
        return [difference.to_dict() for difference in self.varying]
