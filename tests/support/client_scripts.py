"""Conversations for the client rules' tests: scripts of raw JSON-RPC lines in both directions, fed
to ``check_client_frame`` and ``observe_server_frame`` as a tap's observer would, and the well-behaved
conversation of each revision."""

from __future__ import annotations

import json
from typing import Any

from sessions.engine import ClientConduct, Frame, check_client_frame, observe_server_frame

REVISIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
LATEST = "2025-11-25"
GOOD_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SESSION = "sess-1"

Line = tuple[str, Any] | tuple[str, Any, dict[str, str]]


def run(
    script: list[Line], *, transport: str = "stdio", validate: bool = True
) -> tuple[list[Frame], ClientConduct]:
    """Feed a conversation to the rules: ``">"`` lines are the client's, ``"<"`` lines the server's;
    a third item gives the HTTP request headers of a client line (or the response headers of a
    server line; ``":url"`` and ``":status"`` among them set the URL and the status); ``">GET"`` /
    ``">DELETE"`` are the client's bodiless HTTP requests."""
    conduct = ClientConduct(transport=transport, validate=validate)  # type: ignore[arg-type]
    frames = []
    for seq, (direction, body, *rest) in enumerate(script, 1):
        headers = dict(rest[0]) if rest else None
        url = headers.pop(":url", "http://127.0.0.1/mcp") if headers else "http://127.0.0.1/mcp"
        status = int(headers.pop(":status", 200)) if headers else 200
        raw = (
            body
            if isinstance(body, bytes)
            else (body if isinstance(body, str) else json.dumps(body)).encode()
        )
        if direction.startswith(">") and direction != ">":
            http = {"method": direction[1:], "url": url, "headers": headers or {}}
            frame = Frame("http", "out", transport={"http": http}, seq=seq)
            check_client_frame(frame, conduct)
        elif direction == ">":
            details = (
                {"http": {"method": "POST", "url": url, "headers": headers}} if headers is not None else {}
            )
            frame = Frame("message", "out", raw, transport=details, seq=seq)
            check_client_frame(frame, conduct)
        else:
            details = {"http": {"status": status, "headers": headers}} if headers is not None else {}
            frame = Frame("message", "in", raw, transport=details, seq=seq)
            observe_server_frame(frame, conduct)
        frames.append(frame)
    return frames, conduct


def client_verdicts(frames: list[Frame]) -> list[str]:
    return [f"{f.seq}: {v.code} ({v.severity}) {v.message}" for f in frames for v in f.verdicts]


