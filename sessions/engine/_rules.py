"""The verdict rules: what is wrong with a received frame, and what the session should do about it.

``check_frame`` parses an incoming frame, attaches verdicts and notes to it, and keeps the books
of ``PeerState`` and ``RequestTable`` (a response takes its request off the table). It sends
nothing and starts nothing: it returns outcomes, which the session carries out once the frame is
recorded. Every rule code is listed in docs/engine.md.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import json.scanner
from dataclasses import dataclass
from typing import Any

from . import _listen, _outputs, _shapes, _xheaders
from ._errors import McpError, error_name
from ._frames import Frame, Progress, Verdict
from ._options import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION
from ._peer import PeerState
from ._protocol import (
    CAPABILITY_OF,
    EARLY_SERVER_METHODS,
    INPUT_REQUIRED_METHODS,
    META_LOG_LEVEL,
    META_SERVER_INFO,
    STATELESS_400_CODES,
)
from ._requests import Outgoing, RequestTable
from ._tasks import STATUS_NOTIFICATION

__all__ = [
    "Answered",
    "InvalidRequest",
    "Outcome",
    "ProgressReported",
    "ServerCancelled",
    "ServerRequest",
    "check_frame",
    "describe_outgoing",
    "refusal",
    "refused",
]


@dataclass(slots=True, frozen=True)
class Answered:
    """A response to one of the client's requests: settle it."""

    outgoing: Outgoing
    result: dict[str, Any] | None = None
    error: McpError | None = None


@dataclass(slots=True, frozen=True)
class ServerRequest:
    """A request from the server: answer it."""

    request_id: int | str
    method: str
    params: dict[str, Any]


@dataclass(slots=True, frozen=True)
class ServerCancelled:
    """The server withdrew a request it made, which the client is still answering."""

    request_id: int | str


@dataclass(slots=True, frozen=True)
class ProgressReported:
    """Progress on one of the client's requests: publish it and restart the request's idle clock."""

    outgoing: Outgoing
    progress: Progress


@dataclass(slots=True, frozen=True)
class InvalidRequest:
    """A request from the server the client cannot take: answer -32600 (Invalid Request)."""

    request_id: Any
    """The id the answer carries: the one received when JSON-RPC allows echoing it, else None."""
    message: str


Outcome = Answered | ServerRequest | ServerCancelled | ProgressReported | InvalidRequest


def check_frame(frame: Frame, peer: PeerState, requests: RequestTable) -> list[Outcome]:
    """Parse an incoming frame and attach its verdicts; return what the session should do."""
    try:
        # Decoded strictly: json.loads(bytes) would let UTF-8-encoded surrogates (ED A0 80) through.
        message = loads(frame.raw.decode("utf-8").removeprefix("\ufeff"))
    except RecursionError:
        frame.parse_error = "nested too deeply to parse"
        frame.rpc_kind = "invalid"
        frame.flag("too-deep", "error", "the message nests deeper than the parser allows; not parsed")
        return []
    except UnicodeDecodeError as exc:
        frame.parse_error = f"invalid UTF-8 at byte {exc.start}"
        frame.rpc_kind = "invalid"
        frame.flag("invalid-utf8", "error", "message is not valid UTF-8")
        return []
    except ValueError as exc:
        frame.parse_error = str(exc)
        frame.rpc_kind = "invalid"
        frame.flag("invalid-json", "error", f"not JSON: {exc}")
        return []
    frame.message = message
    if not isinstance(message, list):
        outcome = check(message, frame, "", peer, requests)
        return [outcome] if outcome is not None else []
    frame.rpc_kind = "batch"
    if peer.protocol_version != "2025-03-26":
        frame.flag(
            "batch",
            "warning",
            f"JSON-RPC batches belong to protocol 2025-03-26 only (this is {peer.protocol_version})",
        )
    if not message:
        frame.flag("empty-batch", "error", "an empty batch is an invalid request")
    outcomes = [check(item, frame, f"[{i}] ", peer, requests) for i, item in enumerate(message)]
    return [outcome for outcome in outcomes if outcome is not None]


