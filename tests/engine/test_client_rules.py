"""The client's rules: planted misbehaving clients (scripts of raw JSON-RPC lines, both directions),
one per rule code, each flagged with its code; and a well-behaved conversation per revision that
draws no client verdict at all. Fast: no process, no socket.
"""

from __future__ import annotations

import re

import pytest
from support.client_scripts import (
    GOOD_HEADERS,
    LATEST,
    REVISIONS,
    SESSION,
    Line,
    clean_conversation,
    client_verdicts,
    err,
    handshake,
    http_after,
    note,
    ok,
    req,
    run,
)
from support.paths import REPO

from sessions.engine import side_of

# --- well-behaved clients draw nothing -------------------------------------------------------------


@pytest.mark.parametrize("version", REVISIONS)
def test_a_well_behaved_client_draws_no_verdict(version: str) -> None:
    frames, conduct = run(clean_conversation(version))
    assert client_verdicts(frames) == []
    assert conduct.protocol_version == version and conduct.phase == "operating"


@pytest.mark.parametrize("version", REVISIONS)
def test_a_well_behaved_client_over_http_draws_no_verdict(version: str) -> None:
    frames, conduct = run(clean_conversation(version, http=True), transport="http")
    assert client_verdicts(frames) == []
    assert conduct.session_id == SESSION


def test_a_new_http_session_starts_with_a_fresh_initialize_and_fresh_ids() -> None:
    script = [
        *handshake(headers=GOOD_HEADERS),
        (">", req(1, "tools/list"), http_after()),
        ("<", ok(1, {"tools": []})),
        # The server ended the session (404): the client starts again, ids from scratch.
        *handshake(headers=GOOD_HEADERS),
        (">", req(1, "tools/list"), http_after()),
    ]
    frames, _ = run(script, transport="http")
    assert client_verdicts(frames) == []


def test_a_malformed_server_request_may_be_answered_with_a_null_id_error() -> None:
    frames, _ = run(
        [*handshake(), (">", {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}})]
    )
    assert client_verdicts(frames) == []


def test_a_client_that_declared_tasks_may_answer_a_task_augmented_request_with_a_task() -> None:
    frames, _ = run(
        [
            *handshake(client_caps={"sampling": {}, "tasks": TASKS}),
            ("<", req(100, "sampling/createMessage", {**SAMPLING, "task": {"ttl": 1000}})),
            (">", ok(100, {"task": CREATED})),
        ]
    )
    assert client_verdicts(frames) == []


def test_the_parsed_frame_says_what_it_is() -> None:
    frames, _ = run(
        [*handshake(), ("<", req(100, "roots/list")), (">", ok(100, {"roots": []}))], validate=False
    )
    answer = frames[-1]
    assert (answer.rpc_kind, answer.rpc_id, answer.method, answer.pair_seq) == (
        "result",
        100,
        "roots/list",
        4,
    )
    assert (frames[0].rpc_kind, frames[0].method, frames[0].rpc_id) == ("request", "initialize", 0)


# --- planted misbehaving clients, one per rule ----------------------------------------------------

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


def _planted_id(case: tuple[str, str, list[Line], str]) -> str:
    return case[0]


@pytest.mark.parametrize(
    ("code", "severity", "script", "transport"), PLANTED, ids=[_planted_id(c) for c in PLANTED]
)
def test_a_planted_misbehaving_client_is_flagged(
    code: str, severity: str, script: list[Line], transport: str
) -> None:
    frames, _ = run(script, transport=transport)
    last = next(f for f in reversed(frames) if f.direction == "out")
    assert [v.severity for v in last.verdicts if v.code == code] == [severity], client_verdicts(frames)
    earlier = [f for f in frames if f is not last]
    assert client_verdicts(earlier) == [], "only the planted line is at fault"


def test_every_client_rule_is_planted_documented_and_said_to_be_the_clients() -> None:
    source = " ".join(p.read_text() for p in (REPO / "sessions/engine").glob("_client_*.py"))
    used = set(re.findall(r'"(client-[a-z-]+)"', source))
    documented = set(re.findall(r"`(client-[a-z-]+)`", (REPO / "docs/engine.md").read_text()))
    planted = {case[0] for case in PLANTED}
    assert len(used) > 30
    assert used - planted == set(), "a rule without a planted client"
    assert used - documented == set(), "a rule missing from docs/engine.md"
    assert planted - used == set()
    assert {side_of(code) for code in used} == {"client"}
    assert side_of("unknown-id") == side_of("schema") == "server"


def test_a_stateless_client_that_carries_its_meta_draws_nothing() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {**GOOD_HEADERS, "MCP-Protocol-Version": "2026-07-28"}
    script: list[Line] = [
        (">", req(1, "server/discover", {"_meta": meta}), {**headers, "Mcp-Method": "server/discover"}),
        (
            "<",
            ok(
                1,
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {},
                    "serverInfo": {"name": "s", "version": "1"},
                },
            ),
        ),
        (
            ">",
            req(2, "tools/call", {"name": "echo", "arguments": {}, "_meta": meta}),
            {**headers, "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
        ),
        ("<", ok(2, {"resultType": "input_required", "inputRequests": {}, "requestState": "s1"})),
        (
            ">",
            req(
                3,
                "tools/call",
                {"name": "echo", "arguments": {}, "_meta": meta, "inputResponses": {}, "requestState": "s1"},
            ),
            {**headers, "Mcp-Method": "tools/call", "Mcp-Name": "echo"},
        ),
        ("<", ok(3, {"content": []})),
        # A finished request's id may come again in this revision (only pending ones may not).
        (">", req(2, "tools/list", {"_meta": meta}), {**headers, "Mcp-Method": "tools/list"}),
    ]
    frames, conduct = run(script, transport="http", validate=False)
    assert client_verdicts(frames) == []
    assert conduct.stateless and conduct.protocol_version == "2026-07-28"
