"""The client's rules: planted misbehaving clients (scripts of raw JSON-RPC lines, both directions),
one per rule code, each flagged with its code; and a well-behaved conversation per revision that
draws no client verdict at all. Fast: no process, no socket.
"""

from __future__ import annotations

import re

import pytest
from support.client_scripts import (
    GOOD_HEADERS,
    REVISIONS,
    SESSION,
    Line,
    clean_conversation,
    client_verdicts,
    handshake,
    http_after,
    ok,
    req,
    run,
)
from support.paths import REPO
from support.planted_clients import CREATED, PLANTED, SAMPLING, TASKS

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


# --- planted misbehaving clients, one per rule (tests/support/planted_clients.py) ---------------


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
