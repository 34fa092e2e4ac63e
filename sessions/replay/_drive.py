"""A conversation sent through an engine session someone else opened (the CLI's, a live session's owner):
the recorded client's requests and notifications in order, the server's requests answered as recorded,
and each step's report. No Django, no I/O of its own: the session given does the talking."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sessions.engine import (
    UI_EXTENSION,
    ClientCapabilities,
    ClientSession,
    EngineError,
    Frame,
    McpError,
    PendingRequest,
    RequestHandle,
)
from sessions.frames import message_of
from sessions.replay._conversation import (
    ASKING_METHODS,
    COUNTED_NOTIFICATIONS,
    Conversation,
    Links,
    Step,
    progress_token,
)
from sessions.replay._diff import (
    ABSENT,
    Difference,
    compare_answers,
    compare_asked,
    compare_latency,
    compare_notified,
)
from sessions.replay._paths import Pattern
from sessions.replay._report import StepReport

__all__ = [
    "MAX_GAP",
    "Asking",
    "Handler",
    "Outcome",
    "Outcomes",
    "answering",
    "as_recorded",
    "capabilities",
    "client_info",
    "converse",
    "declared_note",
    "reports",
]

# The recorded client's pauses are kept (a task polled at its pollInterval), up to this many seconds:
# a recording made by a person clicking should not replay at a person's pace.
MAX_GAP = 5.0
Handler = Callable[[PendingRequest], Awaitable[dict[str, Any]]]


def capabilities(declared: Any, version: str) -> ClientCapabilities:
    """The engine's capabilities for what the recorded client declared in initialize."""
    caps = declared if isinstance(declared, dict) else {}
    roots = caps["roots"] if isinstance(caps.get("roots"), dict) else {}
    elicitation = caps.get("elicitation")
    modes = elicitation if isinstance(elicitation, dict) else {}
    experimental = caps.get("experimental")
    return ClientCapabilities(
        roots="roots" in caps,
        roots_list_changed=bool(roots.get("listChanged")),
        sampling="sampling" in caps,
        sampling_tools=isinstance(caps.get("sampling"), dict) and "tools" in caps["sampling"],
        # Before 2025-11-25, and as {} since, elicitation means form mode.
        elicitation_form=elicitation is not None and ("form" in modes or "url" not in modes),
        elicitation_url="url" in modes,
        experimental=experimental if isinstance(experimental, dict) and experimental else None,
        tasks="tasks" in caps,
        apps=isinstance(caps.get("extensions"), dict) and UI_EXTENSION in caps["extensions"],
    )


def declared_note(conversation: Conversation, declared: ClientCapabilities, version: str) -> str | None:
    """What the replay declares where it cannot declare what the recording did, if anything."""
    recorded = conversation.initialize.get("capabilities")
    if declared.to_wire(version) == recorded:
        return None
    return (
        f"the replay declares {json.dumps(declared.to_wire(version))} where the recording declared "
        f"{json.dumps(recorded)}"
    )


def client_info(conversation: Conversation) -> dict[str, Any]:
    info = conversation.initialize.get("clientInfo")
    return info if isinstance(info, dict) else {"name": "mcp-inspector", "version": "0.1.0"}


class Asking:
    """Which of the replay's requests is the newest in flight, and what the server asked and notified
    during each (counted as the recording's steps are: ``Step.asked``, ``Step.notified``)."""

    def __init__(self) -> None:
        self.in_flight: list[int] = []
        self.asked: dict[int, list[str]] = {}
        self.notified: dict[int, dict[str, int]] = {}
        self.tokens: dict[str | int, int] = {}

    def note(self, method: str) -> None:
        if method in ASKING_METHODS and self.in_flight:
            self.asked.setdefault(self.in_flight[-1], []).append(method)

    def watch(self, event: object) -> None:
        """A frame of the replaying session: a request's progress token, a notification to count."""
        if not isinstance(event, Frame) or event.kind != "message" or not self.in_flight:
            return
        if event.direction == "out" and event.rpc_kind == "request":
            token = progress_token(message_of(event.raw))
            if token is not None:  # sent while its step is the newest in flight: it is that step's
                self.tokens[token] = self.in_flight[-1]
        elif event.direction == "in" and event.rpc_kind == "notification":
            method = event.method
            if method not in COUNTED_NOTIFICATIONS:
                return
            at = self.tokens.get(progress_token(message_of(event.raw)))  # type: ignore[arg-type]
            if at is not None and at in self.in_flight:
                counts = self.notified.setdefault(at, {})
                counts[method] = counts.get(method, 0) + 1


