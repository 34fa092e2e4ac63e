"""Eval suites run in the web: a run's results, one test of one model a step, each step one request of
the run's page (htmx asks for the next while one is pending), as the Playground's chat steps go. The
tests run through ``sessions.evals`` (the CLI's runner, the Playground's model turns); the model's tool
calls go through the live session, so they are on its timeline."""

from __future__ import annotations

import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions.evals import SuiteProblem, ToolOutcome, parse_suite, run_case
from sessions.models import McpSession
from sessions.playground.models import EvalResult, EvalRun, EvalSuite
from sessions.playground.turns import TOOL_WAIT, listed_tools, model_named
from sessions.runtime import client
from sessions.runtime import messages as m

__all__ = ["create_run", "history", "rate_table", "step_run"]

MAX_CASES = 2000  # results of one run: tests × models × runs
HISTORY = 30  # runs the history plot shows
State = EvalResult.State


@transaction.atomic
def create_run(
    suite: EvalSuite, session: McpSession, model_keys: list[str], runs: int, user_id: int
) -> EvalRun:
    """A run of the suite as it is now, its results pending in the order they run: each run of the suite
    with each model, test by test. ``ValueError`` says why it cannot be made."""
    try:
        parsed = parse_suite(suite.definition)
    except SuiteProblem as exc:
        raise ValueError(f"The suite is not valid: {exc}") from None
    cases = runs * len(model_keys) * len(parsed.tests)
    if cases > MAX_CASES:
        raise ValueError(f"That is {cases} test runs; a run holds at most {MAX_CASES}.")
    run = EvalRun.objects.create(
        suite=suite,
        team_id=suite.team_id,
        created_by_id=user_id,
        session=session,
        server_label=session.server_label[:200],
        definition=suite.definition,
        model_keys=model_keys,
        runs=runs,
    )
    position = 0
    made = []
    for attempt in range(1, runs + 1):
        for key in model_keys:
            for test in parsed.tests:
                made.append(
                    EvalResult(run=run, position=position, test=test.name, model_key=key, attempt=attempt)
                )
                position += 1
    EvalResult.objects.bulk_create(made)
    return run


def _claim(run_id: int, seconds: float) -> bool:
    now = timezone.now()
    free = Q(busy_until__isnull=True) | Q(busy_until__lt=now)
    until = now + datetime.timedelta(seconds=seconds)
    return EvalRun.objects.filter(free, pk=run_id, state=EvalRun.State.RUNNING).update(busy_until=until) == 1


def _tool_caller(session: McpSession, user_id: int) -> Any:
    async def call(name: str, arguments: dict[str, Any]) -> ToolOutcome:
        params = {"name": name, "arguments": arguments}
        command = m.Request("tools/call", params, wait=TOOL_WAIT, stored=False, user_id=user_id)
        try:
            answer = await client.request(session, command)
        except (client.CommandFailed, ConnectionError) as exc:
            return ToolOutcome(error=f"the call could not be sent: {exc}")
        if isinstance(answer, m.Started):
            return ToolOutcome(
                error=f"still running after {TOOL_WAIT:g} s: its answer will be on the timeline"
            )
        outcome = answer.outcome
        links = {key: outcome.get(key) for key in ("request_seq", "response_seq")}
        return ToolOutcome(outcome.get("result"), outcome.get("error"), outcome.get("latency_ms"), links)

    return call


def _finish(run: EvalRun, note: str = "") -> None:
    pending = run.results.filter(state=State.PENDING)
    if note:
        pending.update(state=State.FAILED, reasons=[note])
        EvalRun.objects.filter(pk=run.pk).update(state=EvalRun.State.STOPPED, note=note)
    elif not pending.exists():
        EvalRun.objects.filter(pk=run.pk).update(state=EvalRun.State.DONE)


async def step_run(run: EvalRun, user_id: int) -> bool:
    """Run the run's next pending test; False when another request is running one now."""
    keys = run.model_keys if isinstance(run.model_keys, list) else []
    configs = await sync_to_async(lambda: [model_named(key, run.team_id) for key in keys])()
    timeouts = [config.timeout for config in configs if config is not None]
    # A test takes up to ten turns of the model, each with its calls.
    if not await sync_to_async(_claim)(run.pk, 10 * (max(timeouts, default=0.0) + TOOL_WAIT)):
        return False
    try:
        await _step(run, user_id)
    finally:
        await EvalRun.objects.filter(pk=run.pk).aupdate(busy_until=None)
    return True