# What json.loads(text) parses with (typeshed types make_scanner as a class taking a scanner).
_scan = json.scanner.make_scanner(json.decoder.JSONDecoder())  # type: ignore[arg-type]


def loads(text: str) -> Any:
    """``json.loads(text)``, the same value or the same error, a third quicker for a message with
    nothing around it (json.loads goes through three Python functions and two regex matches first)."""
    try:
        value, end = _scan(text, 0)
    except Exception:  # not JSON, or space before it: json.loads says what it says of it
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def check(message: Any, frame: Frame, at: str, peer: PeerState, requests: RequestTable) -> Outcome | None:
    """Attach verdicts for one message (``at`` locates it in a batch) to ``frame``."""
    if not isinstance(message, dict):
        frame.rpc_kind = frame.rpc_kind or "invalid"
        frame.flag("not-jsonrpc", "error", f"{at}not a JSON-RPC message object")
        return None
    if message.get("jsonrpc") != "2.0":
        frame.flag("jsonrpc-version", "error", f'{at}"jsonrpc" must be "2.0"')
    method = message.get("method")
    has_id = "id" in message
    if isinstance(method, str):
        if frame.rpc_kind != "batch":
            frame.method = method
        if has_id and not method.startswith("notifications/"):
            return check_request(message, method, frame, at, peer)
        if has_id:
            frame.flag("notification-with-id", "error", f"{at}notification {method} carries an id")
        return check_notification(message, method, frame, at, peer, requests)
    if method is not None:
        frame.flag("invalid-method", "error", f"{at}method must be a string")
        return None
    if has_id and ("result" in message or "error" in message):
        return check_response(message, frame, at, peer, requests)
    frame.rpc_kind = frame.rpc_kind or "invalid"
    frame.flag("not-jsonrpc", "error", f"{at}neither a request, a notification nor a response")
    return None


def check_response(
    message: dict[str, Any], frame: Frame, at: str, peer: PeerState, requests: RequestTable
) -> Answered | None:
    """Response rules; a response that matches a pending request takes it off the table."""
    request_id = message["id"]
    is_error = "error" in message
    if frame.rpc_kind != "batch":
        frame.rpc_kind = "error" if is_error else "result"
        frame.rpc_id = request_id
    if "result" in message and is_error:
        frame.flag("result-and-error", "error", f"{at}response carries both result and error")
    if is_error:
        error = message["error"]
        if not isinstance(error, dict) or not isinstance(error.get("code"), int):
            frame.flag("invalid-error", "error", f"{at}error must be an object with an integer code")
        else:
            if not isinstance(error.get("message"), str):
                frame.flag("invalid-error", "error", f"{at}error must have a string message")
            check_error_code(error, frame, at)
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        if request_id is None and is_error:
            frame.note = "error response without an id (the server could not read the request)"
            return None
        frame.flag("invalid-id", "error", f"{at}response id must be a string or an integer")
        return None
    outgoing = requests.pending.pop(request_id, None)
    if outgoing is None:
        if request_id in requests.abandoned:
            frame.note = f"late response to a request that was {requests.abandoned.pop(request_id)}"
            frame.flag("late-response", "info", f"{at}response arrived after the request was given up")
        elif isinstance(request_id, int) and 0 <= request_id < requests.next_id:
            # Ids are issued in order: one below the next id, neither pending nor given up, was answered.
            frame.flag("duplicate-response", "error", f"{at}a second response to request {request_id!r}")
        else:
            frame.flag("unknown-id", "error", f"{at}response to unknown request id {request_id!r}")
        return None
    if frame.rpc_kind != "batch":
        frame.pair_seq = outgoing.frame_seq
        frame.method = outgoing.method
        frame.latency_ms = round((frame.mono - outgoing.sent_mono) * 1000, 3)
    definition = peer.tasks.answered(
        request_id, outgoing.method, message, frame, at, peer.server_capabilities
    )
    if is_error:
        error = message["error"] if isinstance(message["error"], dict) else {}
        code = error.get("code")
        return Answered(
            outgoing,
            error=McpError(
                code if isinstance(code, int) else 0, str(error.get("message", "")), error.get("data")
            ),
        )
    result = message["result"]
    if peer.mode == "stateless" or outgoing.method == "server/discover":
        check_stateless_result(outgoing.method, result, frame, at, peer.client_capabilities)
    if outgoing.method == "tools/list":
        peer.tools_learned = True
        _outputs.learn(result, peer.output_schemas)
        if peer.mode == "stateless":
            learn_tool_headers(result, frame, at, peer)
    check_result_schema(outgoing.method, result, frame, peer, definition)
    _shapes.check_result(outgoing.method, result, frame, at, peer.protocol_version)
    if outgoing.tool is not None and isinstance(result, dict):
        _outputs.check(result, peer.output_schemas.get(outgoing.tool), frame, at)
    return Answered(outgoing, result=result if isinstance(result, dict) else {"result": result})


