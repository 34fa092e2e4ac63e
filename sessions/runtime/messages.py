"""The runtime's message protocol, typed: commands to an owner, its replies, and session events.

Views and consumers talk to a session's owner only through the channel layer (the owner may live in
another process). Each message is a frozen dataclass with one definition used by both sides;
``encode_*`` turns it into the plain dict the channel layer carries and ``decode_*`` back. See
docs/architecture.md for the whole protocol.
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sessions import frames

__all__ = [
    "RUNTIME_CHANNEL",
    "ActivityAdded",
    "AppMessages",
    "AuthorizationChanged",
    "CallDone",
    "CallProgress",
    "Cancel",
    "Command",
    "Disconnect",
    "Done",
    "Event",
    "Failed",
    "Feature",
    "Flush",
    "CancelAuthorization",
    "ForgetTokens",
    "FramesStored",
    "LiveRows",
    "NoteAdded",
    "Notify",
    "OAuthReturned",
    "OAuthStep",
    "Presence",
    "Reinitialize",
    "Reject",
    "Reply",
    "Request",
    "Respond",
    "ReviewChanged",
    "SetRoots",
    "StartSession",
    "Started",
    "StateChanged",
    "StorageChanged",
    "TapChanged",
    "Viewer",
    "WarmStart",
    "decode_command",
    "decode_event",
    "decode_reply",
    "encode_command",
    "encode_event",
    "encode_reply",
]

RUNTIME_CHANNEL = "mcp-runtime"
"""The channel every runtime (embedded, or each hosted engine worker) takes new sessions from."""


class _Message:
    NAME: ClassVar[str]

    def fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


def _decode(kinds: dict[str, type[Any]], name: Any, message: dict[str, Any]) -> Any:
    kind = kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"unknown message {name!r}")
    names = {f.name for f in dataclasses.fields(kind)}
    return kind(**{k: v for k, v in message.items() if k in names})


# --- to the runtime -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartSession(_Message):
    """Open the connection of a stored session: an owner task takes it from there."""

    NAME = "session.start"
    session_id: int
    intent: str = ""
    """The key of the page's connect, which its warm start hints carry too (engine/_warm.py)."""

    def encode(self) -> dict[str, Any]:
        return {"type": self.NAME, "session_id": self.session_id, "intent": self.intent}


@dataclass(frozen=True)
class WarmStart(_Message):
    """Start a stdio server now, for the connect the person is about to ask for (embedded runtime only)."""

    NAME = "session.warm"
    config: dict[str, Any]
    intent: str = ""

    def encode(self) -> dict[str, Any]:
        return {"type": self.NAME, "config": self.config, "intent": self.intent}


# --- commands: web → a session's owner ------------------------------------------------------------


class Command(_Message):
    """A command to one session's owner, sent to its channel (``McpSession.worker_channel``)."""


@dataclass(frozen=True)
class Request(Command):
    """Send an MCP request; reply ``Started`` at once, then ``Done`` with its outcome."""

    NAME = "request"
    method: str
    params: dict[str, Any] | None = None
    timeout: float | None = None
    wait: float | None = None
    """How long the asker waits for ``Done``; a longer request also ends with a ``CallDone`` event."""
    stored: bool = True
    """Reply ``Done`` only once the response frame is in the database (the asker reads it next)."""
    user_id: int | None = None
    """Who sent it: the owner records it in the session's activity, with the request's frame."""


@dataclass(frozen=True)
class Notify(Command):
    """Send an MCP notification (no id, no answer); reply ``Done`` with its frame's ``seq`` once stored."""

    NAME = "notify"
    method: str
    params: dict[str, Any] | None = None
    user_id: int | None = None


@dataclass(frozen=True)
class Cancel(Command):
    NAME = "cancel"
    rpc_id: int
    reason: str = "cancelled in the inspector"


@dataclass(frozen=True)
class Respond(Command):
    """Answer a server→client request waiting for a person."""

    NAME = "respond"
    key: str
    result: dict[str, Any]
    edited: bool = False
    note: str | None = None
    user_id: int | None = None
    by: str = ""
    """Who answered, by name: the response frame's note says "answered by <by>"."""


@dataclass(frozen=True)
class Reject(Command):
    NAME = "reject"
    key: str
    code: int = -1
    message: str = "User rejected the request"
    user_id: int | None = None
    by: str = ""


