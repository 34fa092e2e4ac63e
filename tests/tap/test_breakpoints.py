"""Breakpoints and faults inside the tap, in process: which messages a rule stops, what a gate does with
a line (holds it, forwards it, edits, drops or answers it), and the control channel's protocol over a
real Unix socket."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import select
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from inspector.tap._control import ControlServer, bind_path, peer_uid
from inspector.tap._gate import Change, Traffic, TrafficError
from inspector.tap._match import RuleError, checked_rule, describe, matches
from sessions.models import McpSession
from sessions.runtime import tap_control
from sessions.timeline.search import Query
from sessions.web.tap_controls import render_live, tap_tree

CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"a": 1}}}
PING = {"jsonrpc": "2.0", "id": 4, "method": "ping"}


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def facts(message: dict[str, Any], direction: str = "out") -> Any:
    raw = json.dumps(message).encode()
    return describe(direction, raw, message)


def query(text: str) -> dict[str, Any]:
    parsed = Query.parse(text)
    assert parsed.tree is not None, parsed.problems
    return tap_tree(parsed.tree)


# --- matching ---------------------------------------------------------------------------------------


def test_a_rule_matches_by_direction_method_prefix_and_name() -> None:
    assert matches({"method": "tools/"}, facts(CALL))
    assert matches({"direction": "out", "name": "echo"}, facts(CALL))
    assert not matches({"direction": "in", "method": "tools/call"}, facts(CALL))
    assert not matches({"name": "add"}, facts(CALL))
    read = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "file:///a"}}
    assert matches({"name": "file:///a"}, facts(read))


def test_a_search_query_runs_in_the_tap_on_words_phrases_status_and_groups() -> None:
    assert matches({"query": query('method:tools/call "echo"')}, facts(CALL))
    assert matches({"query": query("ech")}, facts(CALL))  # a word matches the words it begins
    assert not matches({"query": query('"ech"')}, facts(CALL))  # a quoted word is whole
    assert matches({"query": query("(method:ping OR dir:in) OR arguments")}, facts(CALL))
    assert not matches({"query": query("method:ping OR dir:in")}, facts(CALL))
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}}
    assert matches({"query": query("status:error dir:in")}, facts(error, "in"))
    assert matches({"query": query("server:every")}, facts(CALL), server="fs everything")


def test_what_is_judged_after_a_message_passed_cannot_stop_it() -> None:
    for text in ("latency:>100", "rule:unknown-id", "status:violation"):
        parsed = Query.parse(text)
        assert parsed.tree is not None
        with pytest.raises(ValueError, match="known only after"):
            tap_tree(parsed.tree)


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({}, "would stop everything"),
        ({"direction": "up"}, "direction"),
        ({"method": 5}, "method"),
        ({"query": {"key": "status", "value": "violation"}}, "status:error"),
        ({"query": {"key": "latency", "value": ">1"}}, "key"),
        ({"query": {"op": "xor", "parts": []}}, "op"),
        ("tools/call", "JSON object"),
    ],
)
def test_a_rule_the_tap_cannot_run_is_refused_with_the_reason(rule: Any, problem: str) -> None:
    with pytest.raises(RuleError, match=problem):
        checked_rule(rule)


# --- a gate, over pipes -------------------------------------------------------------------------------


class Wires:
    """A tap's two targets as pipes: what the server and the host would read."""

    def __init__(self) -> None:
        self.server_r, self.server_w = os.pipe()
        self.host_r, self.host_w = os.pipe()
        self.items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.traffic = Traffic(self.items, self.server_w, self.host_w)

    def read(self, fd: int, timeout: float = 0.0) -> bytes:
        if not select.select([fd], [], [], timeout)[0]:
            return b""
        return os.read(fd, 1 << 20)

    def spooled(self) -> list[Any]:
        found = []
        while not self.items.empty():
            found.append(self.items.get_nowait())
        return found

    def close(self) -> None:
        for fd in (self.server_r, self.server_w, self.host_r, self.host_w):
            os.close(fd)


@pytest.fixture
def wires() -> Iterator[Wires]:
    made = Wires()
    yield made
    made.close()


def test_with_nothing_set_the_gates_stay_shut(wires: Wires) -> None:
    assert not wires.traffic.gates["out"].active and not wires.traffic.gates["in"].active
    wires.traffic.set_rules([{"method": "tools/call"}])
    assert wires.traffic.gates["out"].active and wires.traffic.gates["in"].active
    wires.traffic.set_rules([])
    gate = wires.traffic.gates["out"]
    gate.take(line(PING), b"\n")  # the next chunk closes it again, in the pump's thread
    assert not gate.active and wires.read(wires.server_r) == line(PING)


