"""The client's rules: what a client (a host seen through a tap) does wrong on the wire.

A passive observer that sees both directions keeps one ``ClientConduct`` per conversation, hands
every frame the client sent to ``check_client_frame`` (which parses it, attaches verdicts and keeps
the books) and every frame the server sent to ``observe_server_frame`` (which only learns from it:
the negotiated revision, the session id, the server's requests). Nothing is sent, nothing awaited.

Every code starts with ``client-`` (``side_of`` tells a verdict's side from its code), so verdicts
stored before this existed, and the server's, read as the server's. Every code is in docs/engine.md.
"""

from __future__ import annotations

import json
from typing import Any

from ._client_answers import check_response
from ._client_conduct import (
    CLIENT_PREFIX,
    ClientConduct,
    ClientRequest,
    Id,
    id_problem,
    observe_server_frame,
    side_of,
    valid_id,
)
from ._client_wire import STATELESS_VERSION, check_http, check_meta, http_request, schema_verdicts, since
from ._frames import Frame
from ._protocol import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION

__all__ = [
    "CLIENT_PREFIX",
    "ClientConduct",
    "check_client_frame",
    "observe_server_frame",
    "side_of",
]

# The server capability each client request needs (a request to a server that did not declare it).
SERVER_CAPABILITY_OF: dict[str, tuple[str, str | None]] = {
    "tools/list": ("tools", None),
    "tools/call": ("tools", None),
    "prompts/list": ("prompts", None),
    "prompts/get": ("prompts", None),
    "resources/list": ("resources", None),
    "resources/read": ("resources", None),
    "resources/templates/list": ("resources", None),
    "resources/subscribe": ("resources", "subscribe"),
    "resources/unsubscribe": ("resources", "subscribe"),
    "logging/setLevel": ("logging", None),
    "completion/complete": ("completions", None),
}


# --- parsing --------------------------------------------------------------------------------------


def _parse(frame: Frame) -> tuple[bool, Any]:
    """The frame's message (as given when already parsed, else from ``raw``); flag garbage."""
    if frame.message is not None:
        return True, frame.message
    try:
        message = json.loads(frame.raw.decode("utf-8").removeprefix("\ufeff"))
    except RecursionError:
        frame.parse_error, reason = "nested too deeply to parse", "nested deeper than the parser allows"
    except UnicodeDecodeError as exc:
        frame.parse_error = reason = f"invalid UTF-8 at byte {exc.start}"
    except ValueError as exc:
        frame.parse_error = reason = str(exc)
    else:
        frame.message = message
        return True, message
    frame.rpc_kind = "invalid"
    frame.flag("client-invalid-json", "error", f"the client sent something that is not JSON: {reason}")
    return False, None


# --- the client's frames --------------------------------------------------------------------------


def check_client_frame(frame: Frame, conduct: ClientConduct) -> None:
    """Parse a frame the client sent, attach its verdicts, and update ``conduct``.

    A frame of kind ``http`` (a GET for the server's stream, a DELETE ending the session) is judged
    by its headers only.
    """
    if frame.kind not in ("http", "message"):
        return
    request = http_request(frame) if conduct.transport == "http" else None
    earlier = request is not None and request[1].get("mcp-session-id") in conduct.earlier_sessions
    if earlier:
        # Judged against the current session's books it would draw false verdicts: it is another's.
        frame.note = frame.note or "a request of an earlier HTTP session: not judged with the current one"
    if frame.kind == "http":
        if request is not None and not earlier:
            _check_headers(frame, conduct, None)
        return
    parsed, message = _parse(frame)
    if not parsed or earlier:
        return
    if conduct.transport == "http":
        _check_headers(frame, conduct, message)
    if isinstance(message, list):
        _check_batch(message, frame, conduct)
        return
    _check_one(message, frame, "", conduct)


def _check_headers(frame: Frame, conduct: ClientConduct, message: Any) -> None:
    initializing = isinstance(message, dict) and message.get("method") == "initialize"
    if initializing and conduct.phase != "new":
        request = http_request(frame)
        if request is not None and "mcp-session-id" not in request[1]:
            conduct.new_session()  # an initialize without a session id starts a new session
    version = conduct.protocol_version if conduct.phase in ("ready", "operating") else None
    if conduct.stateless:
        version = STATELESS_VERSION
    if conduct.session_ended and not initializing:
        frame.flag(
            "client-session-id-header",
            "error",
            "the server ended the session (404): the client must start a new one with initialize",
        )
    check_http(
        frame, version=version, initializing=initializing, session_id=conduct.session_id, message=message
    )


