"""``mcp-inspector replay RECORDING TARGET``: send a recorded client's conversation to a server again
and say what changed in its answers, semantically (docs/cli.md, "Replay").

The recording's initialize (capabilities, clientInfo, revision) opens the session; its requests and
notifications go in their order, each after the answers the recorded client had when it sent it, and
the server's requests are answered as the recording answered them. The comparison is
``sessions.replay``'s. Exit codes: 0 nothing changed, 1 something did, 2 the replay could not run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inspector.cli.arguments import CliError, Invocation, UsageError, _Parser, parse_args

if TYPE_CHECKING:
    from sessions.engine import ClientCapabilities, ClientSession, Frame, PendingRequest, RequestHandle
    from sessions.replay import Conversation, Links, Pattern, Step, StepReport

__all__ = ["main"]

USAGE = (
    "mcp-inspector replay RECORDING TARGET [ARGS...] [--json FILE] [--junit FILE] [--ignore JSONPATH]... "
    "[--no-latency] [--record FILE]"
)
# The recorded client's pauses are kept (a task polled at its pollInterval), up to this many seconds:
# a recording made by a person clicking should not replay at a person's pace.
MAX_GAP = 5.0
# Options of --cli that a replay takes from the recording instead.
NOT_FOR_REPLAY = ("--method", "--collection", "--skill", "--protocol-version", "--task")


class CannotReplay(Exception):
    """The replay could not run (a bad recording, a server that cannot be reached): exit 2."""


@dataclass
class Replay:
    """The replay's command line: the recording, the target (as ``--cli`` takes it) and the outputs."""

    recording: str
    inv: Invocation
    ignore: list[Pattern] = field(default_factory=list)
    json_file: str | None = None
    junit_file: str | None = None
    record: str | None = None
    latency: bool = True
    """Whether a step that became slower is a change (``--no-latency``: not, where timing is noise)."""


def parse_replay(argv: Sequence[str]) -> Replay:
    """The replay's command line; ``UsageError`` says what is wrong with it."""
    from sessions.replay import PathError, Pattern

    args = list(argv)
    if args[:1] in (["-h"], ["--help"]):
        _parser().print_help()
        raise SystemExit(0)
    if not args or args[0].startswith("-"):
        raise UsageError(f"the recording comes first: {USAGE}")
    recording, args = args[0], args[1:]
    at = args.index("--") if "--" in args else len(args)
    opts, rest = _parser().parse_known_args(args[:at])
    refused = [word for word in rest if word.split("=", 1)[0] in NOT_FOR_REPLAY]
    if refused:
        raise UsageError(
            f"{refused[0].split('=', 1)[0]}: a replay sends the recording's own requests "
            "(a target's own option goes after --)"
        )
    try:
        ignore = [Pattern(text) for text in opts.ignore]
    except PathError as exc:
        raise UsageError(f"--ignore {exc}") from None
    inv = parse_args([*rest, "--method", "ping", *args[at:]])
    return Replay(recording, inv, ignore, opts.json, opts.junit, opts.record, not opts.no_latency)


def _parser() -> _Parser:
    parser = _Parser(
        prog="mcp-inspector replay",
        usage=USAGE,
        description="Replay a recording (--record, a session's export) against TARGET and report what "
        "changed in the answers. TARGET and its options are those of --cli (--transport, --header, -e, "
        "--config, ...).",
        allow_abbrev=False,
        add_help=False,
    )
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON to FILE")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report (a testcase a step)")
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="JSONPATH",
        help="a path where differences do not count, e.g. '$.result.content[*].text' or '$..timestamp' "
        "(repeatable)",
    )
    parser.add_argument("--record", metavar="FILE", help="write every frame of the replay to FILE")
    parser.add_argument(
        "--no-latency", action="store_true", help="do not count a step that became slower as a change"
    )
    return parser


# --- the session ----------------------------------------------------------------------------------------


