"""What judging a client over one conversation remembers (``ClientConduct``), and what it learns from
the server's frames (``observe_server_frame``): the negotiated revision, the session id, the server's
requests and answers. The client's own frames are judged in ``_client_rules``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeGuard

from ._client_wire import since
from ._frames import Frame, Severity

__all__ = [
    "CLIENT_PREFIX",
    "ClientConduct",
    "ClientRequest",
    "Id",
    "ServerRequest",
    "id_problem",
    "observe_server_frame",
    "side_of",
    "valid_id",
]

CLIENT_PREFIX = "client-"

Id = int | str
Phase = Literal["new", "initializing", "ready", "operating", "failed"]
ClientTransport = Literal["stdio", "http", "sse"]


def side_of(code: str) -> Literal["client", "server"]:
    """Which side broke the rule a verdict code names."""
    return "client" if code.startswith(CLIENT_PREFIX) else "server"


@dataclass(slots=True)
class ClientRequest:
    """A request of the client the server has not answered yet."""

    method: str
    params: dict[str, Any]
    progress_token: Id | None = None


@dataclass(slots=True)
class ServerRequest:
    """A request of the server the client has not answered yet."""

    method: str
    params: dict[str, Any]
    frame_seq: int


@dataclass(slots=True)
class ClientConduct:
    """What judging one client over one conversation needs to remember.

    ``transport``: ``stdio``, ``http`` (Streamable HTTP: the header rules apply to frames whose
    ``transport["http"]["headers"]`` were recorded) or ``sse`` (the legacy HTTP+SSE transport).
    """

    transport: ClientTransport = "stdio"
    validate: bool = True
    """Hold messages to the negotiated revision's schema (imports mcp-types on first use)."""
    phase: Phase = "new"
    stateless: bool = False
    requested_version: str | None = None
    """The version the client's initialize asked for."""
    protocol_version: str | None = None
    """The negotiated version (from the initialize result; the ``_meta`` one when stateless)."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """The capabilities the client declared in its initialize."""
    server_capabilities: dict[str, Any] = field(default_factory=dict)
    initialize_id: Id | None = None
    initialize_seq: int | None = None
    """The frame number of the client's initialize: only the answer to it gives the session id."""
    initialized_sent: bool = False
    session_id: str | None = None
    """The Mcp-Session-Id the server gave (HTTP)."""
    ids_seen: set[Id] = field(default_factory=set)
    pending: dict[Id, ClientRequest] = field(default_factory=dict)
    server_pending: dict[Id, ServerRequest] = field(default_factory=dict)
    server_answered: set[Id] = field(default_factory=set)
    server_withdrawn: set[Id] = field(default_factory=set)
    progress_tokens: dict[Id, Id] = field(default_factory=dict)
    """Progress tokens of the client's requests in flight → the request's id."""
    server_progress: dict[Id, float | None] = field(default_factory=dict)
    """Progress tokens of the server's requests in flight → the last progress the client reported."""
    session_ended: bool = False
    """The server answered 404 to a request with the session id: only a new initialize may follow."""
    request_states: set[str] = field(default_factory=set)
    """Stateless: every ``requestState`` the server issued (a retry must echo one, unchanged)."""
    input_required: set[Id] = field(default_factory=set)
    """Stateless: ids of requests answered ``input_required`` (their retry must take a new id)."""
    task_support: dict[str, str] = field(default_factory=dict)
    """Each listed tool's ``execution.taskSupport`` (2025-11-25)."""
    tools_listed: bool = False
    earlier_sessions: set[str] = field(default_factory=set)
    """HTTP: the session ids the server gave before the current session's (other hosts, or this one
    before it started again, may still use them through the same tap)."""

    @property
    def version(self) -> str | None:
        """The revision the rules go by: the negotiated one, or the one asked for until it is known."""
        return self.protocol_version or self.requested_version

    def must(self, revision: str) -> Severity:
        """Error where the rule is a MUST (``revision`` on), warning where it was a SHOULD before."""
        return "error" if since(self.version, revision) else "warning"

    def new_session(self) -> None:
        """Forget the previous session (an HTTP client starts a new one with a fresh initialize)."""
        earlier = self.earlier_sessions | ({self.session_id} if self.session_id else set())
        fresh = ClientConduct(self.transport, self.validate)
        for each in fields(self):
            setattr(self, each.name, getattr(fresh, each.name))
        self.earlier_sessions = earlier


