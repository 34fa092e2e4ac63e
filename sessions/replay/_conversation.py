"""A recording read as the conversation to replay: the client's initialize, its requests and
notifications in order with the answers they got, and how it answered the server's requests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sessions.engine import Frame
from sessions.frames import RecordError, frame_from_record, message_of

__all__ = [
    "ASKING_METHODS",
    "COUNTED_NOTIFICATIONS",
    "Conversation",
    "Links",
    "RecordingProblem",
    "Step",
    "frames_of",
    "progress_token",
]

# What the session itself sends: the handshake (or the stateless revision's discovery, and its stream for
# change notifications, which a session opens as it connects) is the replaying session's own.
OWN_METHODS = frozenset(
    {"initialize", "notifications/initialized", "server/discover", "subscriptions/listen"}
)
# The stateless revision's metadata every request carries: the replaying session stamps its own.
PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
INFO_META = "io.modelcontextprotocol/clientInfo"
CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
STAMPED_META = frozenset({PROTOCOL_META, INFO_META, CAPABILITIES_META})
# The server's requests that belong to the client request in flight (a tool asking the client's LLM or its
# user); roots/list and ping come when the server pleases, so which step they fall in says nothing.
ASKING_METHODS = frozenset({"sampling/createMessage", "elicitation/create"})
# The server's notifications that belong to a request (its progress, by its token), counted per step.
# Which others fall in a step says nothing: a list changed, a resource updated, and log lines, which nothing
# ties to a request (server-everything logs its roots as they come, in whichever step is in flight).
COUNTED_NOTIFICATIONS = frozenset({"notifications/progress"})
# Fields of a params object that name something the server made (a page, a task): mapped to the new server's.
LINKED_FIELDS = ("cursor", "taskId")


class RecordingProblem(ValueError):
    """The recording cannot be replayed (not a recording, or no conversation to replay)."""


def frames_of(lines: Iterable[bytes]) -> Iterator[Frame]:
    """The frames of a JSON Lines recording (``--record``, a session's export); blank lines are skipped."""
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            raise RecordingProblem(f"line {number}: not JSON") from None
        try:
            yield frame_from_record(record, number)
        except RecordError as exc:
            raise RecordingProblem(str(exc)) from None


def _answer(message: Mapping[str, Any]) -> dict[str, Any]:
    """A response message reduced to what is compared: ``{"result": ...}`` or ``{"error": ...}``."""
    if "error" in message:
        return {"error": message["error"]}
    return {"result": message.get("result")}


def progress_token(message: Mapping[str, Any]) -> str | int | None:
    """The progress token a request asks with (``params._meta.progressToken``), or a progress
    notification's (``params.progressToken``)."""
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else params.get("progressToken")
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


def _unstamped(params: Any) -> tuple[dict[str, Any] | None, bool]:
    """Recorded params without the progress token the recording session added, nor the stateless
    revision's protocol metadata; whether it had a progress token."""
    if not isinstance(params, dict):
        return None, False
    meta = params.get("_meta")
    if not isinstance(meta, dict) or not ({"progressToken", *STAMPED_META} & meta.keys()):
        return dict(params), False
    rest = {k: v for k, v in meta.items() if k != "progressToken" and k not in STAMPED_META}
    kept = {k: v for k, v in params.items() if k != "_meta"}
    if rest:
        kept["_meta"] = rest
    return kept, "progressToken" in meta


def _declared(params: Any) -> dict[str, Any]:
    """What a stateless client declared in its request's ``_meta``, as initialize's params say it."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    declared: dict[str, Any] = {
        "protocolVersion": meta.get(PROTOCOL_META),
        "capabilities": meta.get(CAPABILITIES_META) if isinstance(meta.get(CAPABILITIES_META), dict) else {},
    }
    if isinstance(meta.get(INFO_META), dict):
        declared["clientInfo"] = meta[INFO_META]
    return declared


@dataclass
class Step:
    """A request or notification the recorded client sent, and what it got."""

    seq: int
    """The recorded frame."""
    method: str
    params: dict[str, Any] | None
    request: bool
    number: int | None = None
    """Requests are numbered from 1 (initialize is step 0); notifications are not steps of the report."""
    progress: bool = False
    """It asked for progress (the replay asks too, with a token of its own)."""
    rpc_id: int | str | None = None
    answer: dict[str, Any] | None = None
    """The recorded answer, ``{"result": ...}`` or ``{"error": ...}``; ``None`` if none came."""
    latency_ms: float | None = None
    after: list[int] = field(default_factory=list)
    """Requests (positions among the steps) whose answers the recorded client had before it sent this."""
    gap: float = 0.0
    """Seconds the recorded client waited after the last of those answers (or its previous message)."""
    cancels: int | None = None
    """notifications/cancelled: the step whose request it cancels."""
    asked: list[str] = field(default_factory=list)
    """The server's sampling and elicitation requests while this was the newest request in flight."""
    notified: dict[str, int] = field(default_factory=dict)
    """The server's progress notifications (by this request's token) before its answer, counted by method."""


@dataclass
class Conversation:
    """What a replay sends, what it compares with, and how it answers the server."""

    initialize: dict[str, Any]
    """The recorded client's initialize params: protocolVersion, capabilities, clientInfo."""
    initialized: dict[str, Any] | None
    """The recorded answer to initialize."""
    steps: list[Step]
    answers: dict[str, list[dict[str, Any]]]
    """The recorded client's answers to the server's requests, by method, in order."""
    stateless: bool = False
    """Opened with server/discover (2026-07-28): ``initialize`` is what its requests' ``_meta`` declared,
    ``initialized`` the discovery's answer."""

    @property
    def opening(self) -> str:
        """The method of step 0: the handshake's, or the stateless revision's discovery."""
        return "server/discover" if self.stateless else "initialize"

    @property
    def requests(self) -> list[Step]:
        return [step for step in self.steps if step.request]

    @classmethod
    def of(cls, frames: Iterable[Frame]) -> Conversation:
        """Read the conversation out of a recording's frames (in their order)."""
        return _Reader().read(frames)


class _Reader:
    def __init__(self) -> None:
        self.initialize: dict[str, Any] | None = None
        self.initialize_seq: int | None = None
        self.initialized: dict[str, Any] | None = None
        self.steps: list[Step] = []
        self.by_seq: dict[int, int] = {}
        self.by_id: dict[int | str, int] = {}
        self.server_requests: dict[int, str] = {}
        self.answers: dict[str, list[dict[str, Any]]] = {}
        self.answered: list[int] = []
        """Requests answered since the client's last message."""
        self.pending: list[int] = []
        """Requests in flight, oldest first."""
        self.tokens: dict[str | int, int] = {}
        self.last_mono: float | None = None
        self.stateless = False
        self.awaiting_input: dict[int, dict[str, str]] = {}
        """Stateless: requests answered input_required, with the method of each input request by its key."""

    def read(self, frames: Iterable[Frame]) -> Conversation:
        for frame in frames:
            if frame.kind == "message" and frame.direction in ("in", "out"):
                self.see(frame, message_of(frame.raw))
        if self.initialize is None:
            raise RecordingProblem(
                "the recording has no initialize (nor server/discover) from the client: not a client's "
                "conversation"
            )
        return Conversation(self.initialize, self.initialized, self.steps, self.answers, self.stateless)

    def see(self, frame: Frame, message: dict[str, Any]) -> None:
        if frame.direction == "in":
            if frame.rpc_kind == "request" and frame.method:
                self.server_requests[frame.seq] = frame.method
                if frame.method in ASKING_METHODS and self.pending:
                    self.steps[self.pending[-1]].asked.append(frame.method)
            elif frame.rpc_kind in ("result", "error"):
                self.response(frame, message)
            elif frame.rpc_kind == "notification" and frame.method in COUNTED_NOTIFICATIONS:
                self.notified(frame.method, message)
            return
        if frame.rpc_kind in ("result", "error"):
            method = frame.method or self.server_requests.get(frame.pair_seq or 0)
            if method:
                self.answers.setdefault(method, []).append(_answer(message))
        elif frame.rpc_kind in ("request", "notification") and frame.method:
            self.send(frame, message)

    def notified(self, method: str, message: dict[str, Any]) -> None:
        at = self.tokens.get(progress_token(message))  # type: ignore[arg-type]
        if at is not None and at in self.pending:
            counts = self.steps[at].notified
            counts[method] = counts.get(method, 0) + 1

    def response(self, frame: Frame, message: dict[str, Any]) -> None:
        if frame.pair_seq is not None and frame.pair_seq == self.initialize_seq:
            self.initialized = _answer(message)
            return
        at = self.by_seq.get(frame.pair_seq) if frame.pair_seq is not None else None
        if at is None and frame.rpc_id is not None:
            at = self.by_id.get(frame.rpc_id)
        if at is None or self.steps[at].answer is not None:
            return
        step = self.steps[at]
        result = message.get("result")
        if isinstance(result, dict) and result.get("resultType") == "input_required":
            self.input_required(at, result)
            return
        step.answer, step.latency_ms = _answer(message), frame.latency_ms
        self.answered.append(at)
        self.pending.remove(at)
        self.last_mono = frame.mono

    def input_required(self, at: int, result: dict[str, Any]) -> None:
        """Not the answer yet: the client answers the requests it holds and asks again (a retry)."""
        asked = result.get("inputRequests")
        methods = {
            key: str(request.get("method"))
            for key, request in (asked.items() if isinstance(asked, dict) else ())
            if isinstance(request, dict) and isinstance(request.get("method"), str)
        }
        self.steps[at].asked += [method for method in methods.values() if method in ASKING_METHODS]
        self.awaiting_input[at] = methods

    def retried(self, frame: Frame, method: str, params: Any) -> bool:
        """A retry after input_required, with the client's input responses: part of the step it retries,
        its responses the client's answers to the server's requests."""
        if not isinstance(params, dict) or not ({"inputResponses", "requestState"} & params.keys()):
            return False
        at = next((at for at in reversed(self.awaiting_input) if self.steps[at].method == method), None)
        if at is None:
            return False
        methods = self.awaiting_input.pop(at)
        responses = params.get("inputResponses")
        for key, response in responses.items() if isinstance(responses, dict) else ():
            if key in methods:
                self.answers.setdefault(methods[key], []).append({"result": response})
        self.by_seq[frame.seq] = at
        if frame.rpc_id is not None:
            self.by_id[frame.rpc_id] = at
        token = progress_token({"params": params})
        if token is not None:
            self.tokens[token] = at
        return True

    def send(self, frame: Frame, message: dict[str, Any]) -> None:
        method = str(frame.method)
        if (
            frame.rpc_kind == "request"
            and self.stateless
            and self.retried(frame, method, message.get("params"))
        ):
            return
        if method in OWN_METHODS:
            # A discovery that failed, then the handshake (a client in auto mode): the handshake opened it.
            if method == "initialize" and (self.initialize is None or self.stateless):
                params = message.get("params")
                self.initialize = params if isinstance(params, dict) else {}
                self.initialize_seq, self.initialized, self.stateless = frame.seq, None, False
            elif method == "server/discover" and self.initialize is None:
                self.initialize, self.stateless = _declared(message.get("params")), True
                self.initialize_seq = frame.seq
            self.last_mono = frame.mono
            return
        params, progress = _unstamped(message.get("params"))
        request = frame.rpc_kind == "request"
        step = Step(frame.seq, method, params, request, progress=progress, rpc_id=frame.rpc_id)
        if request:
            step.number = sum(1 for s in self.steps if s.request) + 1
            self.by_seq[frame.seq] = len(self.steps)
            self.pending.append(len(self.steps))
            if frame.rpc_id is not None:
                self.by_id[frame.rpc_id] = len(self.steps)
            token = progress_token(message)
            if token is not None:
                self.tokens[token] = len(self.steps)
        elif method == "notifications/cancelled" and params is not None:
            step.cancels = self.by_id.get(params.get("requestId"))  # type: ignore[arg-type]
            if step.cancels in self.pending:
                self.pending.remove(step.cancels)
        step.after, self.answered = self.answered, []
        if self.last_mono is not None:
            step.gap = max(0.0, frame.mono - self.last_mono)
        self.last_mono = frame.mono
        self.steps.append(step)


class Links:
    """Values of the recorded server (a page's cursor, a task's id) and the new server's in their place.

    Learned from each pair of answers as they come; later requests are sent with the new values, and
    answers compare a mapped value as unchanged.
    """

    def __init__(self) -> None:
        self.mapped: dict[str, str] = {}

    def learn(self, recorded: Mapping[str, Any] | None, replayed: Mapping[str, Any] | None) -> None:
        was, now = _ids((recorded or {}).get("result")), _ids((replayed or {}).get("result"))
        for name, values in was.items():
            for old, new in zip(values, now.get(name, []), strict=False):
                if old != new:
                    self.mapped[old] = new

    def params(self, params: Any) -> Any:
        """``params`` with every linked field (``cursor``, ``taskId``, at any depth) mapped."""
        if isinstance(params, dict):
            return {
                key: self.mapped.get(value, value)
                if key in LINKED_FIELDS and isinstance(value, str)
                else self.params(value)
                for key, value in params.items()
            }
        if isinstance(params, list):
            return [self.params(value) for value in params]
        return params


def _ids(result: Any) -> dict[str, list[str]]:
    """The ids an answer gives the client to use later: its ``nextCursor``, the task ids it names."""
    found: dict[str, list[str]] = {}
    if not isinstance(result, dict):
        return found
    if isinstance(result.get("nextCursor"), str):
        found["cursor"] = [result["nextCursor"]]
    listed = result.get("tasks")
    tasks = [result.get("task"), *(listed if isinstance(listed, list) else [])]
    if isinstance(result.get("taskId"), str):  # tasks/get, tasks/cancel: the task itself
        tasks.append(result)
    ids = [t["taskId"] for t in tasks if isinstance(t, dict) and isinstance(t.get("taskId"), str)]
    if ids:
        found["taskId"] = ids
    return found