@dataclass(frozen=True)
class SetRoots(Command):
    NAME = "set_roots"
    roots: list[Any]
    notify: bool = True
    """Send roots/list_changed (False: the server just received them in an answer)."""


@dataclass(frozen=True)
class Feature(Command):
    """A panel action whose wire form depends on the revision (ping, log level, subscriptions)."""

    NAME = "feature"
    action: str
    value: str = ""
    user_id: int | None = None


@dataclass(frozen=True)
class Reinitialize(Command):
    NAME = "reinitialize"


@dataclass(frozen=True)
class Disconnect(Command):
    NAME = "disconnect"


@dataclass(frozen=True)
class Flush(Command):
    """Reply ``Done`` once every frame the owner has seen is in the database (two seconds at most):
    a call card drawn from the owner's answer links to frames the recorder may not have stored yet."""

    NAME = "flush"


@dataclass(frozen=True)
class Viewer(Command):
    """A tab started (+1) or stopped (-1) watching: sessions nobody watches end after a while."""

    NAME = "viewer"
    delta: int


@dataclass(frozen=True)
class OAuthReturned(Command):
    """The authorization server sent the person back to our callback (``url``, whole) for the
    authorization whose ``state`` has this SHA-256: the waiting flow goes on with it."""

    NAME = "oauth_returned"
    state_sha256: str
    url: str


@dataclass(frozen=True)
class CancelAuthorization(Command):
    """The person gave up on the authorization whose ``state`` has this SHA-256 (``by``: who): the
    waiting flow fails, saying so."""

    NAME = "cancel_authorization"
    state_sha256: str
    by: str = ""


@dataclass(frozen=True)
class ForgetTokens(Command):
    """Drop the session's OAuth token (the stored ones are deleted by the asker): the next
    refusal authorizes again."""

    NAME = "forget_tokens"


@dataclass(frozen=True)
class OAuthStep(Command):
    """The OAuth debugger: run the flow's next step (``run_all``: every step left); reply at once,
    the steps' frames and progress reach the page through the timeline."""

    NAME = "oauth_step"
    run_all: bool = False
    user_id: int | None = None


@dataclass(frozen=True)
class AppMessages(Command):
    """MCP Apps: what passed between a view and the page that hosts it, for the timeline."""

    NAME = "app_messages"
    view: str
    """The view's ``ui://`` URI."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Each ``{"direction": "in" (view → host) or "out", "message": ..., "violation": ""}``."""
    dropped: int = 0
    """How many the page left out since its last batch (a view flooding it)."""


COMMANDS: dict[str, type[Command]] = {
    c.NAME: c
    for c in (
        Request,
        Notify,
        Cancel,
        Respond,
        Reject,
        SetRoots,
        Feature,
        Reinitialize,
        Disconnect,
        Flush,
        Viewer,
        OAuthReturned,
        CancelAuthorization,
        ForgetTokens,
        OAuthStep,
        AppMessages,
    )
}


def encode_command(command: Command, reply: str = "") -> dict[str, Any]:
    """The channel-layer message for a command; ``reply`` names the channel for the owner's answers."""
    return {"type": "owner.command", "command": command.NAME, "reply": reply, **command.fields()}


def decode_command(message: dict[str, Any]) -> tuple[Command, str]:
    """The command a message carries and its reply channel; ``ValueError`` for an unknown one."""
    command: Command = _decode(COMMANDS, message.get("command"), message)
    return command, str(message.get("reply") or "")


# --- replies: an owner → the asker ----------------------------------------------------------------


class Reply(_Message):
    """What an owner answers a command, on the asker's reply channel."""


@dataclass(frozen=True)
class Started(Reply):
    NAME = "started"
    rpc_id: int


@dataclass(frozen=True)
class Done(Reply):
    """The command is done; for a request, ``outcome`` holds its result or error and its frames."""

    NAME = "done"
    outcome: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Failed(Reply):
    NAME = "failed"
    error: str


REPLIES: dict[str, type[Reply]] = {r.NAME: r for r in (Started, Done, Failed)}


def encode_reply(reply: Reply) -> dict[str, Any]:
    return {"type": "owner.reply", "reply": reply.NAME, **reply.fields()}


def decode_reply(message: dict[str, Any]) -> Reply:
    reply: Reply = _decode(REPLIES, message.get("reply"), message)
    return reply