def test_a_matching_line_is_held_while_others_pass_and_an_edit_is_forwarded_with_the_original_kept(
    wires: Wires,
) -> None:
    traffic, gate = wires.traffic, wires.traffic.gates["out"]
    traffic.set_rules([{"method": "tools/call"}])
    gate.take(line(CALL) + line(PING)[:10], b"\n")
    gate.take(line(PING)[10:], b"\n")
    assert wires.read(wires.server_r) == line(PING)  # passed; the call is held
    held = traffic.snapshot()["held"]
    assert [(h["method"], h["name"], h["rpc_id"]) for h in held] == [("tools/call", "echo", 3)]
    with pytest.raises(TrafficError, match="not JSON"):
        traffic.release(held[0]["id"], "edit", "alice", raw="{oops")
    edited = json.dumps({**CALL, "params": {"name": "echo", "arguments": {"a": 2}}}, indent=1)
    change = traffic.release(held[0]["id"], "edit", "alice", raw=edited)
    one_line = json.dumps(json.loads(edited), separators=(",", ":")).encode() + b"\n"
    assert wires.read(wires.server_r, 1.0) == one_line
    assert change is not None and change.original == line(CALL)
    assert "edited by alice" in change.sent_note and traffic.snapshot()["held"] == []
    kinds = [item[0] for item in wires.spooled()]
    assert kinds == ["client", "tap"]


def test_a_held_request_answered_with_an_error_goes_back_to_its_sender_only(wires: Wires) -> None:
    traffic = wires.traffic
    traffic.set_rules([{"direction": "out"}])
    traffic.gates["out"].take(line(CALL), b"\n")
    held = traffic.snapshot()["held"][0]
    traffic.release(held["id"], "error", "bob", code=-32001, message="not now")
    assert json.loads(wires.read(wires.host_r, 1.0)) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32001, "message": "not now"},
    }
    assert wires.read(wires.server_r) == b""


def test_a_dropped_message_reaches_nobody_and_a_notification_cannot_be_answered(wires: Wires) -> None:
    traffic = wires.traffic
    traffic.set_rules([{"direction": "in"}])
    notification = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}}
    traffic.gates["in"].take(line(notification), b"\n")
    held = traffic.snapshot()["held"][0]
    with pytest.raises(TrafficError, match="only a request"):
        traffic.release(held["id"], "error", "bob")
    change = traffic.release(held["id"], "drop", "bob")
    assert wires.read(wires.host_r) == b"" and wires.read(wires.server_r) == b""
    assert change is not None and change.sent is None and "dropped by bob" in change.original_note
    with pytest.raises(TrafficError, match="no such held message"):
        traffic.release(held["id"], "forward", "bob")


def test_a_line_begun_before_the_gate_opened_passes_whole_without_being_matched(wires: Wires) -> None:
    traffic, gate = wires.traffic, wires.traffic.gates["out"]
    head, tail = line(CALL)[:20], line(CALL)[20:]
    traffic.set_rules([{"method": "tools/call"}])
    gate.take(tail + line(CALL), head)  # the pump forwarded ``head`` before the rule came
    assert wires.read(wires.server_r) == tail
    assert len(traffic.snapshot()["held"]) == 1  # the next one, whole, is held


