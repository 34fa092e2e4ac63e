"""Collections: saved requests with expectations, run in one session by ``mcp-inspector --cli --collection``.

A collection is a JSON file::

    {"steps": [
      {"name": "add works", "method": "tools/call",
       "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
       "expect": {"result": {"structuredContent": {"result": 3}}, "max_ms": 500, "verdicts": "clean"}},
      {"method": "tools/call", "params": {"name": "fail"}, "expect": {"isError": true}},
      {"method": "resources/read", "params": {"uri": "nope://"}, "expect": {"error": true}}
    ]}

Expectations (all optional; a step with none passes when the request answers without an error):

- ``error``: a JSON-RPC error is expected (``true``) or not (``false``, the default);
- ``isError``: the tool result's ``isError`` must be this (a tools/call expects ``false`` unless told);
- ``result``: a subset the result must contain (objects key by key, anything else equal);
- ``contains``: text the result's JSON (or the error's message) must contain;
- ``max_ms``: the most milliseconds the answer may take;
- ``verdicts``: ``"clean"`` — no conformance verdict of error or warning severity on any frame
  received while the step ran (the schema of the negotiated revision included).

The run prints a JSON summary and exits 1 if any step failed, so CI can gate on a server's behaviour;
``--junit FILE`` also writes a JUnit XML report.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

if TYPE_CHECKING:
    from sessions.engine import ClientSession, Frame

EXPECTATIONS = frozenset({"error", "isError", "result", "contains", "max_ms", "verdicts"})


class CollectionError(ValueError):
    """The collection file cannot be run as written."""


@dataclass
class Step:
    name: str
    method: str
    params: dict[str, Any] | None
    expect: dict[str, Any] = field(default_factory=dict)


def load(path: str) -> list[Step]:
    from inspector.cli.files import read_json

    data = read_json(path, "collection", CollectionError)
    raw = data.get("steps") if isinstance(data, dict) else data
    if not isinstance(raw, list) or not raw:
        raise CollectionError(f'collection {path} needs a non-empty "steps" list')
    steps = []
    for i, item in enumerate(raw, start=1):
        where = f"collection {path}, step {i}"
        if not isinstance(item, dict) or not isinstance(item.get("method"), str) or not item["method"]:
            raise CollectionError(f"{where}: needs a method")
        params = item.get("params")
        expect = item.get("expect") or {}
        if params is not None and not isinstance(params, dict):
            raise CollectionError(f"{where}: params must be an object")
        if not isinstance(expect, dict):
            raise CollectionError(f"{where}: expect must be an object")
        unknown = sorted(set(expect) - EXPECTATIONS)
        if unknown:
            raise CollectionError(
                f"{where}: unknown expectation {', '.join(unknown)} ({', '.join(sorted(EXPECTATIONS))})"
            )
        if "verdicts" in expect and expect["verdicts"] != "clean":
            raise CollectionError(f'{where}: verdicts can only be "clean"')
        if "max_ms" in expect and not isinstance(expect["max_ms"], int | float):
            raise CollectionError(f"{where}: max_ms must be a number")
        name = item.get("name") if isinstance(item.get("name"), str) else None
        label = params.get("name") or params.get("uri") if params else None
        steps.append(
            Step(
                name or f"{i}. {item['method']}{f' {label}' if label else ''}", item["method"], params, expect
            )
        )
    return steps


def contains(actual: Any, expected: Any) -> bool:
    """Whether ``actual`` holds ``expected``: objects key by key (recursively), anything else equal."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in expected.items()
        )
    return bool(actual == expected)


def check(step: Step, result: Any, error: dict[str, Any] | None, ms: float, flagged: list[str]) -> list[str]:
    """What is wrong with a step's outcome, in words (empty when it passed)."""
    expect = step.expect
    problems = []
    if bool(expect.get("error", False)) != (error is not None):
        problems.append(
            "expected an error, got a result"
            if error is None
            else f"unexpected error {error.get('code')}: {error.get('message')}"
        )
    # A tool that answers isError fails its step unless the step expects it to.
    if error is None and ("isError" in expect or step.method == "tools/call"):
        got, want = bool((result or {}).get("isError", False)), bool(expect.get("isError", False))
        if got != want:
            problems.append(f"isError is {got}, expected {want}")
    if error is None and "result" in expect and not contains(result, expect["result"]):
        problems.append(f"result does not contain {json.dumps(expect['result'], ensure_ascii=False)}")
    if "contains" in expect:
        text = (
            json.dumps(result, ensure_ascii=False) if error is None else str((error or {}).get("message", ""))
        )
        if str(expect["contains"]) not in text:
            problems.append(
                f"{'result' if error is None else 'error'} does not contain {expect['contains']!r}"
            )
    if "max_ms" in expect and ms > float(expect["max_ms"]):
        problems.append(f"took {ms:.1f} ms, more than {expect['max_ms']} ms")
    if expect.get("verdicts") == "clean" and flagged:
        problems.append(
            "conformance: "
            + "; ".join(flagged[:5])
            + (f" (+{len(flagged) - 5} more)" if len(flagged) > 5 else "")
        )
    return problems


async def run(session: ClientSession, steps: list[Step], frames: list[Frame]) -> dict[str, Any]:
    """Run the steps in order in one session; return the summary the CLI prints."""
    from sessions.engine import EngineError, McpError

    report = []
    for step in steps:
        mark = len(frames)
        started = time.perf_counter()
        result: Any = None
        error: dict[str, Any] | None = None
        try:
            result = await session.request(step.method, step.params)
        except McpError as exc:
            error = {"code": exc.code, "message": exc.message}
        except EngineError as exc:
            error = {"code": None, "message": str(exc)}
        ms = (time.perf_counter() - started) * 1000
        flagged = [
            f"#{f.seq} {v.code}: {v.message}"
            for f in frames[mark:]
            if f.direction == "in"
            for v in f.verdicts
            if v.severity in ("error", "warning")
        ]
        problems = check(step, result, error, ms, flagged)
        report.append(
            {
                "name": step.name,
                "method": step.method,
                "passed": not problems,
                "ms": round(ms, 1),
                "problems": problems,
                **({"error": error} if error is not None else {}),
            }
        )
    failed = sum(1 for r in report if not r["passed"])
    return {"passed": len(report) - failed, "failed": failed, "steps": report}


def junit(summary: dict[str, Any], suite: str) -> str:
    """The summary as JUnit XML, which CI systems show as test results."""
    root = ElementTree.Element(
        "testsuite",
        name=suite,
        tests=str(len(summary["steps"])),
        failures=str(summary["failed"]),
        time=f"{sum(s['ms'] for s in summary['steps']) / 1000:.3f}",
    )
    for step in summary["steps"]:
        case = ElementTree.SubElement(
            root, "testcase", classname=step["method"], name=step["name"], time=f"{step['ms'] / 1000:.3f}"
        )
        if not step["passed"]:
            failure = ElementTree.SubElement(case, "failure", message=step["problems"][0])
            failure.text = "\n".join(step["problems"])
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
