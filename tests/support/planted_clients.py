"""Planted misbehaving clients, one per client rule code: scripts of raw JSON-RPC lines in both
directions whose last client line breaks the rule (tests/engine/test_client_rules.py runs them)."""

from __future__ import annotations

from support.client_scripts import (
    GOOD_HEADERS,
    LATEST,
    SESSION,
    Line,
    err,
    handshake,
    http_after,
    note,
    ok,
    req,
)

CAPS_ALL = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}
TASKS = {"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}}}
CREATED = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2025-11-25T10:00:00Z",
    "lastUpdatedAt": "2025-11-25T10:00:00Z",
    "ttl": 1000,
}

# (rule code, severity, script, transport): the last client line of each script breaks the rule.
STATELESS_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}
STATELESS_ASKED: list[Line] = [
    (">", req(1, "tools/call", {"name": "echo", "arguments": {}, "_meta": STATELESS_META})),
    ("<", ok(1, {"resultType": "input_required", "inputRequests": {}, "requestState": "s1"})),
]


def retry(id_: int, state: str) -> Line:
    params = {
        "name": "echo",
        "arguments": {},
        "_meta": STATELESS_META,
        "inputResponses": {},
        "requestState": state,
    }
    return (">", req(id_, "tools/call", params))


PLANTED: list[tuple[str, str, list[Line], str]] = [
    ("client-request-state", "error", [*STATELESS_ASKED, retry(2, "forged")], "stdio"),
    ("client-id-reuse", "error", [*STATELESS_ASKED, retry(1, "s1")], "stdio"),
    (
        "client-session-id-header",
        "error",
        [
            *handshake(headers=GOOD_HEADERS),
            (">", req(1, "tools/list"), http_after()),
            ("<", err(1, -32001, "session not found"), {":status": "404"}),
            (">", req(2, "tools/list"), http_after()),
        ],
        "http",
    ),
    (
        "client-token-in-url",
        "error",
        [
            *handshake(headers=GOOD_HEADERS),
            (">", req(1, "tools/list"), {**http_after(), ":url": "http://h/mcp?access_token=abc"}),
        ],
        "http",
    ),
    ("client-invalid-json", "error", [*handshake(), (">", "{not json")], "stdio"),
    ("client-invalid-json", "error", [*handshake(), (">", b'{"jsonrpc": "2.0", "method": "\xff"}')], "stdio"),
    ("client-not-jsonrpc", "error", [*handshake(), (">", "42")], "stdio"),
    ("client-not-jsonrpc", "error", [*handshake(), (">", {"jsonrpc": "2.0", "id": 3})], "stdio"),
    (
        "client-jsonrpc-version",
        "error",
        [*handshake(), (">", {"jsonrpc": "1.0", "id": 1, "method": "ping"})],
        "stdio",
    ),
    (
        "client-invalid-method",
        "error",
        [*handshake(), (">", {"jsonrpc": "2.0", "id": 1, "method": 7})],
        "stdio",
    ),
    (
        "client-invalid-params",
        "error",
        [*handshake(), (">", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]})],
        "stdio",
    ),
    (
        "client-notification-with-id",
        "error",
        [*handshake(), (">", {"jsonrpc": "2.0", "id": 5, "method": "notifications/roots/list_changed"})],
        "stdio",
    ),
    ("client-invalid-id", "error", [*handshake(), (">", req(None, "tools/list"))], "stdio"),
    ("client-invalid-id", "error", [*handshake(), (">", req(1.5, "tools/list"))], "stdio"),
    ("client-invalid-id", "error", [*handshake(), (">", req(True, "tools/list"))], "stdio"),
    ("client-invalid-id", "error", [*handshake(), (">", req({"n": 1}, "tools/list"))], "stdio"),
    ("client-invalid-id", "error", [*handshake(), ("<", req(100, "ping")), (">", ok(True))], "stdio"),
    (
        "client-id-reuse",
        "error",
        [*handshake(), (">", req(1, "tools/list")), ("<", ok(1, {"tools": []})), (">", req(1, "tools/list"))],
        "stdio",
    ),
    ("client-id-reuse", "error", [*handshake(), (">", req(0, "tools/list"))], "stdio"),  # initialize's id
    ("client-before-initialize", "error", [(">", req(1, "tools/list"))], "stdio"),
    ("client-before-initialize", "error", [(">", note("notifications/initialized"))], "stdio"),
    ("client-before-initialized", "error", [*handshake()[:2], (">", req(1, "tools/list"))], "stdio"),
    ("client-before-initialized", "error", [handshake()[0], (">", req(1, "tools/list"))], "stdio"),
    (
        "client-initialize-twice",
        "error",
        [
            *handshake(),
            (
                ">",
                req(
                    9,
                    "initialize",
                    {
                        "protocolVersion": LATEST,
                        "capabilities": {},
                        "clientInfo": {"name": "c", "version": "1"},
                    },
                ),
            ),
        ],
        "stdio",
    ),
    (
        "client-initialized-early",
        "error",
        [handshake()[0], (">", note("notifications/initialized"))],
        "stdio",
    ),
    (
        "client-initialized-early",
        "error",
        [handshake()[0], ("<", err(0, -32602, "unsupported")), (">", note("notifications/initialized"))],
        "stdio",
    ),
    (
        "client-initialized-twice",
        "warning",
        [*handshake(), (">", note("notifications/initialized"))],
        "stdio",
    ),
    (
        "client-progress-token",
        "error",
        [
            *handshake(),
            (">", req(1, "tools/call", {"name": "a", "_meta": {"progressToken": "p"}})),
            (">", req(2, "tools/call", {"name": "b", "_meta": {"progressToken": "p"}})),
        ],
        "stdio",
    ),
    (
        "client-progress-token",
        "error",
        [*handshake(), (">", req(1, "tools/call", {"name": "a", "_meta": {"progressToken": 1.5}}))],
        "stdio",
    ),
    (
        "client-progress-token",
        "error",
        [*handshake(), (">", note("notifications/progress", {"progressToken": "nobody", "progress": 1}))],
        "stdio",
    ),
    (
        "client-progress-not-increasing",
        "error",
        [
            *handshake(version=LATEST, client_caps=CAPS_ALL),
            ("<", req(100, "sampling/createMessage", {**SAMPLING, "_meta": {"progressToken": "s"}})),
            (">", note("notifications/progress", {"progressToken": "s", "progress": 2})),
            (">", note("notifications/progress", {"progressToken": "s", "progress": 2})),
        ],
        "stdio",
    ),
    (
        "client-unnegotiated-capability",
        "error",
        [*handshake(server_caps={"tools": {}}), (">", req(1, "prompts/list"))],
        "stdio",
    ),
    (
        "client-unnegotiated-capability",
        "error",
        [*handshake(server_caps={"resources": {}}), (">", req(1, "resources/subscribe", {"uri": "x://y"}))],
        "stdio",
    ),
    (
        "client-unnegotiated-capability",
        "warning",
        [
            *handshake("2025-03-26", server_caps={"tools": {}}),
            (">", req(1, "logging/setLevel", {"level": "info"})),
        ],
        "stdio",
    ),
    (
        "client-task-augmentation",
        "error",
        [
            *handshake(server_caps={"tools": {}}),
            (">", req(1, "tools/call", {"name": "a", "arguments": {}, "task": {"ttl": 1000}})),
        ],
        "stdio",
    ),
    (
        "client-task-augmentation",
        "error",
        [
            *handshake(server_caps={"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}),
            (">", req(1, "tools/list")),
            ("<", ok(1, {"tools": [{"name": "a", "inputSchema": {"type": "object"}}]})),
            (">", req(2, "tools/call", {"name": "a", "arguments": {}, "task": {"ttl": 1000}})),
        ],
        "stdio",
    ),
    (
        "client-task-augmentation",
        "error",
        [
            *handshake(server_caps={"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}),
            (">", req(1, "tools/list")),
            (
                "<",
                ok(
                    1,
                    {
                        "tools": [
                            {
                                "name": "a",
                                "inputSchema": {"type": "object"},
                                "execution": {"taskSupport": "required"},
                            }
                        ]
                    },
                ),
            ),
            (">", req(2, "tools/call", {"name": "a", "arguments": {}})),
        ],
        "stdio",
    ),
    (
        "client-roots-list-changed",
        "error",
        [*handshake(client_caps={"roots": {}}), (">", note("notifications/roots/list_changed"))],
        "stdio",
    ),
    (
        "client-roots-list-changed",
        "error",
        [*handshake(client_caps={}), (">", note("notifications/roots/list_changed"))],
        "stdio",
    ),
    (
        "client-cancel-initialize",
        "error",
        [handshake()[0], (">", note("notifications/cancelled", {"requestId": 0}))],
        "stdio",
    ),
    (
        "client-cancel-task",
        "error",
        [
            *handshake(server_caps={"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}),
            (">", req(1, "tools/call", {"name": "a", "arguments": {}, "task": {"ttl": 1000}})),
            (">", note("notifications/cancelled", {"requestId": 1})),
        ],
        "stdio",
    ),
    (
        "client-cancel-unknown",
        "error",
        [*handshake(), (">", note("notifications/cancelled", {"requestId": 77}))],
        "stdio",
    ),
    (
        "client-cancel-unknown",
        "error",
        [
            *handshake(client_caps=CAPS_ALL),
            ("<", req(100, "roots/list")),
            (">", note("notifications/cancelled", {"requestId": 100})),
        ],
        "stdio",
    ),
    (
        "client-result-and-error",
        "error",
        [
            *handshake(),
            ("<", req(100, "ping")),
            (">", {"jsonrpc": "2.0", "id": 100, "result": {}, "error": {"code": 1, "message": "x"}}),
        ],
        "stdio",
    ),
    (
        "client-invalid-error",
        "error",
        [
            *handshake(client_caps=CAPS_ALL),
            ("<", req(100, "roots/list")),
            (">", {"jsonrpc": "2.0", "id": 100, "error": {"code": "E1", "message": "x"}}),
        ],
        "stdio",
    ),
    (
        "client-invalid-error",
        "error",
        [
            *handshake(client_caps=CAPS_ALL),
            ("<", req(100, "roots/list")),
            (">", {"jsonrpc": "2.0", "id": 100, "error": {"code": -32603}}),
        ],
        "stdio",
    ),
    (
        "client-duplicate-response",
        "error",
        [*handshake(), ("<", req(100, "ping")), (">", ok(100)), (">", ok(100))],
        "stdio",
    ),
    ("client-unknown-id", "error", [*handshake(), (">", ok(555))], "stdio"),
    (
        "client-ping-result",
        "error",
        [*handshake(), ("<", req(100, "ping")), (">", ok(100, {"pong": True}))],
        "stdio",
    ),
    ("client-ping-result", "error", [*handshake(), ("<", req(100, "ping")), (">", err(100))], "stdio"),
    (
        "client-task-capability",
        "error",
        [
            *handshake(client_caps={"sampling": {}}),
            ("<", req(100, "sampling/createMessage", {**SAMPLING, "task": {"ttl": 1000}})),
            (">", ok(100, {"task": CREATED})),
        ],
        "stdio",
    ),
    (
        "client-task-capability",
        "error",
        [
            *handshake(client_caps={"sampling": {}, "tasks": TASKS}),
            ("<", req(100, "sampling/createMessage", SAMPLING)),
            (">", ok(100, {"task": CREATED})),
        ],
        "stdio",
    ),
    (
        "client-schema",
        "error",
        [
            *handshake(client_caps={"sampling": {}, "tasks": TASKS}),
            ("<", req(100, "sampling/createMessage", {**SAMPLING, "task": {"ttl": 1000}})),
            (">", ok(100, {"task": {"taskId": "t1", "status": "working"}})),
        ],
        "stdio",
    ),
    (
        "client-undeclared-sampling",
        "error",
        [
            *handshake(client_caps={}),
            ("<", req(100, "sampling/createMessage", SAMPLING)),
            (">", ok(100, SAMPLED)),
        ],
        "stdio",
    ),
    (
        "client-undeclared-sampling",
        "error",
        [
            *handshake(client_caps={"sampling": {}}),
            (
                "<",
                req(
                    100,
                    "sampling/createMessage",
                    {**SAMPLING, "tools": [{"name": "f", "inputSchema": {"type": "object"}}]},
                ),
            ),
            (">", ok(100, SAMPLED)),
        ],
        "stdio",
    ),
    (
        "client-undeclared-sampling",
        "error",
        [
            *handshake(client_caps={"sampling": {}}),
            ("<", req(100, "sampling/createMessage", SAMPLING)),
            (
                ">",
                ok(
                    100,
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "u", "name": "f", "input": {}}],
                        "model": "m",
                        "stopReason": "toolUse",
                    },
                ),
            ),
        ],
        "stdio",
    ),
    (
        "client-undeclared-elicitation",
        "error",
        [
            *handshake(client_caps={}),
            (
                "<",
                req(
                    100,
                    "elicitation/create",
                    {"message": "?", "requestedSchema": {"type": "object", "properties": {}}},
                ),
            ),
            (">", ok(100, {"action": "decline"})),
        ],
        "stdio",
    ),
    (
        "client-undeclared-elicitation",
        "error",
        [
            *handshake(client_caps={"elicitation": {}}),
            (
                "<",
                req(
                    100,
                    "elicitation/create",
                    {"mode": "url", "message": "?", "url": "https://e.example/x", "elicitationId": "e"},
                ),
            ),
            (">", ok(100, {"action": "accept"})),
        ],
        "stdio",
    ),
    (
        "client-undeclared-roots",
        "error",
        [*handshake(client_caps={}), ("<", req(100, "roots/list")), (">", ok(100, {"roots": []}))],
        "stdio",
    ),
    (
        "client-root-uri",
        "error",
        [
            *handshake(client_caps=CAPS_ALL),
            ("<", req(100, "roots/list")),
            (">", ok(100, {"roots": [{"uri": "https://example.com/repo"}]})),
        ],
        "stdio",
    ),
    ("client-accept-header", "error", handshake(headers={"Accept": "application/json"})[:1], "http"),
    (
        "client-accept-header",
        "error",
        [*handshake(headers=GOOD_HEADERS), (">", req(1, "tools/list"), {**http_after(), "Accept": "*/*"})],
        "http",
    ),
    (
        "client-accept-header",
        "error",
        [*handshake(headers=GOOD_HEADERS), (">GET", None, {**http_after(), "Accept": "application/json"})],
        "http",
    ),
    (
        "client-protocol-version-header",
        "error",
        [
            *handshake(headers=GOOD_HEADERS),
            (">", req(1, "tools/list"), {**GOOD_HEADERS, "Mcp-Session-Id": SESSION}),
        ],
        "http",
    ),
    (
        "client-protocol-version-header",
        "error",
        [
            *handshake(headers=GOOD_HEADERS),
            (">GET", None, {"Accept": "text/event-stream", "Mcp-Session-Id": SESSION}),
        ],
        "http",
    ),
    (
        "client-protocol-version-header",
        "warning",
        [
            *handshake(headers=GOOD_HEADERS),
            (">", req(1, "tools/list"), {**http_after(), "MCP-Protocol-Version": "2025-06-18"}),
        ],
        "http",
    ),
    (
        "client-session-id-header",
        "error",
        [
            *handshake(headers=GOOD_HEADERS),
            (">", req(1, "tools/list"), {**GOOD_HEADERS, "MCP-Protocol-Version": LATEST}),
        ],
        "http",
    ),
    (
        "client-session-id-header",
        "error",
        [
            *handshake(headers=GOOD_HEADERS),
            (">", req(1, "tools/list"), {**http_after(), "Mcp-Session-Id": "someone-else"}),
        ],
        "http",
    ),
    (
        "client-session-id-header",
        "error",
        [*handshake(headers=GOOD_HEADERS), (">DELETE", None, {"MCP-Protocol-Version": LATEST})],
        "http",
    ),
    ("client-meta", "error", [*handshake(), (">", req(1, "tools/list", {"_meta": "trace-1"}))], "stdio"),
    ("client-meta", "error", [*handshake(), (">", req(1, "tools/list", {"_meta": {"-bad-": 1}}))], "stdio"),
    (
        "client-meta",
        "error",
        [*handshake(), (">", req(1, "tools/list", {"_meta": {"1com.example/x": 1}}))],
        "stdio",
    ),
    (
        "client-meta",
        "error",
        [*handshake(), (">", req(1, "tools/list", {"_meta": {"io.modelcontextprotocol/mine": 1}}))],
        "stdio",
    ),
    (
        "client-meta",
        "error",
        [*handshake(), (">", req(1, "tools/list", {"_meta": {"dev.mcp/x": 1}}))],
        "stdio",
    ),
    (
        "client-meta",
        "error",
        [*handshake("2025-06-18"), (">", req(1, "tools/list", {"_meta": {"modelcontextprotocol.io/x": 1}}))],
        "stdio",
    ),
    (
        "client-meta",
        "error",
        [*handshake("2025-06-18"), (">", req(1, "tools/list", {"_meta": {"mcp.dev/x": 1}}))],
        "stdio",
    ),
    (
        "client-meta",
        "error",
        [
            *handshake(client_caps=CAPS_ALL),
            ("<", req(100, "roots/list")),
            (">", ok(100, {"roots": [], "_meta": {"api.mcp.example/x": 1}})),
        ],
        "stdio",
    ),
    (
        "client-batch",
        "error",
        [*handshake("2025-06-18"), (">", [req(1, "tools/list"), req(2, "prompts/list")])],
        "stdio",
    ),
    ("client-batch", "error", [*handshake("2025-03-26"), (">", [])], "stdio"),
    (
        "client-batch",
        "error",
        [
            (
                ">",
                [
                    req(
                        0,
                        "initialize",
                        {
                            "protocolVersion": "2025-03-26",
                            "capabilities": {},
                            "clientInfo": {"name": "c", "version": "1"},
                        },
                    )
                ],
            )
        ],
        "stdio",
    ),
    ("client-batch", "warning", [*handshake("2024-11-05"), (">", [req(1, "tools/list")])], "stdio"),
    ("client-schema", "error", [*handshake(), (">", req(1, "tools/call", {"arguments": {}}))], "stdio"),
    (
        "client-schema",
        "error",
        [
            *handshake(client_caps=CAPS_ALL),
            ("<", req(100, "sampling/createMessage", SAMPLING)),
            (">", ok(100, {"role": "assistant"})),
        ],
        "stdio",
    ),
    ("client-not-in-revision", "warning", [*handshake("2025-06-18"), (">", req(1, "tasks/list"))], "stdio"),
    (
        "client-stateless-meta",
        "error",
        [(">", req(1, "server/discover")), ("<", ok(1, {})), (">", req(2, "tools/list"))],
        "stdio",
    ),
    (
        "client-method-header",
        "error",
        [
            (
                ">",
                req(
                    1,
                    "tools/call",
                    {
                        "name": "echo",
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                        },
                    },
                ),
                {**GOOD_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"},
            )
        ],
        "http",
    ),
    (
        "client-method-header",
        "error",
        [
            (
                ">",
                req(
                    1,
                    "tools/list",
                    {
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {},
                        }
                    },
                ),
                {**GOOD_HEADERS, "MCP-Protocol-Version": "2026-07-28"},
            )
        ],
        "http",
    ),
]