def capabilities(declared: Any, version: str) -> ClientCapabilities:
    """The engine's capabilities for what the recorded client declared in initialize."""
    from sessions.engine import UI_EXTENSION, ClientCapabilities

    caps = declared if isinstance(declared, dict) else {}
    roots = caps["roots"] if isinstance(caps.get("roots"), dict) else {}
    elicitation = caps.get("elicitation")
    modes = elicitation if isinstance(elicitation, dict) else {}
    experimental = caps.get("experimental")
    return ClientCapabilities(
        roots="roots" in caps,
        roots_list_changed=bool(roots.get("listChanged")),
        sampling="sampling" in caps,
        # Before 2025-11-25, and as {} since, elicitation means form mode.
        elicitation_form=elicitation is not None and ("form" in modes or "url" not in modes),
        elicitation_url="url" in modes,
        experimental=experimental if isinstance(experimental, dict) and experimental else None,
        tasks="tasks" in caps,
        apps=isinstance(caps.get("extensions"), dict) and UI_EXTENSION in caps["extensions"],
    )


class _Asking:
    """Which of the replay's requests is the newest in flight, and what the server asked during each."""

    def __init__(self) -> None:
        self.in_flight: list[int] = []
        self.asked: dict[int, list[str]] = {}

    def note(self, method: str) -> None:
        from sessions.replay import ASKING_METHODS

        if method in ASKING_METHODS and self.in_flight:
            self.asked.setdefault(self.in_flight[-1], []).append(method)


def _answering(conversation: Conversation, inv: Invocation, asking: _Asking) -> dict[str, Any]:
    """Handlers answering the server's requests as the recording did, in order; past what it recorded,
    as the CLI answers by default (--root, the --elicitation and --sampling policies, or -32601)."""
    from inspector.cli.answers import handlers
    from sessions.engine import McpError

    fallback = handlers(inv.elicitation, inv.sampling)
    queues = {method: list(answers) for method, answers in conversation.answers.items() if method != "ping"}

    def answer(method: str) -> Any:
        async def handle(request: PendingRequest) -> dict[str, Any]:
            asking.note(method)
            queue = queues.get(method)
            if queue:
                recorded = queue.pop(0)
                if "error" in recorded:
                    error = recorded["error"] if isinstance(recorded["error"], dict) else {}
                    code = error.get("code")
                    raise McpError(
                        code if isinstance(code, int) else -1,
                        str(error.get("message", "")),
                        error.get("data"),
                    )
                return dict(recorded.get("result") or {})
            if method in fallback:
                return await fallback[method](request)
            if method == "roots/list":
                return {"roots": list(inv.roots)}
            raise McpError(-32601, f"Method not found: {method}")

        return handle

    methods = {*queues, "roots/list", "sampling/createMessage", "elicitation/create"}
    return {method: answer(method) for method in methods}


@dataclass
class _Outcome:
    answer: dict[str, Any] | None = None
    latency_ms: float | None = None
    problem: str | None = None
    asked: list[str] = field(default_factory=list)


async def _settle(handle: RequestHandle) -> _Outcome:
    from sessions.engine import EngineError, McpError

    outcome = _Outcome()
    try:
        outcome.answer = {"result": await handle}
    except McpError as exc:
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            error["data"] = exc.data
        outcome.answer = {"error": error}
    except EngineError as exc:
        outcome.problem = str(exc)
    reply = handle.leg.reply
    outcome.latency_ms = reply.latency_ms if reply is not None else None
    return outcome


async def _open(session: ClientSession, timeout: float) -> dict[str, Any]:
    from sessions.engine import EngineError, McpError, RequestTimeout

    try:
        await session.open()
        return await session.initialize()
    except RequestTimeout:
        raise CannotReplay(f"cannot connect: no answer to initialize within {timeout:g} s") from None
    except McpError as exc:
        raise CannotReplay(f"cannot connect: initialize failed: {exc}") from None
    except EngineError as exc:
        raise CannotReplay(f"cannot connect: {exc}") from None
    finally:
        if session.state != "ready":
            await session.aclose()


