"""The tap's observer over scripted lines: frames numbered in order, the server judged by the engine's
rules, the books filled from what the client sent. No process: lines in, frames out."""

from __future__ import annotations

import json
from typing import Any

import pytest

from inspector.tap import UsageError, parse_args
from sessions.engine import Frame, LineSplitter, TapObserver


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"},
    },
}
INITIALIZED = {
    "jsonrpc": "2.0",
    "result": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"},
    },
    "id": 0,
}


def handshake(observer: TapObserver) -> list[Frame]:
    frames = observer.client_line(line(INITIALIZE), mono=1.0)
    frames += observer.server_line(line(INITIALIZED), mono=1.25)
    frames += observer.client_line(line({"jsonrpc": "2.0", "method": "notifications/initialized"}), mono=1.3)
    return frames


def codes(frame: Frame) -> list[str]:
    return [v.code for v in frame.verdicts]


def test_a_handshake_makes_numbered_frames_with_its_lifecycle_and_pairs_the_answer() -> None:
    observer = TapObserver(validate=False)
    frames = [observer.spawned(42, "node", ["server.js"]), *handshake(observer)]
    assert [f.seq for f in frames] == [1, 2, 3, 4, 5, 6]
    assert [(f.kind, f.direction, f.method or f.transport.get("state")) for f in frames] == [
        ("state", "local", "spawned"),
        ("message", "out", "initialize"),
        ("state", "local", "initializing"),
        ("message", "in", "initialize"),
        ("message", "out", "notifications/initialized"),
        ("state", "local", "ready"),
    ]
    answer = frames[3]
    assert answer.rpc_kind == "result" and answer.pair_seq == 2 and answer.latency_ms == 250.0
    assert answer.verdicts == []
    assert observer.peer.protocol_version == "2025-06-18"
    assert observer.peer.server_capabilities == {"tools": {}}
    assert frames[5].note == "protocol 2025-06-18"


def test_the_servers_frames_are_judged_by_the_engines_rules() -> None:
    observer = TapObserver(validate=False)
    early = observer.client_line(line(INITIALIZE))
    # A notification before initialization is over, a log without the logging capability.
    [log] = observer.server_line(line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
    assert "before-initialized" in codes(log)
    observer.server_line(line(INITIALIZED))
    observer.client_line(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    [sampling] = observer.server_line(
        line({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": {}})
    )
    assert "undeclared-capability" in codes(sampling)
    [unknown] = observer.server_line(line({"jsonrpc": "2.0", "id": 99, "result": {}}))
    assert "unknown-id" in codes(unknown)
    [garbage] = observer.server_line(b"{not json")
    assert codes(garbage) == ["invalid-json"]
    assert early[0].verdicts == []


def test_progress_and_cancellation_follow_the_clients_requests() -> None:
    observer = TapObserver(validate=False)
    handshake(observer)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "slow", "_meta": {"progressToken": "p7"}},
    }
    observer.client_line(line(call))
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p7", "progress": 1},
    }
    [first] = observer.server_line(line(progress))
    assert first.verdicts == []
    [again] = observer.server_line(line(progress))
    assert "progress-not-increasing" in codes(again)
    observer.client_line(
        line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})
    )
    [late] = observer.server_line(line({"jsonrpc": "2.0", "id": 7, "result": {"content": []}}))
    assert codes(late) == ["late-response"]
    [after] = observer.server_line(line(progress))
    assert "unknown-progress-token" in codes(after)


def test_the_clients_answer_to_a_server_request_is_paired_with_it() -> None:
    observer = TapObserver(validate=False)
    handshake(observer)
    [ping] = observer.server_line(line({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}), mono=5.0)
    [pong] = observer.client_line(line({"jsonrpc": "2.0", "id": "srv-1", "result": {}}), mono=5.5)
    assert pong.pair_seq == ping.seq and pong.method == "ping" and pong.latency_ms == 500.0


def test_a_client_line_that_is_no_json_is_kept_with_its_parse_error() -> None:
    [frame] = TapObserver(validate=False).client_line(b"\xff\xfe not json")
    assert frame.rpc_kind == "invalid" and frame.parse_error and frame.raw == b"\xff\xfe not json"


def test_the_exit_ends_the_session_and_says_how() -> None:
    observer = TapObserver(validate=False)
    exit_frame, closed = observer.exited(-9)
    assert exit_frame.transport == {"stdio": {"returncode": -9, "signal": "SIGKILL"}}
    assert (
        closed.transport == {"state": "closed"}
        and closed.note == "the server process exited by signal SIGKILL"
    )


def test_an_oversized_line_keeps_its_head_and_is_flagged() -> None:
    observer = TapObserver(validate=False, max_message_bytes=100)
    [frame] = observer.server_line(b"x" * 101)
    assert codes(frame) == ["message-too-large"] and frame.direction == "in"


def test_the_splitter_cuts_lines_as_the_stdio_transport_does() -> None:
    splitter = LineSplitter(1000)
    assert splitter.feed(b'{"a":1}\r\n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\n\n  \n") == [b'{"b":2}', b"  "]
    assert splitter.feed(b"tail") == []
    assert splitter.rest() == b"tail"
    small = LineSplitter(4)
    assert small.feed(b"abcdefgh") == [] and small.feed(b"ij\nk\n") == [b"abcde", b"k"]


def test_the_tap_takes_its_options_before_the_double_dash_and_leaves_the_rest_to_the_server() -> None:
    options = parse_args(["--name", "fs", "--record=out.jsonl", "--", "npx", "-y", "--help"])
    assert (options.name, options.record, options.command, options.args) == (
        "fs",
        "out.jsonl",
        "npx",
        ["-y", "--help"],
    )
    assert parse_args(["--", "/usr/bin/node", "x.js"]).name == "node"
    for bad in ([], ["node"], ["--name"], ["--bogus", "--", "node"], ["--"]):
        with pytest.raises(UsageError):
            parse_args(bad)


def test_the_hosts_frames_are_judged_by_the_client_rules_and_a_clean_handshake_draws_none() -> None:
    observer = TapObserver(validate=False)
    assert all(f.verdicts == [] for f in handshake(observer))
    observer = TapObserver(validate=False)
    [early] = observer.client_line(line({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert "client-before-initialize" in codes(early)
    handshake(observer)
    [reused] = observer.client_line(line({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}))
    assert any(code.startswith("client-") for code in codes(reused))