# --- ids and what the server sent ----------------------------------------------------------------


def _quiet_parse(frame: Frame) -> Any:
    """A server frame's message, as the observer parsed it or parsed here; ``None`` when it is not JSON."""
    if frame.message is not None or frame.parse_error is not None:
        return frame.message
    try:
        return json.loads(frame.raw.decode("utf-8").removeprefix("\ufeff"))
    except (ValueError, RecursionError):
        return None


def valid_id(value: Any) -> TypeGuard[Id]:
    """Whether a JSON value is a valid request id (or progress token): a string or an integer."""
    return isinstance(value, int | str) and not isinstance(value, bool)


def id_problem(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return "a number with a fraction part" if not value.is_integer() else "a number written as a float"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


# --- what the server sent -------------------------------------------------------------------------


def observe_server_frame(frame: Frame, conduct: ClientConduct) -> None:
    """Learn from a frame the server sent: the initialize result, its requests, its answers, the
    session id; attach nothing (the server's own rules judge it)."""
    details = frame.transport.get("http") if isinstance(frame.transport, dict) else None
    if isinstance(details, dict):
        _observe_http(details, conduct)
    if frame.kind != "message":
        return
    message = _quiet_parse(frame)
    for item in message if isinstance(message, list) else [message]:
        if isinstance(item, dict):
            _observe_one(item, frame, conduct)


def _observe_http(details: dict[str, Any], conduct: ClientConduct) -> None:
    if details.get("status") == 404 and conduct.session_id is not None:
        conduct.session_ended = True
    headers = details.get("headers")
    if not isinstance(headers, dict) or conduct.session_id is not None or conduct.stateless:
        return
    answers = details.get("request_seq")
    if conduct.initialize_seq is not None and answers is not None and answers != conduct.initialize_seq:
        return  # a late head of an earlier session's request (its GET stream) names that session
    if conduct.phase in ("initializing", "ready"):
        for name, value in headers.items():
            if str(name).lower() == "mcp-session-id" and isinstance(value, str):
                conduct.session_id = value


def _observe_one(message: dict[str, Any], frame: Frame, conduct: ClientConduct) -> None:
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    if isinstance(method, str):
        if "id" in message and valid_id(request_id) and not method.startswith("notifications/"):
            conduct.server_pending[request_id] = ServerRequest(method, params, frame.seq)
            conduct.server_withdrawn.discard(request_id)
            meta = params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if valid_id(token):
                conduct.server_progress[token] = None
        elif method == "notifications/cancelled":
            withdrawn = params.get("requestId")
            if valid_id(withdrawn) and conduct.server_pending.pop(withdrawn, None) is not None:
                conduct.server_withdrawn.add(withdrawn)
        return
    if not valid_id(request_id) or ("result" not in message and "error" not in message):
        return
    request = conduct.pending.pop(request_id, None)
    if request is None:
        return
    if request.progress_token is not None:
        conduct.progress_tokens.pop(request.progress_token, None)
    result = message.get("result")
    if (
        request.method == "initialize"
        and request_id == conduct.initialize_id
        and conduct.phase == "initializing"
    ):
        if "error" in message or not isinstance(result, dict):
            conduct.phase = "failed"
            return
        conduct.phase = "ready"
        version = result.get("protocolVersion")
        conduct.protocol_version = version if isinstance(version, str) else conduct.requested_version
        capabilities = result.get("capabilities")
        conduct.server_capabilities = capabilities if isinstance(capabilities, dict) else {}
    elif request.method == "tools/list" and isinstance(result, dict):
        _learn_tools(result, conduct)
    if conduct.stateless and isinstance(result, dict) and result.get("resultType") == "input_required":
        conduct.input_required.add(request_id)
        state = result.get("requestState")
        if isinstance(state, str):
            conduct.request_states.add(state)


def _learn_tools(result: dict[str, Any], conduct: ClientConduct) -> None:
    tools = result.get("tools")
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, dict) and isinstance(tool.get("name"), str):
            execution = tool.get("execution")
            support = execution.get("taskSupport") if isinstance(execution, dict) else None
            conduct.task_support[tool["name"]] = support if isinstance(support, str) else "forbidden"
    conduct.tools_listed = True