async def _step(run: EvalRun, user_id: int) -> None:
    result = await run.results.filter(state=State.PENDING).afirst()
    if result is None:
        await sync_to_async(_finish)(run)
        return
    session = None
    if run.session_id is not None:
        session = await McpSession.objects.filter(pk=run.session_id, team_id=run.team_id).afirst()
    if session is None or not session.is_live:
        await sync_to_async(_finish)(run, "Stopped: the session is not live any more; its tests did not run.")
        return
    suite = parse_suite(run.definition)
    test = next(t for t in suite.tests if t.name == result.test)
    config = await sync_to_async(model_named)(result.model_key, run.team_id)
    if config is None:
        result.state, result.reasons = (
            State.FAILED,
            [f"The model {result.model_key!r} is not configured any more."],
        )
    else:
        tools = await listed_tools(session, user_id)
        case = await run_case(config, suite, test, tools, _tool_caller(session, user_id), result.attempt)
        result.state = State.PASSED if case.passed else State.FAILED
        result.reasons, result.transcript, result.ms = case.reasons, case.transcript, case.ms
    await result.asave(update_fields=["state", "reasons", "transcript", "ms"])
    await sync_to_async(_finish)(run)


def rate_table(run: EvalRun) -> dict[str, Any]:
    """The pass rate of each test with each model, with its failures (each a link to its transcript)."""
    results = list(run.results.only("pk", "test", "model_key", "attempt", "state", "reasons"))
    keys = list(run.model_keys) if isinstance(run.model_keys, list) else []
    tests = list(dict.fromkeys(r.test for r in results))
    cells: dict[tuple[str, str], dict[str, Any]] = {
        (t, k): {"passed": 0, "done": 0, "runs": 0, "failures": []} for t in tests for k in keys
    }
    for result in results:
        cell = cells.setdefault(
            (result.test, result.model_key), {"passed": 0, "done": 0, "runs": 0, "failures": []}
        )
        cell["runs"] += 1
        if result.state != State.PENDING:
            cell["done"] += 1
        if result.state == State.PASSED:
            cell["passed"] += 1
        elif result.state == State.FAILED:
            cell["failures"].append(result)
    rows = []
    for test in tests:
        row = []
        for key in keys:
            cell = cells[(test, key)]
            cell["rate"] = cell["passed"] / cell["done"] if cell["done"] else None
            row.append(cell)
        rows.append({"test": test, "cells": row})
    done = sum(1 for r in results if r.state != State.PENDING)
    passed = sum(1 for r in results if r.state == State.PASSED)
    return {"models": keys, "rows": rows, "done": done, "total": len(results), "passed": passed}


WIDTH, HEIGHT = 600, 200  # the history plot's coordinates (its viewBox), scaled by the page


def _cell(run: EvalRun, count: list[int] | None) -> dict[str, Any]:
    if count is None:
        return {"run": run, "total": 0}
    return {"run": run, "passed": count[0], "total": count[1], "all": count[0] == count[1]}


def history(suite: EvalSuite) -> dict[str, Any]:
    """The pass rate of each model in the suite's newest runs, oldest first: polylines for an SVG, and
    each point's run, so a drop (a regression) stands out and is a click away."""
    runs = list(suite.runs.exclude(state=EvalRun.State.RUNNING).order_by("-pk")[:HISTORY])[::-1]
    if not runs:
        return {"series": [], "runs": 0}
    counts: dict[tuple[int, str], list[int]] = {}
    by_test: dict[tuple[str, str], dict[int, list[int]]] = {}
    rows = (
        EvalResult.objects.filter(run__in=runs)
        .exclude(state=State.PENDING)
        .values_list("run_id", "test", "model_key", "state")
    )
    for run_id, test, key, state in rows:
        for count in (
            counts.setdefault((run_id, key), [0, 0]),
            by_test.setdefault((test, key), {}).setdefault(run_id, [0, 0]),
        ):
            count[0] += state == State.PASSED
            count[1] += 1
    grid = [
        {"test": test, "model": key, "cells": [_cell(run, by_run.get(run.pk)) for run in runs]}
        for (test, key), by_run in by_test.items()
    ]
    keys = list(dict.fromkeys(key for run in runs for key in run.model_keys))
    step = WIDTH / max(len(runs) - 1, 1)
    series = []
    for index, key in enumerate(keys):
        points = []
        for number, run in enumerate(runs):
            passed, total = counts.get((run.pk, key), (0, 0))
            if not total:
                continue
            rate = passed / total
            x = round(number * step if len(runs) > 1 else WIDTH / 2, 1)
            y = round(HEIGHT - rate * HEIGHT, 1)
            points.append({"x": x, "y": y, "rate": rate, "passed": passed, "total": total, "run": run})
        line = " ".join(f"{p['x']},{p['y']}" for p in points)
        series.append({"model": key, "points": points, "line": line, "colour": index % 6})
    return {
        "series": series,
        "grid": grid,
        "runs": len(runs),
        "width": WIDTH,
        "height": HEIGHT,
        "first": runs[0],
        "last": runs[-1],
    }
