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
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from inspector.cli.arguments import CliError, Invocation, UsageError, _Parser, parse_args, split_subcommand

if TYPE_CHECKING:
    from sessions.engine import ClientCapabilities, ClientSession, Frame, Target
    from sessions.replay import Baseline, Conversation, Outcomes, Pattern, StepReport

__all__ = ["main"]

USAGE = (
    "mcp-inspector replay RECORDING TARGET [ARGS...] [--baseline OLD_TARGET] [--report FILE.html] "
    "[--json FILE] [--junit FILE] [--ignore JSONPATH]... [--no-latency] [--record FILE]"
)
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
    report_file: str | None = None
    record: str | None = None
    latency: bool = True
    """Whether a step that became slower is a change (``--no-latency``: not, where timing is noise)."""
    baseline: Target | None = None
    """``--baseline``: the old build, replayed twice first to learn what differs from run to run."""
    baseline_text: str | None = None


def parse_replay(argv: Sequence[str]) -> Replay:
    """The replay's command line; ``UsageError`` says what is wrong with it."""
    from sessions.replay import PathError, Pattern

    why = "a replay sends the recording's own requests (a target's own option goes after --)"
    recording, opts, rest = split_subcommand(
        argv, _parser(), first="recording", usage=USAGE, refused=NOT_FOR_REPLAY, why=why, method="ping"
    )
    try:
        ignore = [Pattern(text) for text in opts.ignore]
    except PathError as exc:
        raise UsageError(f"--ignore {exc}") from None
    inv = parse_args(rest)
    run = Replay(recording, inv, ignore, opts.json, opts.junit, opts.report, opts.record, not opts.no_latency)
    if opts.baseline is not None:
        run.baseline, run.baseline_text = baseline_target(opts.baseline, inv.target), opts.baseline
    return run


def baseline_target(text: str, target: Target) -> Target:
    """``--baseline``'s command line or URL, with the target's options (its environment, headers, TLS)."""
    from inspector.cli.arguments import _target_from_words
    from sessions.engine import HttpTarget, StdioTarget
    from sessions.servers import split_command

    env = dict(target.env) if isinstance(target, StdioTarget) else {}
    headers = dict(target.headers) if isinstance(target, HttpTarget) else {}
    try:
        made = _target_from_words(split_command(text), env, headers, None, 10.0)
    except (UsageError, ValueError) as exc:
        raise UsageError(f"--baseline: {exc}") from None
    if isinstance(made, StdioTarget) and isinstance(target, StdioTarget):
        return dataclasses.replace(target, command=made.command, args=list(made.args))
    if isinstance(made, HttpTarget) and isinstance(target, HttpTarget):
        return dataclasses.replace(target, url=made.url)
    return made


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
    parser.add_argument(
        "--baseline",
        metavar="OLD_TARGET",
        help="the old build (a command line in one word, or a URL), replayed twice first: what differs "
        "between those two runs is not a change",
    )
    parser.add_argument(
        "--report", metavar="FILE", help="also write the report as one self-contained HTML page to FILE"
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
    from sessions.replay import capabilities

    return capabilities(declared, version)


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


async def run_once(
    conversation: Conversation,
    inv: Invocation,
    target: Target,
    frames: list[Frame] | None = None,
    stderr_tail: list[str] | None = None,
) -> tuple[dict[str, Any], Outcomes, list[str]]:
    """Replay the conversation against ``target`` once: initialize's result, each request's outcome, and
    notes on how it ran."""
    from inspector.cli.answers import handlers
    from sessions.engine import HANDSHAKE_VERSIONS, MODERN_VERSIONS, ClientOptions, Frame, connect
    from sessions.replay import Asking, answering, client_info, converse, declared_note

    opening = conversation.initialize
    version = opening.get("protocolVersion")
    # A stateless revision's recording is replayed statelessly: the engine discovers rather than initializes.
    if version not in HANDSHAKE_VERSIONS and version not in MODERN_VERSIONS:
        raise CannotReplay(f"the recording's protocol revision {version!r} is not one this client offers")
    declared = capabilities(opening.get("capabilities"), version)
    note = declared_note(conversation, declared, version)
    options = ClientOptions(
        protocol_version=version,
        capabilities=declared,
        client_info=client_info(conversation),
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
    session = connect(target, options)
    asking = Asking()
    # Past what the recording answered, as the CLI answers: --root, --elicitation, --sampling, or -32601.
    fallback = handlers(inv.elicitation, inv.sampling)
    session.handlers.update(answering(conversation, asking, fallback, inv.roots))

    def watch(event: object) -> None:
        if isinstance(event, Frame):
            if frames is not None:
                frames.append(event)
            if stderr_tail is not None and event.kind == "stderr" and event.text.strip():
                stderr_tail[:] = [event.text.strip()]

    session.subscribe(watch)
    initialized = await _open(session, inv.timeout)
    try:
        outcomes = await converse(session, conversation, asking)
    finally:
        await session.aclose()
    return initialized, outcomes, [note] if note else []


async def replay(
    conversation: Conversation, run: Replay, frames: list[Frame], stderr_tail: list[str]
) -> tuple[list[StepReport], list[str], Baseline | None]:
    """Replay the conversation against the target (after learning from the baseline, if any); each step's
    report, notes on how it ran, and what was learned from the baseline."""
    from sessions.replay import Baseline, as_recorded, reports

    baseline = None
    if run.baseline is not None:
        try:
            first = await run_once(conversation, run.inv, run.baseline, stderr_tail=stderr_tail)
            second = await run_once(conversation, run.inv, run.baseline, stderr_tail=stderr_tail)
        except CannotReplay as exc:
            raise CannotReplay(f"the baseline: {exc}") from None
        learned = reports(as_recorded(conversation, *first[:2]), *second[:2], latency=False)
        baseline = Baseline.learn(learned)
        stderr_tail.clear()
    initialized, outcomes, notes = await run_once(conversation, run.inv, run.inv.target, frames, stderr_tail)
    found = reports(conversation, initialized, outcomes, ignore=run.ignore, latency=run.latency)
    return found, notes, baseline


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
            reports, notes, baseline = asyncio.run(replay(conversation, run, frames, stderr_tail))
        except CannotReplay as exc:
            why = f" (server stderr: {stderr_tail[0][:200]})" if stderr_tail else ""
            return _fail(f"cannot replay: {exc}{why}", 2)
        finally:
            if run.record is not None:
                _save_record(run.record, frames, 2)
        from sessions.replay import summary

        sifted = baseline.sift(reports) if baseline is not None else []
        data: dict[str, Any] = {"recording": run.recording, "target": _target(run.inv.target), "notes": notes}
        if baseline is not None:
            data["baseline_target"] = run.baseline_text
            data.update(baseline=baseline.to_list(), not_counted=sifted)
        data.update(summary(reports))
        outputs = [(run.json_file, lambda: json.dumps(data, indent=2, ensure_ascii=False) + "\n")]
        outputs.append((run.junit_file, lambda: junit(data, os.path.basename(run.recording))))
        outputs.append((run.report_file, lambda: _html(data)))
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


def _html(data: dict[str, Any]) -> str:
    from inspector.cli.replay_html import html_report

    return html_report(data)


def _target(target: Target) -> str:
    url = getattr(target, "url", None)
    if isinstance(url, str):
        return url
    return " ".join([getattr(target, "command", ""), *getattr(target, "args", ())])