def check_result_schema(
    method: str, result: Any, frame: Frame, peer: PeerState, definition: str | None = None
) -> None:
    """Hold a result to the negotiated revision's schema (or, while negotiating, the offered one);
    ``definition`` names the published schema's type when it is not the method's own result
    (a ``CreateTaskResult`` answers a task-augmented request)."""
    if not peer.validate:
        return
    if definition is not None and peer.protocol_version:
        what = f"{method} result"
        frame.verdicts.extend(_schema().check_definition(definition, peer.protocol_version, result, what))
    elif peer.protocol_version:
        frame.verdicts.extend(_schema().check_result(method, peer.protocol_version, result))
    elif method == "server/discover":
        probed = peer.stamp_version or LATEST_MODERN_VERSION
        frame.verdicts.extend(_schema().check_result("server/discover", probed, result))
    elif method == "initialize":
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if version in HANDSHAKE_VERSIONS:
            frame.verdicts.extend(_schema().check_result("initialize", version, result))


def check_error_code(error: dict[str, Any], frame: Frame, at: str) -> None:
    """Name the error code on the frame; hold the stateless revision's error codes to its rules."""
    code = error["code"]
    name = error_name(code)
    if name and frame.note is None and frame.rpc_kind != "batch":
        frame.note = f"{name} ({code})"
    if code in STATELESS_400_CODES:
        status = frame.transport.get("http", {}).get("status")
        if isinstance(status, int) and status != 400:
            frame.flag(
                "error-status",
                "warning",
                f"{at}error {code} ({name}) must come with HTTP 400, not {status}",
            )
    if code == -32020:
        frame.flag(
            "header-mismatch",
            "warning",
            f"{at}the server says the HTTP headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name) "
            f"do not match the body: {error.get('message', '')}",
        )
    elif code == -32022:
        data = error.get("data")
        supported = data.get("supported") if isinstance(data, dict) else None
        if not isinstance(supported, list):
            frame.flag(
                "invalid-error",
                "error",
                f"{at}error -32022 must list the supported versions in data.supported",
            )
        elif frame.rpc_kind != "batch":
            frame.note = f"{name} ({code}); the server supports {', '.join(map(str, supported))}"


def check_stateless_result(
    method: str, result: Any, frame: Frame, at: str, client_capabilities: dict[str, Any]
) -> None:
    """Rules for results in the stateless revision: resultType, the serverInfo stamp, input_required."""
    if not isinstance(result, dict):
        return
    result_type = result.get("resultType")
    if result_type is None:
        frame.flag("result-type", "error", f"{at}a 2026-07-28 result must carry resultType")
    meta = result.get("_meta")
    if not isinstance(meta, dict) or META_SERVER_INFO not in meta:
        frame.flag(
            "server-info",
            "info",
            f"{at}the result has no _meta {META_SERVER_INFO!r} (servers SHOULD send it)",
        )
    if result_type != "input_required":
        return
    if method not in INPUT_REQUIRED_METHODS:
        frame.flag(
            "input-required",
            "error",
            f"{at}{method} may not answer input_required (only tools/call, prompts/get, resources/read)",
        )
        return
    requests = result.get("inputRequests")
    if requests is None and result.get("requestState") is None:
        frame.flag("input-required", "error", f"{at}input_required needs inputRequests or requestState")
    if isinstance(requests, dict):
        for key, item in requests.items():
            if isinstance(item, dict) and isinstance(item.get("method"), str):
                params = item.get("params")
                refused_with = refused(
                    item["method"], params if isinstance(params, dict) else {}, client_capabilities
                )
                if refused_with is not None:
                    code, error = refused_with
                    frame.flag(code, "error", f"{at}input request {key!r}: {error.message}")
        asked = ", ".join(
            f"{key}: {item.get('method') if isinstance(item, dict) else '?'}"
            for key, item in requests.items()
        )
        if frame.rpc_kind != "batch":
            frame.note = f"input required ({asked or 'state only'}); the client answers and retries"


