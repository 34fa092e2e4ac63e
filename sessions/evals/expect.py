"""Whether a test's transcript meets its expectations: pure functions of the two, each failure a
sentence that says what was expected and what happened."""

from __future__ import annotations

import json
import re
from typing import Any

from sessions.evals.suite import Expect, ExpectedCall

__all__ = ["final_answer", "judge", "matches"]

MAX_SHOWN = 200  # characters of arguments or an answer quoted in a reason


def matches(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` is what ``expected`` asks: equal values (a number as a number, ``true`` never
    ``1``), an object's named members (others may be there too), a list item by item, or a pattern:
    ``{"$regex": "..."}`` a string it is found in, ``{"$any": true}`` anything."""
    if isinstance(expected, dict):
        if set(expected) == {"$any"}:
            return bool(expected["$any"])
        if set(expected) == {"$regex"}:
            return isinstance(actual, str) and re.search(expected["$regex"], actual) is not None
        if not isinstance(actual, dict):
            return False
        return all(key in actual and matches(value, actual[key]) for key, value in expected.items())
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(matches(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    return bool(expected == actual)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _describe(call: ExpectedCall) -> str:
    return call.tool if call.arguments is None else f"{call.tool} {_shown(call.arguments)}"


def _fits(call: ExpectedCall, made: dict[str, Any]) -> bool:
    if made.get("tool") != call.tool:
        return False
    return call.arguments is None or matches(call.arguments, made.get("arguments"))


def _made(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls that ran (those that could not are failures of their own)."""
    return [e for e in transcript if e.get("kind") == "tool" and e.get("status") != "invalid"]


def _calls_seen(made: list[dict[str, Any]]) -> str:
    if not made:
        return "no tool was called"
    return "the calls were: " + ", ".join(f"{m.get('tool')} {_shown(m.get('arguments'))}" for m in made)


def _call_reasons(expect: Expect, made: list[dict[str, Any]]) -> list[str]:
    if expect.order == "exact":
        if len(made) != len(expect.calls) or not all(
            _fits(c, m) for c, m in zip(expect.calls, made, strict=False)
        ):
            wanted = ", ".join(_describe(c) for c in expect.calls) or "no call at all"
            return [f"expected exactly {wanted}; {_calls_seen(made)}"]
        return []
    if expect.order == "any":
        left = list(made)
        missing = []
        for call in expect.calls:
            found = next((m for m in left if _fits(call, m)), None)
            if found is None:
                missing.append(call)
            else:
                left.remove(found)
        return [f"expected a call of {_describe(c)}; {_calls_seen(made)}" for c in missing]
    at = 0
    for number, call in enumerate(expect.calls):
        index = next((i for i in range(at, len(made)) if _fits(call, made[i])), None)
        if index is None:
            after = f" after {_describe(expect.calls[number - 1])}" if number else ""
            return [f"expected a call of {_describe(call)}{after}; {_calls_seen(made)}"]
        at = index + 1
    return []


def final_answer(transcript: list[dict[str, Any]]) -> str:
    """The model's last answer's text."""
    answers = [e for e in transcript if e.get("kind") == "assistant"]
    return str(answers[-1].get("text") or "") if answers else ""


def judge(expect: Expect, transcript: list[dict[str, Any]]) -> list[str]:
    """Why the transcript fails the expectations, in order; empty when it passes. A model that could not
    answer, or called a tool that could not run, fails whatever was expected."""
    reasons = [str(e.get("text")) for e in transcript if e.get("kind") == "error"]
    for entry in transcript:
        if entry.get("kind") == "tool" and entry.get("status") == "invalid":
            reasons.append(f"the model's call could not run: {entry.get('text')}")
    made = _made(transcript)
    reasons += _call_reasons(expect, made)
    if expect.no_tool_error:
        for entry in made:
            if entry.get("status") == "failed":
                reasons.append(
                    f"the call of {entry.get('tool')} failed: {str(entry.get('text'))[:MAX_SHOWN]}"
                )
    turns = sum(1 for e in transcript if e.get("kind") == "assistant")
    if expect.max_turns is not None and turns > expect.max_turns:
        reasons.append(f"expected at most {expect.max_turns} turns; the model took {turns}")
    answer = final_answer(transcript)
    shown = _shown(answer)
    for text in expect.answer_contains:
        if text.casefold() not in answer.casefold():
            reasons.append(f"expected the answer to contain {text!r}; it was {shown}")
    if expect.answer_matches and re.search(expect.answer_matches, answer) is None:
        reasons.append(f"expected the answer to match /{expect.answer_matches}/; it was {shown}")
    return reasons