# --- events: an owner → every viewer of the session (its group) -------------------------------------


class Event(_Message):
    """Something viewers of a session should show, published to the session's group."""


class LiveRows(list[dict[str, Any]]):
    """A live batch's rows, made for its event and only read after that: the in-memory channel layer
    deep-copies each message for each tab it reaches, and these go to every tab as they are. Nobody
    may change them."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> LiveRows:
        return self


@dataclass(frozen=True)
class FramesStored(Event):
    """Frames ``first``..``last`` are in the database; ``rows`` are the newest of them, without bytes.

    ``answers``: whether any of them, ``rows`` or not, is a response (a running call card may wait for it);
    when not given, whether one of ``rows`` is (they are all the frames, then).
    """

    NAME = "frames"
    first: int
    last: int
    rows: list[dict[str, Any]]
    answers: bool | None = None

    def __post_init__(self) -> None:
        if self.answers is None:
            object.__setattr__(self, "answers", frames.answers(self.rows))


@dataclass(frozen=True)
class StateChanged(Event):
    """The session's state changed (``status``, when it says, and why); ``serial`` names this change,
    so that a web process draws it once for all its tabs."""

    NAME = "state"
    status: str = ""
    note: str = ""
    serial: str = field(default_factory=lambda: secrets.token_hex(8), compare=False)


@dataclass(frozen=True)
class StorageChanged(Event):
    """The database refuses the session's frames (``failing``: why), or takes them again.

    ``held``: frames kept in memory meanwhile; ``lost``: frames the session lost so far, past the
    bound on what is held (each run of them a ``not-stored`` gap on the timeline).
    """

    NAME = "storage"
    failing: str = ""
    held: int = 0
    lost: int = 0


@dataclass(frozen=True)
class CallProgress(Event):
    NAME = "progress"
    rpc_id: int | str
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True)
class CallDone(Event):
    """A request that outlived its asker's wait ended: viewers finish its running card."""

    NAME = "call_done"
    outcome: dict[str, Any]


@dataclass(frozen=True)
class ReviewChanged(Event):
    """A server→client request started or stopped waiting for a person."""

    NAME = "review"
    key: str


@dataclass(frozen=True)
class ActivityAdded(Event):
    """Someone did something in the session (``teams.Activity``): viewers add it to the activity log.

    ``entry``: the row as the log shows it (``store.record_activity``), when the writer has it; a tab
    then draws it without reading it back.
    """

    NAME = "activity"
    activity_id: int
    entry: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuthorizationChanged(Event):
    """An authorization started waiting for a person (an "Authorize at" card), or stopped waiting."""

    NAME = "authorization"


@dataclass(frozen=True)
class NoteAdded(Event):
    """A note was pinned to a frame, or a reply added to one (``teams.Note``)."""

    NAME = "note"
    note_id: int


@dataclass(frozen=True)
class Presence(Event):
    """A tab watching the session (its consumer's ``channel``), from that tab's consumer to the others.

    ``kind``: ``join`` (a tab opened), ``here`` (an answer to a join, sent to the joiner's channel
    alone), ``beat`` (still here) or ``leave``. A tab not heard from for a while is gone (its process
    died): each consumer keeps its own roster with expiry (sessions/web/together.py).
    """

    NAME = "presence"
    kind: str
    channel: str
    user_id: int
    name: str


@dataclass(frozen=True)
class TapChanged(Event):
    """A tap session's breakpoints, faults or held messages changed: ``state`` is the tap's own
    (``inspector/tap/_gate.py``, ``Traffic.snapshot``), empty once the tap has ended."""

    NAME = "tap"
    state: dict[str, Any] = field(default_factory=dict)


EVENTS: dict[str, type[Event]] = {
    e.NAME: e
    for e in (
        FramesStored,
        StateChanged,
        StorageChanged,
        CallProgress,
        CallDone,
        ReviewChanged,
        ActivityAdded,
        NoteAdded,
        Presence,
        AuthorizationChanged,
        TapChanged,
    )
}


def encode_event(event: Event) -> dict[str, Any]:
    # One channel-layer type for every event: consumers decode it and dispatch on the class.
    return {"type": "session.event", "event": event.NAME, **event.fields()}


def decode_event(message: dict[str, Any]) -> Event:
    event: Event = _decode(EVENTS, message.get("event"), message)
    return event