def learn_tool_headers(result: Any, frame: Frame, at: str, peer: PeerState) -> None:
    """Note which arguments of each listed tool go into Mcp-Param-* headers; flag bad annotations."""
    tools = result.get("tools") if isinstance(result, dict) else None
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        name, schema = tool["name"], tool.get("inputSchema")
        problem = _xheaders.problem(schema)
        if problem is not None:
            frame.flag(
                "x-mcp-header",
                "error",
                f"{at}tool {name!r}: {problem}; a conforming client drops this tool "
                "(the inspector keeps it and sends no Mcp-Param headers for it)",
            )
            peer.tool_headers.pop(name, None)
            peer.dropped_tools[name] = problem
            continue
        peer.dropped_tools.pop(name, None)
        mapping = _xheaders.header_map(schema)
        if mapping:
            peer.tool_headers[name] = mapping
        else:
            peer.tool_headers.pop(name, None)


def check_request(
    message: dict[str, Any], method: str, frame: Frame, at: str, peer: PeerState
) -> ServerRequest | InvalidRequest | None:
    """Rules for a server→client request: its id, the capability it needs, when it came."""
    request_id = message["id"]
    if frame.rpc_kind != "batch":
        frame.rpc_kind = "request"
        frame.rpc_id = request_id
    if not isinstance(request_id, int | str) or isinstance(request_id, bool):
        problem = _shapes.invalid_id_problem(request_id)
        frame.flag("invalid-id", "error", f"{at}{problem}; answered -32600")
        # Unanswered, a server waits for ever: JSON-RPC answers an invalid request -32600.
        return InvalidRequest(_shapes.echoable_id(request_id), f"Invalid Request: {problem}")
    if request_id in peer.server_ids:
        frame.flag("id-reuse", "error", f"{at}the server reused request id {request_id!r}")
    peer.server_ids.add(request_id)
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        frame.flag("invalid-params", "error", f"{at}params must be an object")
        params = None
    refused_with = refused(method, params or {}, peer.client_capabilities)
    if refused_with is not None:
        code, error = refused_with
        frame.flag(code, "error", f"{at}{error.message}; answered {error.code}")
    if method == "sampling/createMessage" and params and "tools" in params:
        unbalanced = _shapes.tool_results_problem(params.get("messages"))
        if unbalanced is not None:
            frame.flag("sampling-tool-results", "error", f"{at}{unbalanced}")
    if not peer.initialized_sent and method not in EARLY_SERVER_METHODS:
        frame.flag("before-initialized", "error", f"{at}{method} sent before the client's initialized")
    if peer.validate and peer.protocol_version:
        frame.verdicts.extend(_schema().check_server_request(method, peer.protocol_version, params))
    peer.tasks.server_request(method, params or {}, frame, at, peer.client_capabilities)
    return ServerRequest(request_id, method, params or {})


def refusal(method: str, params: dict[str, Any], client_capabilities: dict[str, Any]) -> McpError | None:
    """The error a server→client request gets at once, before any handler or person sees it."""
    refused_with = refused(method, params, client_capabilities)
    return refused_with[1] if refused_with is not None else None


