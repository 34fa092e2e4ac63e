"""``mcp-inspector eval SUITE TARGET``: run an eval suite's tests against configured models over a
server's tools, N times each, and say each test's pass rate with each model (docs/playground.md, "Evals").

The models are the web's (``INSPECTOR_LLM_MODELS[_FILE]``, ``INSPECTOR_LLM_URL`` and ``_MODEL``); their
keys never reach the output. Exit codes: 0 every test clears the threshold with every model, 1 one does
not, 2 the suite could not run (the command line, the suite, the models, the server).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inspector.cli.arguments import CliError, Invocation, UsageError, _Parser, parse_args, split_subcommand

if TYPE_CHECKING:
    from sessions.engine import ClientSession
    from sessions.evals import CaseResult, Suite, ToolOutcome
    from sessions.providers import ModelConfig

__all__ = ["main"]

USAGE = (
    "mcp-inspector eval SUITE.json TARGET [ARGS...] [--runs N] [--model NAME]... [--threshold RATE] "
    "[--junit FILE] [--json FILE]"
)
NOT_FOR_EVAL = ("--method", "--collection", "--skill", "--task", "--record")
MAX_RUNS = 100


class CannotRun(Exception):
    """The suite could not run: exit 2."""


@dataclass
class EvalRun:
    suite_file: str
    inv: Invocation
    runs: int = 1
    models: list[str] = field(default_factory=list)
    threshold: float = 1.0
    junit_file: str | None = None
    json_file: str | None = None


def _parser() -> _Parser:
    parser = _Parser(
        prog="mcp-inspector eval",
        usage=USAGE,
        description="Run an eval suite (a JSON file of prompts with expectations) against the configured "
        "models over TARGET's tools. TARGET and its options are those of --cli (--transport, --header, -e, "
        "--config, ...).",
        allow_abbrev=False,
        add_help=False,
    )
    parser.add_argument("-h", "--help", action="store_true")
    parser.add_argument("--runs", type=int, default=1, metavar="N", help="run each test N times (default 1)")
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="a configured model to run against (repeatable; default: every configured model)",
    )
    parser.add_argument(
        "--threshold",
        default="1",
        metavar="RATE",
        help="the pass rate (0 to 1, or a percentage: 80%%) each test must reach with each model; "
        "below it the exit code is 1 (default 1: every run passes)",
    )
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report: a test case per run")
    parser.add_argument("--json", metavar="FILE", help="write the results with every transcript as JSON")
    return parser


def _threshold(text: str) -> float:
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise UsageError(f"--threshold {text!r}: give a rate from 0 to 1, or a percentage")
    return value


def parse_eval(argv: Sequence[str]) -> EvalRun:
    """The command line; ``UsageError`` says what is wrong with it."""
    why = "an eval calls the tools its models ask for"
    suite_file, opts, rest = split_subcommand(
        argv, _parser(), first="suite", usage=USAGE, refused=NOT_FOR_EVAL, why=why, method="tools/list"
    )
    if not 1 <= opts.runs <= MAX_RUNS:
        raise UsageError(f"--runs must be from 1 to {MAX_RUNS}")
    inv = parse_args(rest)
    return EvalRun(suite_file, inv, opts.runs, opts.model, _threshold(opts.threshold), opts.junit, opts.json)


def _env_secret(name: str) -> str:
    value, file_name = os.environ.get(name, ""), os.environ.get(f"{name}_FILE", "")
    if value and file_name:
        raise CannotRun(f"set either {name} or {name}_FILE, not both")
    if file_name:
        try:
            with open(file_name, encoding="utf-8") as fh:
                return fh.read().strip()
        except OSError as exc:
            raise CannotRun(f"{name}_FILE: cannot read {file_name!r}: {exc.strerror or exc}") from None
    return value


def models_of(wanted: list[str]) -> list[ModelConfig]:
    """The configured models named (every one when none is), as the web's configuration gives them."""
    from sessions.providers import parse_models

    try:
        configured = parse_models(
            _env_secret("INSPECTOR_LLM_MODELS"),
            os.environ.get("INSPECTOR_LLM_URL", ""),
            os.environ.get("INSPECTOR_LLM_MODEL", ""),
            _env_secret("INSPECTOR_LLM_API_KEY"),
        )
    except ValueError as exc:
        raise CannotRun(f"INSPECTOR_LLM_MODELS: {exc}") from None
    if not configured:
        raise CannotRun("no model is configured: set INSPECTOR_LLM_MODELS (see docs/playground.md)")
    by_key = {config.key: config for config in configured}
    unknown = [name for name in wanted if name not in by_key]
    if unknown:
        raise CannotRun(f"--model {unknown[0]!r} is not configured (configured: {', '.join(by_key)})")
    return [by_key[name] for name in dict.fromkeys(wanted)] if wanted else configured


def read_suite(path: str) -> Suite:
    from sessions.evals import SuiteProblem, parse_suite

    try:
        with open(path, "rb") as fh:
            return parse_suite(fh.read())
    except OSError as exc:
        raise CannotRun(f"cannot read suite {path}: {exc.strerror or exc}") from None
    except SuiteProblem as exc:
        raise CannotRun(f"suite {path}: {exc}") from None