def req(id_: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


def note(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def ok(id_: Any, result: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": {} if result is None else result}


def err(id_: Any, code: int = -32601, message: str = "no") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


SERVER_CAPS = {
    "tools": {"listChanged": True},
    "prompts": {},
    "resources": {"subscribe": True},
    "logging": {},
    "completions": {},
}


def handshake(
    version: str = LATEST,
    client_caps: dict[str, Any] | None = None,
    server_caps: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> list[Line]:
    """initialize, its result, initialized: over HTTP with the headers a good client sends."""
    params = {
        "protocolVersion": version,
        "capabilities": client_caps if client_caps is not None else {},
        "clientInfo": {"name": "planted", "version": "1.0"},
    }
    result = {
        "protocolVersion": version,
        "capabilities": server_caps if server_caps is not None else SERVER_CAPS,
        "serverInfo": {"name": "s", "version": "1"},
    }
    if headers is None:
        return [
            (">", req(0, "initialize", params)),
            ("<", ok(0, result)),
            (">", note("notifications/initialized")),
        ]
    after = {**headers, "MCP-Protocol-Version": version, "Mcp-Session-Id": SESSION}
    return [
        (">", req(0, "initialize", params), headers),
        ("<", ok(0, result), {"Mcp-Session-Id": SESSION, "Content-Type": "application/json"}),
        (">", note("notifications/initialized"), after),
    ]


def http_after(version: str = LATEST) -> dict[str, str]:
    """The headers a good client sends after initialization."""
    return {**GOOD_HEADERS, "MCP-Protocol-Version": version, "Mcp-Session-Id": SESSION}


def clean_conversation(version: str, *, http: bool = False) -> list[Line]:
    """Everything a good host does in one session of ``version``: the features, the server's asks."""
    caps: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}}
    if version >= "2025-06-18":
        caps["elicitation"] = {}
    if version >= "2025-11-25":
        caps["elicitation"] = {"form": {}, "url": {}}
        caps["sampling"] = {"tools": {}}
    server_caps = dict(SERVER_CAPS)
    if version >= "2025-11-25":
        server_caps["tasks"] = {"requests": {"tools": {"call": {}}}, "list": {}, "cancel": {}}
    after = http_after(version) if http else None

    def c(message: Any) -> Line:
        return (">", message, after) if after is not None else (">", message)

    tool: dict[str, Any] = {"name": "echo", "inputSchema": {"type": "object"}}
    if version >= "2025-11-25":
        tool["execution"] = {"taskSupport": "optional"}
    sampling = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}
    sampled = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}
    script: list[Line] = [
        *handshake(version, caps, server_caps, headers=GOOD_HEADERS if http else None),
        c(req(1, "tools/list")),
        ("<", ok(1, {"tools": [tool]})),
        c(req(2, "tools/call", {"name": "echo", "arguments": {"text": "x"}, "_meta": {"progressToken": 2}})),
        ("<", note("notifications/progress", {"progressToken": 2, "progress": 1, "total": 2})),
        ("<", ok(2, {"content": [{"type": "text", "text": "x"}]})),
        # The token is free again once its request is answered.
        c(req(3, "tools/call", {"name": "echo", "arguments": {}, "_meta": {"progressToken": 2}})),
        ("<", ok(3, {"content": []})),
        c(req("four", "resources/read", {"uri": "info://server"})),
        ("<", ok("four", {"contents": [{"uri": "info://server", "text": "x"}]})),
        c(req(5, "prompts/get", {"name": "greet"})),
        ("<", ok(5, {"messages": []})),
        c(req(6, "logging/setLevel", {"level": "info"})),
        ("<", ok(6)),
        c(req(7, "resources/subscribe", {"uri": "info://server"})),
        ("<", ok(7)),
        c(req(8, "ping")),
        ("<", ok(8)),
        ("<", req(100, "ping")),
        c(ok(100)),
        ("<", req(101, "roots/list")),
        c(ok(101, {"roots": [{"uri": "file:///tmp/project", "name": "p"}]})),
        c(note("notifications/roots/list_changed")),
        ("<", req(102, "sampling/createMessage", {**sampling, "_meta": {"progressToken": "s1"}})),
        c(note("notifications/progress", {"progressToken": "s1", "progress": 1})),
        c(note("notifications/progress", {"progressToken": "s1", "progress": 2})),
        c(ok(102, sampled)),
        # The server withdraws a request while the client answers it: a race, not a fault.
        ("<", req(103, "sampling/createMessage", sampling)),
        ("<", note("notifications/cancelled", {"requestId": 103})),
        c(ok(103, sampled)),
        ("<", req(104, "sampling/createMessage", sampling)),
        c(err(104, -1, "the user declined")),
        c(req(9, "tools/call", {"name": "echo", "arguments": {}})),
        c(note("notifications/cancelled", {"requestId": 9, "reason": "the user stopped it"})),
        ("<", ok(9, {"content": []})),
        # A cancellation that crosses the response: allowed.
        c(req(10, "tools/list", {"_meta": {"com.example/trace": "t-1"}})),
        ("<", ok(10, {"tools": [tool]})),
        c(note("notifications/cancelled", {"requestId": 10})),
    ]
    if version >= "2025-03-26":
        script += [
            c(
                req(
                    11,
                    "completion/complete",
                    {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "a", "value": "b"}},
                )
            ),
            ("<", ok(11, {"completion": {"values": []}})),
        ]
    if version >= "2025-06-18":
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        script += [
            ("<", req(105, "elicitation/create", {"message": "Name?", "requestedSchema": schema})),
            c(ok(105, {"action": "accept", "content": {"name": "Ada"}})),
        ]
    if version >= "2025-11-25":
        tools_use = {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "u1", "name": "f", "input": {}}],
            "model": "m",
            "stopReason": "toolUse",
        }
        script += [
            (
                "<",
                req(
                    106,
                    "elicitation/create",
                    {
                        "mode": "url",
                        "message": "Log in",
                        "url": "https://example.com/login",
                        "elicitationId": "e1",
                    },
                ),
            ),
            c(ok(106, {"action": "accept"})),
            (
                "<",
                req(
                    107,
                    "sampling/createMessage",
                    {**sampling, "tools": [{"name": "f", "inputSchema": {"type": "object"}}]},
                ),
            ),
            c(ok(107, tools_use)),
            c(req(12, "tools/call", {"name": "echo", "arguments": {}, "task": {"ttl": 60000}})),
            (
                "<",
                ok(
                    12,
                    {
                        "task": {
                            "taskId": "t1",
                            "status": "working",
                            "createdAt": "2025-01-01T00:00:00Z",
                            "lastUpdatedAt": "2025-01-01T00:00:00Z",
                            "ttl": 60000,
                        }
                    },
                ),
            ),
            c(req(13, "tasks/get", {"taskId": "t1"})),
        ]
    if http:
        script += [
            (
                ">GET",
                None,
                {"Accept": "text/event-stream", "MCP-Protocol-Version": version, "Mcp-Session-Id": SESSION},
            )
        ]
        if version < "2025-06-18":
            script[-1][2].pop("MCP-Protocol-Version")  # type: ignore[index]
        script += [(">DELETE", None, {"Mcp-Session-Id": SESSION, "MCP-Protocol-Version": version})]
    return script
