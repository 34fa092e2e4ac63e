"""Two conversations side by side: a recording and a replay of it that was recorded in its turn (the web's
"Replay against…", which stores its frames as any session does), compared step by step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sessions.replay._conversation import Conversation, Links, Step
from sessions.replay._drive import Outcome, Outcomes, reports
from sessions.replay._paths import Pattern
from sessions.replay._report import StepReport, shown

__all__ = ["Side", "paired"]


@dataclass
class Side:
    """A step's two sides as a page shows them: each answer and the frame of each request."""

    recorded: str
    replayed: str
    recorded_seq: int | None
    replayed_seq: int | None


def _answer_text(step: Step | None, waiting: str) -> str:
    if step is None:
        return waiting
    if step.answer is None:
        return "(no answer)"
    return shown(step.answer.get("error", step.answer.get("result")))


def paired(
    recorded: Conversation,
    replayed: Conversation | None,
    *,
    complete: bool,
    ignore: Sequence[Pattern] = (),
    latency: bool = True,
) -> tuple[list[StepReport], dict[int, Side], set[int]]:
    """Each step's report (the replay's requests matched to the recording's in their order), each step's
    sides by its number, and the numbers of the steps still to come (``complete=False``: the replay is
    live, and a step not sent or not answered yet is not a change)."""
    wanted = [(at, step) for at, step in enumerate(recorded.steps) if step.request]
    sent = replayed.requests if replayed is not None else []
    links = Links()
    outcomes: Outcomes = {}
    sides: dict[int, Side] = {}
    waiting: set[int] = set()
    for index, (at, step) in enumerate(wanted):
        again = sent[index] if index < len(sent) else None
        assert step.number is not None
        waiting_text = "(not sent yet)" if not complete else "(not sent)"
        sides[step.number] = Side(
            _answer_text(step, "(no answer)"),
            _answer_text(again, waiting_text),
            step.seq,
            again.seq if again is not None else None,
        )
        if again is None or again.answer is None:
            if not complete:
                waiting.add(step.number)
            problem = "not sent" if again is None else "no answer"
            outcomes[at] = (Outcome(problem=problem), dict(links.mapped))
            continue
        links.learn(step.answer, again.answer)
        outcome = Outcome(again.answer, again.latency_ms, None, again.asked, again.notified)
        outcomes[at] = (outcome, dict(links.mapped))
    initialized: Any = (replayed.initialized or {}).get("result") if replayed is not None else None
    found = reports(
        recorded if initialized is not None else _without_initialize(recorded),
        initialized if isinstance(initialized, dict) else {},
        outcomes,
        ignore=ignore,
        latency=latency,
    )
    for report in found:
        if report.number in waiting:
            report.differences = []
    return found, sides, waiting


def _without_initialize(conversation: Conversation) -> Conversation:
    """Initialize's answer left out of the comparison (the replay has none yet)."""
    return Conversation(conversation.initialize, None, conversation.steps, conversation.answers)