def refused(
    method: str, params: dict[str, Any], client_capabilities: dict[str, Any]
) -> tuple[str, McpError] | None:
    """The rule a server→client request breaks so that the client refuses it at once, and the error.

    A capability the client did not declare: -32601 (method not found). An elicitation in a mode it
    did not declare (``elicitation: {}`` declares form only), or tool-enabled sampling without
    ``sampling.tools``: -32602 (invalid params), as the spec says. A form whose ``requestedSchema``
    is not a flat object of primitives: -32602 too, since no form can ask for it.
    """
    capability = CAPABILITY_OF.get(method)
    if capability and capability not in client_capabilities:
        return "undeclared-capability", McpError(
            -32601, f"{method} needs the client capability {capability!r}, which this client did not declare"
        )
    if method == "sampling/createMessage":
        declared = client_capabilities.get("sampling")
        asked = [key for key in ("tools", "toolChoice") if key in params]
        if asked and not (isinstance(declared, dict) and "tools" in declared):
            return "undeclared-capability", McpError(
                -32602,
                f"tool-enabled sampling ({' and '.join(asked)}) needs the client capability "
                "sampling.tools, which this client did not declare",
            )
    if method == "elicitation/create":
        mode = params.get("mode", "form")
        declared = client_capabilities.get("elicitation")
        modes = list(declared) if isinstance(declared, dict) and declared else ["form"]
        if mode not in modes:
            return "undeclared-capability", McpError(
                -32602,
                f"elicitation mode {mode!r} was not declared (this client declared {', '.join(modes)})",
            )
        if mode == "form":
            problem = _shapes.elicitation_schema_problem(params.get("requestedSchema"))
            if problem is not None:
                return "elicitation-schema", McpError(-32602, problem)
    return None


# Notifications a server may send only with a capability: (capability, its flag, or None for any).
NOTIFICATION_CAPABILITY = {
    "notifications/message": ("logging", None),
    "notifications/tools/list_changed": ("tools", "listChanged"),
    "notifications/prompts/list_changed": ("prompts", "listChanged"),
    "notifications/resources/list_changed": ("resources", "listChanged"),
    "notifications/resources/updated": ("resources", "subscribe"),
}


def check_capability(method: str, frame: Frame, at: str, peer: PeerState) -> None:
    """A notification the server's declared capabilities do not allow (once they are known).

    Stateless list changes and updates ride subscriptions/listen and have their own rules there.
    """
    needed = NOTIFICATION_CAPABILITY.get(method)
    if needed is None or peer.protocol_version is None:
        return
    if peer.mode == "stateless" and method != "notifications/message":
        return
    capability, flag = needed
    declared = peer.server_capabilities.get(capability)
    if not isinstance(declared, dict):
        frame.verdicts.append(_undeclared(at, method, capability, None))
    elif flag is not None and declared.get(flag) is not True:
        frame.verdicts.append(_undeclared(at, method, capability, flag))


@functools.lru_cache(maxsize=256)
def _undeclared(at: str, method: str, capability: str, flag: str | None) -> Verdict:
    """The verdict on a notification the server's capabilities do not allow: made once, not for each
    of a flood's frames (verdicts are frozen)."""
    what = f"the {capability!r} capability" if flag is None else f"{capability}.{flag}"
    return Verdict(
        "undeclared-notification", "warning", f"{at}{method} although the server did not declare {what}"
    )


