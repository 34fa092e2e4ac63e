"""Evals in the web: the team's suites (``/evals``), a suite's page (its tests as the CLI's JSON, edited
there; a run against models over a live session's tools; its runs and their history plotted), a run's
page (the pass rate of each test with each model, each failure a link to its transcript), and a failing
run's transcript. Members see them all; operators and admins edit and run. Every id is looked up in the
person's current team, so another team's suite or run is a 404."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from sessions.evals import SuiteProblem, parse_suite
from sessions.models import McpSession
from sessions.playground import evalruns, turns
from sessions.playground.models import EvalResult, EvalRun, EvalSuite
from sessions.teams import access
from sessions.teams.models import Role
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import MAX_INT, BadParameter, int_param, person_scope, person_scope_async

__all__ = [
    "delete_suite",
    "evals_page",
    "new_suite",
    "result_page",
    "run_page",
    "run_step",
    "save_suite",
    "start_run",
    "suite_json",
    "suite_page",
]

MAX_DEFINITION = 200_000  # characters of a suite's JSON
MAX_RUNS = 20
STARTER = {
    "name": "suite",
    "system": "",
    "tests": [
        {
            "name": "echo",
            "prompt": "Echo the word hello",
            "expect": {
                "calls": [{"tool": "echo", "arguments": {"message": "hello"}}],
                "answer_contains": "hello",
            },
        }
    ],
}


def _suite(scope: access.Scope, suite_id: int) -> EvalSuite:
    found = (
        EvalSuite.objects.filter(team_id=scope.team_id, pk=suite_id).first() if suite_id <= MAX_INT else None
    )
    if found is None:
        raise Http404("No such eval suite in this team")
    return found


def _run(scope: access.Scope, run_id: int) -> EvalRun:
    found = (
        EvalRun.objects.filter(team_id=scope.team_id, pk=run_id).select_related("suite", "session").first()
        if run_id <= MAX_INT
        else None
    )
    if found is None:
        raise Http404("No such eval run in this team")
    return found


def _live_sessions(scope: access.Scope) -> list[McpSession]:
    return [
        s
        for s in scope.sessions().filter(status__in=McpSession.LIVE).order_by("-created")[:50]
        if s.offers_tools
    ]


def _suite_context(
    scope: access.Scope, suite: EvalSuite, text: str | None = None, **extra: Any
) -> dict[str, Any]:
    problem, tests = "", []
    try:
        tests = list(parse_suite(suite.definition).tests)
    except SuiteProblem as exc:
        problem = str(exc)
    models, models_problem = turns.configured(suite.team_id)
    runs = list(suite.runs.all()[:20])
    for run in runs:
        run.table = evalruns.rate_table(run)  # type: ignore[attr-defined]
    return {
        "suite": suite,
        "text": text if text is not None else json.dumps(suite.definition, indent=2, ensure_ascii=False),
        "tests": tests,
        "suite_problem": problem,
        "models": models,
        "models_problem": models_problem,
        "sessions": _live_sessions(scope) if scope.allows(Role.OPERATOR) else [],
        "can_act": scope.allows(Role.OPERATOR),
        "runs": runs,
        "history": evalruns.history(suite),
        "max_runs": MAX_RUNS,
        **extra,
    }


def _list_context(scope: access.Scope, **extra: Any) -> dict[str, Any]:
    suites = list(EvalSuite.objects.filter(team_id=scope.team_id))
    for suite in suites:
        newest = suite.runs.first()
        suite.newest = newest  # type: ignore[attr-defined]
        suite.table = evalruns.rate_table(newest) if newest else None  # type: ignore[attr-defined]
    return {"suites": suites, "can_act": scope.allows(Role.OPERATOR), **extra}


@require_GET
def evals_page(request: AuthedRequest) -> HttpResponse:
    """The team's suites, each with its newest run's pass rate."""
    return render(request, "evals/list.html", _list_context(person_scope(request)))


@require_POST
def new_suite(request: AuthedRequest) -> HttpResponse:
    """A new suite with one example test, to edit."""
    scope = person_scope(request, Role.OPERATOR)
    name = str(request.POST.get("name") or "").strip()[:200]
    if not name:
        return render(
            request, "evals/list.html", _list_context(scope, new_error="Name the suite."), status=400
        )
    definition = {**STARTER, "name": name}
    suite = EvalSuite.objects.create(
        team_id=scope.team_id, name=name, definition=definition, created_by=request.user
    )
    return redirect(reverse("eval_suite", args=[suite.pk]))


@require_GET
def suite_page(request: AuthedRequest, suite_id: int) -> HttpResponse:
    scope = person_scope(request)
    suite = _suite(scope, suite_id)
    return render(request, "evals/suite.html", _suite_context(scope, suite))


@require_GET
def suite_json(request: AuthedRequest, suite_id: int) -> HttpResponse:
    """The suite as a file for ``mcp-inspector eval``."""
    suite = _suite(person_scope(request), suite_id)
    response = HttpResponse(
        json.dumps(suite.definition, indent=2, ensure_ascii=False) + "\n", "application/json"
    )
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in suite.name)[:80] or "suite"
    response["Content-Disposition"] = f'attachment; filename="{safe}.json"'
    return response


@require_POST
def save_suite(request: AuthedRequest, suite_id: int) -> HttpResponse:
    """The suite's tests as edited: kept when they are a valid suite, else the editor again saying why."""
    scope = person_scope(request, Role.OPERATOR)
    suite = _suite(scope, suite_id)
    text = str(request.POST.get("definition") or "")
    try:
        if len(text) > MAX_DEFINITION:
            raise SuiteProblem(f"a suite is at most {MAX_DEFINITION} characters")
        parsed = parse_suite(text)
    except SuiteProblem as exc:
        return render(
            request, "evals/suite.html", _suite_context(scope, suite, text, save_error=str(exc)), status=400
        )
    suite.definition, suite.name = json.loads(text), parsed.name[:200]
    suite.save(update_fields=["definition", "name", "updated"])
    return render(request, "evals/suite.html", _suite_context(scope, suite, saved=True))