async def replay(
    conversation: Conversation, run: Replay, frames: list[Frame], stderr_tail: list[str]
) -> tuple[list[StepReport], list[str]]:
    """Replay the conversation against the target; each step's report, and notes on how it ran."""
    from sessions.engine import HANDSHAKE_VERSIONS, ClientOptions, Frame, connect
    from sessions.replay import Links

    inv, opening = run.inv, conversation.initialize
    version = opening.get("protocolVersion")
    if version not in HANDSHAKE_VERSIONS:
        raise CannotReplay(f"the recording's protocol revision {version!r} is not one this client offers")
    declared = capabilities(opening.get("capabilities"), version)
    notes = []
    if declared.to_wire(version) != opening.get("capabilities"):
        notes.append(
            f"the replay declares {json.dumps(declared.to_wire(version))} where the recording declared "
            f"{json.dumps(opening.get('capabilities'))}"
        )
    client_info = opening.get("clientInfo")
    if not isinstance(client_info, dict):
        client_info = {"name": "mcp-inspector", "version": "0.1.0"}
    options = ClientOptions(
        protocol_version=version,
        capabilities=declared,
        client_info=client_info,
        roots=inv.roots,
        timeout=inv.timeout,
        max_total_timeout=max(600.0, inv.timeout),
        # The recording's own requests are replayed, the tools/list it made before a call among them.
        validate=False,
        learn_tools=False,
        max_message_bytes=inv.max_message_bytes,
        max_message_bytes_name="--max-message-bytes",
    )
    if inv.max_reconnects is not None:
        options.max_reconnects = inv.max_reconnects
    session = connect(inv.target, options)
    asking = _Asking()
    session.handlers.update(_answering(conversation, inv, asking))

    def watch(event: object) -> None:
        if isinstance(event, Frame):
            frames.append(event)
            if event.kind == "stderr" and event.text.strip():
                stderr_tail[:] = [event.text.strip()]

    session.subscribe(watch)
    initialized = await _open(session, inv.timeout)
    try:
        outcomes = await _converse(session, conversation, Links(), asking)
    finally:
        await session.aclose()
    return _reports(conversation, initialized, outcomes, run), notes


async def _converse(
    session: ClientSession, conversation: Conversation, links: Links, asking: _Asking
) -> dict[int, tuple[_Outcome, dict[str, str]]]:
    """Send every step in order; each request's outcome (by position) with the ids mapped by then."""
    from sessions.engine import EngineError

    steps = conversation.steps
    waiting: dict[int, asyncio.Task[_Outcome]] = {}
    handles: dict[int, RequestHandle] = {}
    outcomes: dict[int, tuple[_Outcome, dict[str, str]]] = {}

    async def follow(at: int, handle: RequestHandle) -> _Outcome:
        outcome = await _settle(handle)
        asking.in_flight.remove(at)
        outcome.asked = asking.asked.pop(at, [])
        links.learn(steps[at].answer, outcome.answer)
        outcomes[at] = (outcome, dict(links.mapped))
        return outcome

    for at, step in enumerate(steps):
        before = [waiting[p] for p in step.after if p in waiting]
        if before:
            await asyncio.wait(before)
        if step.gap > 0.001:
            await asyncio.sleep(min(step.gap, MAX_GAP))
        params = links.params(step.params)
        if step.request:
            asking.in_flight.append(at)
            handle = await session.start_request(step.method, params, progress=step.progress)
            handles[at] = handle
            waiting[at] = asyncio.ensure_future(follow(at, handle))
        else:
            # A notification that cannot be sent (the server gone) shows in the answers that follow.
            with contextlib.suppress(EngineError):
                await _notify(session, step, params, handles)
    if waiting:
        await asyncio.wait(list(waiting.values()))
    return outcomes


async def _notify(session: ClientSession, step: Step, params: Any, handles: dict[int, RequestHandle]) -> None:
    """Send a notification; one that cancels a request cancels the replayed request (its id is new)."""
    if step.cancels is None:
        await session.notify(step.method, params)
        return
    cancelled = handles.get(step.cancels)
    if cancelled is not None and not cancelled.done:
        reason = (params or {}).get("reason")
        await cancelled.cancel(reason if isinstance(reason, str) else "cancelled")


def _reports(
    conversation: Conversation,
    initialized: dict[str, Any],
    outcomes: dict[int, tuple[_Outcome, dict[str, str]]],
    run: Replay,
) -> list[StepReport]:
    from sessions.replay import StepReport, compare_answers

    ignore = run.ignore
    first = StepReport(0, "initialize")
    if conversation.initialized is not None:
        first.differences = compare_answers(
            0, "initialize", conversation.initialized, {"result": initialized}, ignore=ignore
        )
    reports = [first]
    cancelled = {step.cancels for step in conversation.steps if step.cancels is not None}
    for at, step in enumerate(conversation.steps):
        if step.request:
            outcome, mapped = outcomes.get(at, (_Outcome(problem="not sent"), {}))
            reports.append(_report(step, outcome, mapped, run, at in cancelled))
    return reports


