"""A replay's report as a person reads it (stdout) and as CI reads it (JUnit XML), from its data."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

__all__ = ["describe", "junit", "text"]

SHOWN_CHARS = 120


def _shown(value: Any, absent: bool) -> str:
    if absent:
        return "(absent)"
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= SHOWN_CHARS else shown[: SHOWN_CHARS - 1] + "…"


def describe(difference: dict[str, Any]) -> str:
    """One difference on one line: its path, its rule, and both values."""
    absent = difference.get("absent")
    was = _shown(difference["recorded"], absent == "recorded")
    now = _shown(difference["replayed"], absent == "replayed")
    return f"{difference['path']}: {difference['rule']}: recorded {was}, replayed {now}"


def _label(step: dict[str, Any]) -> str:
    named = f" {step['label']}" if step.get("label") else ""
    return f"step {step['step']} {step['method']}{named}"


def text(data: dict[str, Any]) -> str:
    """The report: each step unchanged or its differences, then "N steps, M changed"."""
    lines = [f"replay of {data['recording']} against {data['target']}"]
    lines += [f"note: {note}" for note in data["notes"]]
    if "baseline" in data:
        varying = data["baseline"]
        lines.append(
            f"baseline {data['baseline_target']}: {len(varying)} value{'s' if len(varying) != 1 else ''} "
            "differed between two runs"
        )
        lines += [f"  step {d['step']} {describe(d)}" for d in varying]
        lines += [
            f"not counted: step {d['step']} {d['path']}: {d['rule']} (the baseline varies at "
            f"{d['varies']['path']}: {d['varies']['rule']})"
            for d in data["not_counted"]
        ]
    for step in data["report"]:
        if not step["changed"]:
            lines.append(f"{_label(step)}: unchanged")
            continue
        count = len(step["differences"])
        lines.append(f"{_label(step)}: {count} difference{'s' if count != 1 else ''}")
        lines += [f"  {describe(difference)}" for difference in step["differences"]]
    lines.append(f"{data['steps']} step{'s' if data['steps'] != 1 else ''}, {data['changed']} changed")
    return "\n".join(lines) + "\n"


def junit(data: dict[str, Any], suite: str) -> str:
    """One testcase a step; a changed step fails with its differences."""
    root = ElementTree.Element(
        "testsuite", name=suite, tests=str(data["steps"]), failures=str(data["changed"])
    )
    for step in data["report"]:
        seconds = (step["replayed_ms"] or 0) / 1000
        case = ElementTree.SubElement(
            root, "testcase", classname=step["method"], name=_label(step), time=f"{seconds:.3f}"
        )
        if step["changed"]:
            described = [describe(difference) for difference in step["differences"]]
            failure = ElementTree.SubElement(case, "failure", message=described[0])
            failure.text = "\n".join(described)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