def check_notification(
    message: dict[str, Any], method: str, frame: Frame, at: str, peer: PeerState, requests: RequestTable
) -> ServerCancelled | ProgressReported | None:
    """Rules for a notification: when it came, logs nobody asked for, listen streams, progress."""
    if frame.rpc_kind != "batch":
        frame.rpc_kind = "notification"
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        frame.flag("invalid-params", "error", f"{at}params must be an object")
        params = None
    params = params or {}
    if peer.state == "initializing" and method not in EARLY_SERVER_METHODS:
        frame.flag("before-initialized", "error", f"{at}{method} sent before initialization finished")
    if peer.validate and peer.protocol_version:
        frame.verdicts.extend(
            _schema().check_server_notification(method, peer.protocol_version, params or None)
        )
    check_capability(method, frame, at, peer)
    if method == "notifications/message" and peer.mode == "stateless" and peer.log_level is None:
        frame.flag(
            "unrequested-log",
            "warning",
            f"{at}a log message although no request asked for one ({META_LOG_LEVEL} was not sent)",
        )
    if peer.mode == "stateless" and (method in _listen.LISTEN_METHODS or method == _listen.ACKNOWLEDGED):
        peer.listens.check(method, params, frame, at)
    if method == STATUS_NOTIFICATION:
        peer.tasks.notified(params, frame, at)
    if method == "notifications/progress":
        task_id = peer.tasks.progress_of(params.get("progressToken"))
        if task_id is not None and params.get("progressToken") not in requests.progress:
            frame.note = f"progress of task {task_id} (its request's token lives as long as the task)"
            return None
        return check_progress(params, frame, at, requests)
    if method == "notifications/resources/updated" and peer.mode != "stateless":
        unsubscribed = _shapes.unsubscribed_update(params, peer.subscribed)
        if unsubscribed is not None:
            frame.flag("unsubscribed-update", "warning", f"{at}{unsubscribed}")
    if method == "notifications/cancelled":
        request_id = params.get("requestId")
        if not isinstance(request_id, int | str) or request_id not in peer.answering:
            frame.note = "cancels a request that is not in flight"
            return None
        return ServerCancelled(request_id)
    return None


def check_progress(
    params: dict[str, Any], frame: Frame, at: str, requests: RequestTable
) -> ProgressReported | None:
    """Progress rules: a live token, a number, and a value that keeps increasing."""
    token = params.get("progressToken")
    progress = params.get("progress")
    outgoing = requests.progress.get(token) if isinstance(token, int | str) else None
    if outgoing is None and isinstance(token, int | str) and token in requests.abandoned:
        # Our cancellation crossed the server's progress: a race the protocol allows, like a late response.
        frame.note = f"late progress on a request that was {requests.abandoned[token]}"
        frame.flag("late-progress", "info", f"{at}progress arrived after the request was given up")
        return None
    if outgoing is None:
        frame.flag("unknown-progress-token", "error", f"{at}progress for unknown or finished token {token!r}")
        return None
    if not isinstance(progress, int | float):
        frame.flag("invalid-progress", "error", f"{at}progress must be a number")
        return None
    if outgoing.last_progress is not None and progress <= outgoing.last_progress:
        frame.flag(
            "progress-not-increasing",
            "error",
            f"{at}progress {progress} does not increase (last was {outgoing.last_progress})",
        )
    outgoing.last_progress = progress
    total = params.get("total")
    message = params.get("message")
    event = Progress(
        outgoing.id,
        float(progress),
        float(total) if isinstance(total, int | float) else None,
        message if isinstance(message, str) else None,
        0,
    )
    return ProgressReported(outgoing, event)


def describe_outgoing(frame: Frame) -> None:
    """Fill an outgoing message frame's kind, method and id (its pairing is the owner's business)."""
    message = frame.message
    if not isinstance(message, dict):
        frame.rpc_kind = "batch" if isinstance(message, list) else "invalid"
        return
    frame.method = message.get("method")
    frame.rpc_id = message.get("id")
    if frame.method is None:
        frame.rpc_kind = "error" if "error" in message else "result"
    elif frame.rpc_id is None:
        frame.rpc_kind = "notification"
    else:
        frame.rpc_kind = "request"


@functools.cache
def _schema() -> Any:
    """The schema checks, imported on first use: mcp-types takes about 0.35 s to import. Kept once
    imported: an import statement costs a lookup through the import system on every frame."""
    from . import _schema as schema

    return schema


def warm_up() -> None:
    """Import the schema checks and run one, ahead of need (a long-lived app calls it in a thread).

    Otherwise the first validated message of a process pays for it, inside the first handshake:
    0.7 s between the initialize result and ``notifications/initialized``.
    """
    version = LATEST_HANDSHAKE_VERSION
    result = {"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "-", "version": "0"}}
    _schema().check_result("initialize", version, result)