def _report(
    step: Step, outcome: _Outcome, mapped: dict[str, str], run: Replay, cancelled: bool
) -> StepReport:
    from sessions.replay import (
        ABSENT,
        Difference,
        StepReport,
        compare_answers,
        compare_asked,
        compare_latency,
    )

    assert step.number is not None
    named = (step.params or {}).get("name") or (step.params or {}).get("uri")
    report = StepReport(
        step.number,
        step.method,
        recorded_ms=step.latency_ms,
        replayed_ms=outcome.latency_ms,
        label=named if isinstance(named, str) else None,
    )
    if cancelled:  # whether a cancelled request is answered anyway is a race, in the recording as now
        return report
    if step.answer is not None and outcome.answer is not None:
        report.differences = compare_answers(
            step.number, step.method, step.answer, outcome.answer, ignore=run.ignore, mapped=mapped
        )
        report.differences += compare_asked(step.number, step.method, step.asked, outcome.asked)
        if run.latency:
            report.differences += compare_latency(
                step.number, step.method, step.latency_ms, outcome.latency_ms
            )
    elif step.answer is not None:
        report.differences = [
            Difference(step.number, step.method, "$", "not answered", step.answer, outcome.problem)
        ]
    elif outcome.answer is not None:
        report.differences = [Difference(step.number, step.method, "$", "added", ABSENT, outcome.answer)]
    return report


# --- the command ----------------------------------------------------------------------------------------


def _read(path: str) -> Conversation:
    from sessions.replay import Conversation, RecordingProblem, frames_of

    try:
        with open(path, "rb") as fh:
            return Conversation.of(frames_of(fh))
    except OSError as exc:
        raise CannotReplay(f"cannot read recording {path}: {exc.strerror or exc}") from None
    except RecordingProblem as exc:
        raise CannotReplay(f"recording {path}: {exc}") from None


def main(argv: Sequence[str]) -> int:
    """Run a replay; return 0 (nothing changed), 1 (something did) or 2 (it could not run)."""
    from inspector.cli import _fail, _save_record
    from inspector.cli.replay_report import junit, text

    try:
        try:
            run = parse_replay(argv)
        except (UsageError, CliError) as exc:
            return _fail(f"{exc} (see mcp-inspector replay --help)", 2)
        except SystemExit as exc:  # --help
            return exc.code if isinstance(exc.code, int) else 0
        frames: list[Frame] = []
        stderr_tail: list[str] = []
        try:
            conversation = _read(run.recording)
            reports, notes = asyncio.run(replay(conversation, run, frames, stderr_tail))
        except CannotReplay as exc:
            why = f" (server stderr: {stderr_tail[0][:200]})" if stderr_tail else ""
            return _fail(f"cannot replay: {exc}{why}", 2)
        finally:
            if run.record is not None:
                _save_record(run.record, frames, 2)
        from sessions.replay import summary

        data = {"recording": run.recording, "target": _target(run.inv), "notes": notes, **summary(reports)}
        outputs = [(run.json_file, lambda: json.dumps(data, indent=2, ensure_ascii=False) + "\n")]
        outputs.append((run.junit_file, lambda: junit(data, os.path.basename(run.recording))))
        for path, make in outputs:
            if path is not None:
                try:
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(make())
                except OSError as exc:
                    return _fail(f"cannot write {path}: {exc.strerror or exc}", 2)
        with contextlib.suppress(BrokenPipeError):
            sys.stdout.write(text(data))
            sys.stdout.flush()
        return 1 if data["changed"] else 0
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # a bug, or something nobody foresaw: still one line
        return _fail(f"unexpected {type(exc).__name__}: {exc}", 2)


def _target(inv: Invocation) -> str:
    url = getattr(inv.target, "url", None)
    if isinstance(url, str):
        return url
    return " ".join([getattr(inv.target, "command", ""), *getattr(inv.target, "args", ())])