def test_one_shot_faults_truncate_or_corrupt_only_the_next_message(wires: Wires) -> None:
    traffic, gate = wires.traffic, wires.traffic.gates["out"]
    traffic.once("truncate", "out")
    gate.take(line(PING) + line(PING), b"\n")
    body = json.dumps(PING).encode()
    assert wires.read(wires.server_r) == body[: len(body) // 2] + b"\n" + line(PING)
    traffic.once("corrupt", "out")
    gate.take(line(PING), b"\n")
    spoilt = wires.read(wires.server_r)
    assert len(spoilt) == len(line(PING)) and b"\xff" in spoilt
    changes = [item[1] for item in wires.spooled() if item[0] == "tap"]
    assert [c.fault["what"] for c in changes] == ["truncate", "corrupt"]
    with pytest.raises(TrafficError):
        traffic.once("explode", "out")


def test_standing_faults_answer_a_method_and_drop_notifications(wires: Wires) -> None:
    traffic = wires.traffic
    traffic.set_faults({"errors": [{"method": "ping", "code": -5, "message": "down"}], "drop": {"out": 1}})
    traffic.gates["out"].take(line(PING) + line({"jsonrpc": "2.0", "method": "notifications/x"}), b"\n")
    assert json.loads(wires.read(wires.host_r, 1.0))["error"] == {"code": -5, "message": "down"}
    assert wires.read(wires.server_r) == b""
    faults = [item[1].fault["what"] for item in wires.spooled() if isinstance(item[1], Change)]
    assert faults == ["error", "drop"]
    for bad in ({"latency": {"up": {"ms": 1}}}, {"drop": {"in": 2}}, {"errors": [{"code": 1}]}, []):
        with pytest.raises(TrafficError):
            traffic.set_faults(bad)


# --- the control channel -------------------------------------------------------------------------------


@pytest.fixture
def control(tmp_path: Path, wires: Wires) -> Iterator[tuple[str, Traffic]]:
    folder = tmp_path / "taps"
    folder.mkdir(mode=0o700)
    path = str(folder / "1700000000000-42-0123abcd.sock")
    server = ControlServer(path, wires.traffic)
    assert server.start() is None
    yield path, wires.traffic
    server.close()


def connect(sock: socket.socket, path: str) -> None:
    """Connect as the app does: through the folder's descriptor when the path is too long for an address."""
    address, folder = bind_path(path)
    try:
        sock.connect(address)
    finally:
        if folder is not None:
            os.close(folder)


def ask(path: str, *commands: Any) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(5)
        connect(sock, path)
        reader = sock.makefile("rb")
        answers = []
        for command in commands:
            sock.sendall((command if isinstance(command, bytes) else json.dumps(command).encode()) + b"\n")
            answers.append(json.loads(reader.readline()))
        return answers


def test_the_socket_is_private_and_answers_its_own_user(control: tuple[str, Traffic]) -> None:
    path, _ = control
    assert os.stat(path).st_mode & 0o777 == 0o600
    with socket.socket(socket.AF_UNIX) as sock:
        connect(sock, path)
        assert peer_uid(sock) == os.getuid()


def test_commands_are_answered_and_bad_ones_refused_with_the_reason(control: tuple[str, Traffic]) -> None:
    path, traffic = control
    state, rules, bad_json, unknown, bad_rule, release = ask(
        path,
        {"op": "state"},
        {"op": "rules", "rules": [{"method": "tools/call"}]},
        b"{nope",
        {"op": "launch"},
        {"op": "rules", "rules": [{}]},
        {"op": "release", "id": 9, "action": "forward", "by": "x"},
    )
    assert state == {"ok": True, "state": {"version": 0, "rules": [], "faults": {}, "held": [], "once": {}}}
    assert rules["ok"] and rules["state"]["rules"][0]["method"] == "tools/call"
    assert bad_json == {"ok": False, "error": "a command is one JSON object a line"}
    assert unknown == {"ok": False, "error": "unknown command 'launch'"}
    assert not bad_rule["ok"] and "stop everything" in bad_rule["error"]
    assert not release["ok"] and "no such held message" in release["error"]
    assert traffic.rules[0]["method"] == "tools/call"  # the refused command changed nothing


def test_the_inspector_follows_the_taps_state_and_sends_it_commands(
    control: tuple[str, Traffic], tmp_path: Path
) -> None:
    path, traffic = control
    run = Path(path).name.removesuffix(".sock")
    states: list[dict[str, Any]] = []

    async def follow() -> None:
        async def seen(state: dict[str, Any]) -> None:
            states.append(state)

        watching = asyncio.create_task(tap_control.watch(run, seen))
        async with asyncio.timeout(5):
            while not states:  # the state as it was when the watch began
                await asyncio.sleep(0.01)
        answer = await tap_control.command(run, {"op": "rules", "rules": [{"method": "ping"}]})
        assert answer["state"]["rules"][0]["method"] == "ping"
        with pytest.raises(tap_control.TapRefused, match="unknown command"):
            await tap_control.command(run, {"op": "nothing"})
        async with asyncio.timeout(5):
            while not any(s["rules"] for s in states):
                await asyncio.sleep(0.01)
        watching.cancel()
        with pytest.raises(tap_control.TapUnreachable):
            await tap_control.command("1700000000000-43-0123abcd", {"op": "state"})
        with pytest.raises(tap_control.TapUnreachable):
            await tap_control.command("../../etc/x", {"op": "state"})

    with override_settings(DATA_DIR=str(tmp_path)):
        asyncio.run(follow())
    assert states[0]["rules"] == [] and states[-1]["rules"][0]["method"] == "ping"


def test_every_tab_is_sent_the_held_cards_with_their_count_and_the_rules() -> None:
    session = McpSession(name="tap", transport_name="tap")
    held = {"id": 7, "direction": "out", "kind": "request", "method": "tools/call", "name": "echo"}
    held |= {"rpc_id": 3, "raw": json.dumps(CALL), "size": 90, "cut": False, "wall": 0.0}
    rule = {"direction": "out", "method": "tools/call", "name": "", "query": None, "text": ""}
    faults = {"latency": {"in": {"ms": 500, "jitter": 0}}}
    state = {"version": 2, "rules": [rule], "faults": faults, "held": [held]}
    html = render_live(session, state)
    assert 'id="tap-held"' in html and 'data-count="1"' in html and 'id="held-7"' in html
    assert "Answer with an error" in html and "&quot;echo&quot;" in html  # the raw JSON, escaped
    assert "Pause on host → server, method tools/call" in html and "500 ms added server → host" in html
    gone = render_live(session, {})
    assert 'data-count="0"' in gone and "The tap is not running" in gone
