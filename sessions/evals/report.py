"""A suite run's results summed up: the pass rate of each test with each model, the JUnit XML a CI
shows, and whether the rates clear a threshold."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

from sessions.evals.runner import CaseResult

__all__ = ["below", "junit", "pass_rates", "summary", "transcript_text"]


def pass_rates(results: list[CaseResult]) -> dict[tuple[str, str], tuple[int, int]]:
    """(test, model) → (passed, runs), in the order the results came."""
    rates: dict[tuple[str, str], tuple[int, int]] = {}
    for result in results:
        passed, runs = rates.get((result.test, result.model), (0, 0))
        rates[(result.test, result.model)] = (passed + result.passed, runs + 1)
    return rates


def below(results: list[CaseResult], threshold: float) -> list[str]:
    """Each test and model whose pass rate is under ``threshold`` (0 to 1), said."""
    return [
        f"{test} with {model}: {passed}/{runs} passed"
        for (test, model), (passed, runs) in pass_rates(results).items()
        if runs and passed / runs < threshold
    ]


def summary(suite_name: str, results: list[CaseResult]) -> dict[str, Any]:
    """The run as JSON: the rates per test and model, and every result with its transcript."""
    rates = [
        {"test": test, "model": model, "passed": passed, "runs": runs, "rate": round(passed / runs, 4)}
        for (test, model), (passed, runs) in pass_rates(results).items()
    ]
    passed = sum(r.passed for r in results)
    return {
        "suite": suite_name,
        "passed": passed,
        "failed": len(results) - passed,
        "rate": round(passed / len(results), 4) if results else 0.0,
        "rates": rates,
        "results": [r.to_dict() for r in results],
    }


def transcript_text(transcript: list[dict[str, Any]]) -> str:
    """A transcript as lines a person reads in a CI log."""
    lines = []
    for entry in transcript:
        kind = entry.get("kind")
        if kind == "tool":
            arguments = json.dumps(entry.get("arguments"), ensure_ascii=False)
            lines.append(f"tool {entry.get('tool') or entry.get('name')} {arguments} [{entry.get('status')}]")
            lines.append(f"  → {entry.get('text', '')}")
        else:
            lines.append(f"{kind}: {entry.get('text', '')}")
    return "\n".join(lines)


def junit(suite_name: str, results: list[CaseResult]) -> str:
    """Each run of each test with each model as a JUnit test case, the failures with their reasons and
    transcripts."""
    failed = sum(not r.passed for r in results)
    root = ElementTree.Element(
        "testsuite",
        name=suite_name,
        tests=str(len(results)),
        failures=str(failed),
        time=f"{sum(r.ms for r in results) / 1000:.3f}",
    )
    for result in results:
        case = ElementTree.SubElement(
            root,
            "testcase",
            classname=f"{suite_name}.{result.model}",
            name=f"{result.test} (run {result.attempt})",
            time=f"{result.ms / 1000:.3f}",
        )
        if not result.passed:
            failure = ElementTree.SubElement(case, "failure", message=result.reasons[0])
            failure.text = "\n".join(result.reasons)
            out = ElementTree.SubElement(case, "system-out")
            out.text = transcript_text(result.transcript)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