def answering(
    conversation: Conversation,
    asking: Asking,
    fallback: Mapping[str, Handler],
    roots: Sequence[Any] = (),
) -> dict[str, Handler]:
    """Handlers answering the server's requests as the recording did, in order; past what it recorded,
    with ``fallback``'s handler for the method, ``roots`` for roots/list, or -32601."""
    queues = {method: list(answers) for method, answers in conversation.answers.items() if method != "ping"}

    def answer(method: str) -> Handler:
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
                return {"roots": list(roots)}
            raise McpError(-32601, f"Method not found: {method}")

        return handle

    methods = {*queues, "roots/list", "sampling/createMessage", "elicitation/create"}
    return {method: answer(method) for method in methods}


@dataclass
class Outcome:
    """What a replayed request got: its answer (or why none came), its time, what the server asked."""

    answer: dict[str, Any] | None = None
    latency_ms: float | None = None
    problem: str | None = None
    asked: list[str] = field(default_factory=list)
    notified: dict[str, int] = field(default_factory=dict)


Outcomes = dict[int, tuple[Outcome, dict[str, str]]]
"""Each request's outcome by its position among the steps, with the ids mapped by then."""


async def _settle(handle: RequestHandle) -> Outcome:
    outcome = Outcome()
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


async def converse(session: ClientSession, conversation: Conversation, asking: Asking) -> Outcomes:
    """Send every step in order, each once the answers it waited for in the recording have come."""
    steps = conversation.steps
    links = Links()
    waiting: dict[int, asyncio.Task[Outcome]] = {}
    handles: dict[int, RequestHandle] = {}
    outcomes: Outcomes = {}

    async def follow(at: int, handle: RequestHandle) -> Outcome:
        outcome = await _settle(handle)
        asking.in_flight.remove(at)
        outcome.asked = asking.asked.pop(at, [])
        outcome.notified = asking.notified.pop(at, {})
        links.learn(steps[at].answer, outcome.answer)
        outcomes[at] = (outcome, dict(links.mapped))
        return outcome

    unsubscribe = session.subscribe(asking.watch)
    try:
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
    finally:
        unsubscribe()
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


def reports(
    conversation: Conversation,
    initialized: dict[str, Any],
    outcomes: Outcomes,
    *,
    ignore: Sequence[Pattern] = (),
    latency: bool = True,
) -> list[StepReport]:
    """Each step's report: initialize's answer (step 0), then each request's against the recorded one."""
    first = StepReport(0, conversation.opening)
    if conversation.initialized is not None:
        first.differences = compare_answers(
            0, conversation.opening, conversation.initialized, {"result": initialized}, ignore=ignore
        )
    found = [first]
    cancelled = {step.cancels for step in conversation.steps if step.cancels is not None}
    for at, step in enumerate(conversation.steps):
        if step.request:
            outcome, mapped = outcomes.get(at, (Outcome(problem="not sent"), {}))
            found.append(_report(step, outcome, mapped, ignore, latency, at in cancelled))
    return found


def _report(
    step: Step,
    outcome: Outcome,
    mapped: dict[str, str],
    ignore: Sequence[Pattern],
    latency: bool,
    cancelled: bool,
) -> StepReport:
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
            step.number, step.method, step.answer, outcome.answer, ignore=ignore, mapped=mapped
        )
        report.differences += compare_asked(step.number, step.method, step.asked, outcome.asked)
        report.differences += compare_notified(step.number, step.method, step.notified, outcome.notified)
        if latency:
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


def as_recorded(conversation: Conversation, initialized: dict[str, Any], outcomes: Outcomes) -> Conversation:
    """The conversation with a replay's answers in place of the recorded ones: what a second replay is
    compared with to see what differs between two runs of the same build."""
    steps = []
    for at, step in enumerate(conversation.steps):
        outcome = outcomes.get(at, (Outcome(), {}))[0] if step.request else None
        if outcome is None:
            steps.append(step)
        else:
            steps.append(
                replace(step, answer=outcome.answer, latency_ms=outcome.latency_ms, asked=outcome.asked)
            )
    return replace(conversation, initialized={"result": initialized}, steps=steps)