def _check_batch(items: list[Any], frame: Frame, conduct: ClientConduct) -> None:
    frame.rpc_kind = "batch"
    version = conduct.version
    if not items:
        frame.flag("client-batch", "error", "an empty batch is an invalid request")
    elif since(version, "2025-06-18"):
        frame.flag(
            "client-batch", "error", f"JSON-RPC batches were removed in 2025-06-18 (this is {version})"
        )
    elif version != "2025-03-26" and version is not None:
        frame.flag("client-batch", "warning", f"protocol {version} does not define JSON-RPC batches")
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("method") == "initialize":
            frame.flag("client-batch", "error", f"[{i}] initialize must not be part of a batch")
        _check_one(item, frame, f"[{i}] ", conduct)


def _check_one(message: Any, frame: Frame, at: str, conduct: ClientConduct) -> None:
    in_batch = frame.rpc_kind == "batch"
    if not isinstance(message, dict):
        frame.rpc_kind = frame.rpc_kind or "invalid"
        frame.flag("client-not-jsonrpc", "error", f"{at}not a JSON-RPC message object")
        return
    if message.get("jsonrpc") != "2.0":
        frame.flag("client-jsonrpc-version", "error", f'{at}"jsonrpc" must be "2.0"')
    method = message.get("method")
    if isinstance(method, str):
        if not in_batch:
            frame.method = method
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            frame.flag("client-invalid-params", "error", f"{at}params must be an object")
            params = None
        if "id" in message and not method.startswith("notifications/"):
            _request(message["id"], method, params or {}, params is None, frame, at, conduct)
        else:
            if "id" in message:
                frame.flag("client-notification-with-id", "error", f"{at}notification {method} carries an id")
            _notification(method, params or {}, params is None, frame, at, conduct)
        return
    if method is not None:
        frame.flag("client-invalid-method", "error", f"{at}method must be a string")
        return
    if "id" in message and ("result" in message or "error" in message):
        check_response(message, frame, at, conduct)
        return
    frame.rpc_kind = frame.rpc_kind or "invalid"
    frame.flag("client-not-jsonrpc", "error", f"{at}neither a request, a notification nor a response")


# --- requests -------------------------------------------------------------------------------------


def _request(
    request_id: Any,
    method: str,
    params: dict[str, Any],
    no_params: bool,
    frame: Frame,
    at: str,
    conduct: ClientConduct,
) -> None:
    if frame.rpc_kind != "batch":
        frame.rpc_kind = "request"
        frame.rpc_id = request_id if valid_id(request_id) else None
    valid = valid_id(request_id)
    if not valid:
        frame.flag(
            "client-invalid-id",
            "error",
            f"{at}a request id must be a string or an integer, not {id_problem(request_id)}",
        )
    if method == "initialize":
        _initialize(request_id if valid else None, params, frame, at, conduct)
    else:
        _lifecycle_of_request(method, params, frame, at, conduct)
    if valid:
        if conduct.stateless:
            if request_id in conduct.pending:
                frame.flag(
                    "client-id-reuse", "error", f"{at}id {request_id!r} repeats a request still pending"
                )
            elif request_id in conduct.input_required and "inputResponses" in params:
                frame.flag(
                    "client-id-reuse",
                    "error",
                    f"{at}a retry after input_required must take a new id, not {request_id!r}",
                )
        elif request_id in conduct.ids_seen:
            frame.flag("client-id-reuse", "error", f"{at}id {request_id!r} was already used in this session")
        conduct.ids_seen.add(request_id)
    meta = check_meta(params, frame, at, conduct.version)
    token = _progress_token(meta, frame, at, conduct)
    if valid:
        conduct.pending[request_id] = ClientRequest(method, params, token)
        if token is not None:
            conduct.progress_tokens[token] = request_id
    _capability_used(method, frame, at, conduct)
    _task_augmentation(method, params, frame, at, conduct)
    if conduct.validate and conduct.version:
        frame.verdicts.extend(
            schema_verdicts("request", method, conduct.version, None if no_params else params)
        )