@require_POST
def delete_suite(request: AuthedRequest, suite_id: int) -> HttpResponse:
    scope = person_scope(request, Role.OPERATOR)
    _suite(scope, suite_id).delete()
    return redirect(reverse("evals"))


def _run_choices(request: AuthedRequest, scope: access.Scope) -> tuple[McpSession, list[str], int]:
    """The session, models and number of runs the form asks for; ``ValueError`` says what is wrong."""
    wanted = str(request.POST.get("session") or "")
    session = next((s for s in _live_sessions(scope) if str(s.public_id) == wanted), None)
    if session is None:
        raise ValueError("Pick a live session of this team whose server offers tools.")
    configured = [config.key for config in turns.configured(scope.team_id)[0]]
    keys = [key for key in dict.fromkeys(request.POST.getlist("model")) if key in configured]
    if not keys or len(keys) != len(set(request.POST.getlist("model"))):
        raise ValueError("Pick one or more of the configured models.")
    try:
        runs = int_param(request.POST, "runs", minimum=1, maximum=MAX_RUNS)
    except BadParameter as exc:
        raise ValueError(f"{exc}.") from None
    return session, keys, runs or 1


@require_POST
def start_run(request: AuthedRequest, suite_id: int) -> HttpResponse:
    """Make a run of the suite and open its page, which runs it test by test."""
    scope = person_scope(request, Role.OPERATOR)
    suite = _suite(scope, suite_id)
    try:
        session, keys, runs = _run_choices(request, scope)
        run = evalruns.create_run(suite, session, keys, runs, request.user.pk)
    except ValueError as exc:
        return render(
            request, "evals/suite.html", _suite_context(scope, suite, run_error=str(exc)), status=400
        )
    return redirect(reverse("eval_run", args=[run.pk]))


def _run_context(scope: access.Scope, run: EvalRun, busy: bool = False) -> dict[str, Any]:
    return {
        "run": run,
        "table": evalruns.rate_table(run),
        "can_act": scope.allows(Role.OPERATOR),
        "busy": busy,
        "running": run.state == EvalRun.State.RUNNING,
    }


@require_GET
def run_page(request: AuthedRequest, run_id: int) -> HttpResponse:
    scope = person_scope(request)
    return render(request, "evals/run.html", _run_context(scope, _run(scope, run_id)))


@require_POST
async def run_step(request: AuthedRequest, run_id: int) -> HttpResponse:
    """Run the next pending test and render the table; while one is pending, it asks for the next."""
    scope = await person_scope_async(request, Role.OPERATOR)
    run = await sync_to_async(_run)(scope, run_id)
    user = await signed_in_user(request)
    took = await evalruns.step_run(run, user.pk)
    await run.arefresh_from_db()
    context = await sync_to_async(_run_context)(scope, run, not took)
    return await sync_to_async(render)(request, "evals/_run_body.html", context)


@require_GET
def result_page(request: AuthedRequest, run_id: int, result_id: int) -> HttpResponse:
    """One test's run with one model: why it failed, and its transcript, tool calls linked to the
    session's timeline."""
    scope = person_scope(request)
    run = _run(scope, run_id)
    result = EvalResult.objects.filter(run=run, pk=result_id).first() if result_id <= MAX_INT else None
    if result is None:
        raise Http404("No such result in this run")
    session = run.session if run.session is not None and run.session.team_id == scope.team_id else None
    entries = []
    for entry in result.transcript if isinstance(result.transcript, list) else []:
        if not isinstance(entry, dict):
            continue
        shown = dict(entry)
        if entry.get("kind") == "tool":
            shown["arguments_json"] = json.dumps(entry.get("arguments"), indent=2, ensure_ascii=False)
        entries.append(shown)
    return render(
        request, "evals/result.html", {"run": run, "result": result, "entries": entries, "session": session}
    )