async def _connect(inv: Invocation) -> ClientSession:
    from sessions.engine import (
        ClientCapabilities,
        ClientOptions,
        EngineError,
        McpError,
        RequestTimeout,
        connect,
    )
    from sessions.servers import STATELESS_VERSIONS

    options = ClientOptions(
        protocol_version=inv.protocol_version,
        mode="stateless" if inv.protocol_version in STATELESS_VERSIONS else "handshake",
        capabilities=ClientCapabilities(roots=True, roots_list_changed=False),
        client_info={"name": "mcp-inspector-eval", "version": "0.1.0"},
        roots=inv.roots,
        timeout=inv.timeout,
        max_total_timeout=max(600.0, inv.timeout),
    )
    session = connect(inv.target, options)
    try:
        await session.__aenter__()
    except RequestTimeout:
        raise CannotRun(f"cannot connect: no answer to initialize within {inv.timeout:g} s") from None
    except McpError as exc:
        raise CannotRun(f"cannot connect: initialize failed: {exc}") from None
    except EngineError as exc:
        raise CannotRun(f"cannot connect: {exc}") from None
    return session


def _tool_caller(session: ClientSession) -> Any:
    from sessions.engine import EngineError, McpError
    from sessions.evals import ToolOutcome

    async def call(name: str, arguments: dict[str, Any]) -> ToolOutcome:
        started = time.perf_counter()
        try:
            result = await session.call_tool(name, arguments)
        except McpError as exc:
            error: Any = {"code": exc.code, "message": exc.message}
            return ToolOutcome(error=error, latency_ms=(time.perf_counter() - started) * 1000)
        except EngineError as exc:
            return ToolOutcome(error=f"the call failed: {exc}")
        return ToolOutcome(result, latency_ms=round((time.perf_counter() - started) * 1000, 1))

    return call


async def run_suite(run: EvalRun, suite: Suite, models: list[ModelConfig]) -> list[CaseResult]:
    """Each test, ``runs`` times, with each model, over the server's tools, in one session."""
    from inspector.cli import _list_all
    from sessions.engine import EngineError, tool_visibility
    from sessions.evals import run_case

    session = await _connect(run.inv)
    try:
        try:
            listed = await _list_all(session, "tools/list", "tools")
        except EngineError as exc:
            raise CannotRun(f"tools/list failed: {exc}") from None
        # A tool an MCP App keeps for its views (visibility ["app"]) is not a model's to call.
        tools = [
            t for t in listed.get("tools") or [] if isinstance(t, dict) and "model" in tool_visibility(t)
        ]
        call = _tool_caller(session)
        results = []
        for attempt in range(1, run.runs + 1):
            for config in models:
                for test in suite.tests:
                    results.append(await run_case(config, suite, test, tools, call, attempt))
        return results
    finally:
        await session.aclose()


def text_report(suite: Suite, results: list[CaseResult], threshold: float) -> str:
    """The rates per test and model, then each failing run's reasons, then what the exit code means."""
    from sessions.evals import below, pass_rates

    rates = pass_rates(results)
    models = list(dict.fromkeys(r.model for r in results))
    width = max(len(t.name) for t in suite.tests)
    lines = [f"{'test':<{width}}  " + "  ".join(f"{m:>10}" for m in models)]
    for test in suite.tests:
        cells = []
        for model in models:
            passed, runs = rates.get((test.name, model), (0, 0))
            cells.append(f"{f'{passed}/{runs}':>10}")
        lines.append(f"{test.name:<{width}}  " + "  ".join(cells))
    failing = [r for r in results if not r.passed]
    if failing:
        lines.append("")
    for result in failing:
        lines.append(f"FAIL {result.test} with {result.model}, run {result.attempt}:")
        lines.extend(f"  - {reason}" for reason in result.reasons)
    passed = sum(r.passed for r in results)
    lines.append("")
    lines.append(f"{passed}/{len(results)} runs passed")
    short = below(results, threshold)
    if short:
        lines.append(f"below the threshold {threshold:g}: " + "; ".join(short))
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str]) -> int:
    """Run an eval suite; return 0 (every rate clears the threshold), 1 (one does not) or 2 (no run)."""
    from inspector.cli import _fail

    try:
        try:
            run = parse_eval(argv)
        except (UsageError, CliError) as exc:
            return _fail(f"{exc} (see mcp-inspector eval --help)", 2)
        except SystemExit as exc:  # --help
            return exc.code if isinstance(exc.code, int) else 0
        from sessions.evals import below, junit, summary

        try:
            suite = read_suite(run.suite_file)
            models = models_of(run.models)
            results = asyncio.run(run_suite(run, suite, models))
        except CannotRun as exc:
            return _fail(f"cannot run the suite: {exc}", 2)
        outputs = [
            (run.json_file, lambda: json.dumps(summary(suite.name, results), indent=2, ensure_ascii=False)),
            (run.junit_file, lambda: junit(suite.name, results)),
        ]
        for path, make in outputs:
            if path is not None:
                try:
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(make())
                except OSError as exc:
                    return _fail(f"cannot write {path}: {exc.strerror or exc}", 2)
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.write(text_report(suite, results, run.threshold))
            sys.stdout.flush()
        return 1 if below(results, run.threshold) else 0
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # a bug, or something nobody foresaw: still one line
        return _fail(f"unexpected {type(exc).__name__}: {exc}", 2)