def _initialize(
    request_id: Id | None, params: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct
) -> None:
    if conduct.phase != "new":
        frame.flag("client-initialize-twice", "error", f"{at}initialize sent again within the same session")
        return
    conduct.phase = "initializing"
    conduct.initialize_id = request_id
    conduct.initialize_seq = frame.seq or None
    version = params.get("protocolVersion")
    conduct.requested_version = version if isinstance(version, str) else None
    capabilities = params.get("capabilities")
    conduct.capabilities = capabilities if isinstance(capabilities, dict) else {}


def _lifecycle_of_request(
    method: str, params: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct
) -> None:
    """A request other than initialize: the handshake must be over (ping may come any time after it)."""
    if conduct.phase == "new" and not conduct.stateless:
        meta = params.get("_meta")
        version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if method == "server/discover" or isinstance(version, str):
            conduct.stateless = True
            conduct.protocol_version = version if isinstance(version, str) else None
        else:
            frame.flag("client-before-initialize", "error", f"{at}{method} sent before initialize")
            return
    if conduct.stateless:
        _stateless_meta(method, params, frame, at, conduct)
        return
    if method == "ping" or conduct.phase == "operating":
        return
    why = {
        "initializing": "before the server answered initialize",
        "ready": "before notifications/initialized",
        "failed": "after initialize failed",
    }[conduct.phase]
    frame.flag("client-before-initialized", "error", f"{at}{method} sent {why}")


def _stateless_meta(
    method: str, params: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct
) -> None:
    """The stateless revision: every request carries the protocol version and client capabilities."""
    meta = params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    missing = [key for key in (META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES) if key not in meta]
    if missing and method != "server/discover":
        frame.flag("client-stateless-meta", "error", f"{at}{method} lacks _meta {', '.join(missing)}")
    state = params.get("requestState")
    if state is not None and state not in conduct.request_states:
        frame.flag(
            "client-request-state",
            "error",
            f"{at}requestState must echo one the server sent, unchanged (this one it never sent)",
        )
    version = meta.get(META_PROTOCOL_VERSION)
    if isinstance(version, str):
        conduct.protocol_version = version
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if isinstance(capabilities, dict):
        conduct.capabilities = capabilities


def _progress_token(meta: Any, frame: Frame, at: str, conduct: ClientConduct) -> Id | None:
    if not isinstance(meta, dict) or "progressToken" not in meta:
        return None
    token = meta["progressToken"]
    if not valid_id(token):
        frame.flag("client-progress-token", "error", f"{at}a progress token must be a string or an integer")
        return None
    if token in conduct.progress_tokens:
        frame.flag(
            "client-progress-token",
            "error",
            f"{at}progress token {token!r} is already in use by request {conduct.progress_tokens[token]!r}",
        )
        return None
    return token


def _capability_used(method: str, frame: Frame, at: str, conduct: ClientConduct) -> None:
    """A request for a feature the server did not declare (once its capabilities are known)."""
    needed = SERVER_CAPABILITY_OF.get(method)
    if needed is None or conduct.phase not in ("ready", "operating") or conduct.stateless:
        return
    capability, flag = needed
    if capability == "completions" and not since(conduct.version, "2025-03-26"):
        return  # completion needed no capability before 2025-03-26
    declared = conduct.server_capabilities.get(capability)
    if isinstance(declared, dict) and (flag is None or declared.get(flag) is True):
        return
    what = capability if flag is None else f"{capability}.{flag}"
    frame.flag(
        "client-unnegotiated-capability",
        conduct.must("2025-06-18"),
        f"{at}{method} although the server did not declare {what}",
    )


def _task_augmentation(
    method: str, params: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct
) -> None:
    """2025-11-25 tasks: a tool called as a task only where the server and the tool allow it, and
    always where the tool requires it."""
    if method != "tools/call" or not since(conduct.version, "2025-11-25") or conduct.stateless:
        return
    augmented = isinstance(params.get("task"), dict)
    tasks = conduct.server_capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    server_allows = isinstance(tools, dict) and isinstance(tools.get("call"), dict)
    name = params.get("name")
    support = conduct.task_support.get(name) if isinstance(name, str) else None
    if augmented and not server_allows:
        frame.flag(
            "client-task-augmentation",
            "error",
            f"{at}tools/call as a task although the server did not declare tasks.requests.tools.call",
        )
    elif augmented and conduct.tools_listed and support in (None, "forbidden"):
        frame.flag(
            "client-task-augmentation",
            "error",
            f"{at}tool {name!r} does not support tasks (taskSupport: {support})",
        )
    elif not augmented and server_allows and support == "required":
        frame.flag(
            "client-task-augmentation", "error", f"{at}tool {name!r} requires a task (taskSupport: required)"
        )


# --- notifications --------------------------------------------------------------------------------


def _notification(
    method: str, params: dict[str, Any], no_params: bool, frame: Frame, at: str, conduct: ClientConduct
) -> None:
    if frame.rpc_kind != "batch":
        frame.rpc_kind = "notification"
    if conduct.phase == "new" and not conduct.stateless:
        frame.flag("client-before-initialize", "error", f"{at}{method} sent before initialize")
    elif method == "notifications/initialized":
        _initialized(frame, at, conduct)
    elif method == "notifications/cancelled":
        _cancelled(params, frame, at, conduct)
    elif method == "notifications/progress":
        _progress(params, frame, at, conduct)
    elif method == "notifications/roots/list_changed":
        roots = conduct.capabilities.get("roots")
        if not (isinstance(roots, dict) and roots.get("listChanged") is True):
            frame.flag(
                "client-roots-list-changed",
                "error",
                f"{at}{method} although the client did not declare roots.listChanged",
            )
    check_meta(params, frame, at, conduct.version)
    if conduct.validate and conduct.version:
        frame.verdicts.extend(
            schema_verdicts("notification", method, conduct.version, None if no_params else params)
        )


def _initialized(frame: Frame, at: str, conduct: ClientConduct) -> None:
    if conduct.initialized_sent:
        frame.flag("client-initialized-twice", "warning", f"{at}notifications/initialized sent again")
    elif conduct.phase == "initializing":
        frame.flag(
            "client-initialized-early",
            "error",
            f"{at}notifications/initialized sent before the server answered initialize",
        )
    elif conduct.phase == "failed":
        frame.flag(
            "client-initialized-early", "error", f"{at}notifications/initialized after initialize failed"
        )
    conduct.initialized_sent = True
    if conduct.phase in ("ready", "initializing"):
        conduct.phase = "operating"


def _cancelled(params: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct) -> None:
    """A cancellation names a request of the client's that is still in flight, never initialize."""
    request_id = params.get("requestId")
    if valid_id(request_id) and request_id == conduct.initialize_id:
        frame.flag("client-cancel-initialize", "error", f"{at}the client must not cancel its initialize")
        return
    pending = conduct.pending.get(request_id) if valid_id(request_id) else None
    if pending is not None:
        if isinstance(pending.params.get("task"), dict) and since(conduct.version, "2025-11-25"):
            frame.flag(
                "client-cancel-task",
                "error",
                f"{at}request {request_id!r} is a task: tasks/cancel cancels it, not notifications/cancelled",
            )
        return
    if valid_id(request_id) and request_id in conduct.ids_seen:
        if frame.rpc_kind != "batch":
            frame.note = f"cancels request {request_id!r}, already answered (a race the protocol allows)"
        return
    server_side = request_id in conduct.server_pending or request_id in conduct.server_answered
    whose = " (a request of the server's: a cancellation goes the request's way)" if server_side else ""
    frame.flag(
        "client-cancel-unknown",
        "error",
        f"{at}cancels request {request_id!r}, which the client never sent{whose}",
    )


def _progress(params: dict[str, Any], frame: Frame, at: str, conduct: ClientConduct) -> None:
    """Progress the client reports on a server's request: a live token and an increasing value."""
    token = params.get("progressToken")
    if not valid_id(token) or token not in conduct.server_progress:
        frame.flag(
            "client-progress-token",
            "error",
            f"{at}progress for token {token!r}, which no pending server request carries",
        )
        return
    progress = params.get("progress")
    last = conduct.server_progress[token]
    if isinstance(progress, int | float) and not isinstance(progress, bool):
        if last is not None and progress <= last:
            frame.flag(
                "client-progress-not-increasing",
                "error",
                f"{at}progress {progress} does not increase (last was {last})",
            )
        conduct.server_progress[token] = progress
