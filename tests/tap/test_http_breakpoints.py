"""Breakpoints, faults and books of the HTTP tap, in process: what its gates decide about one message,
how a stream is cut into events for them, and two hosts on one tap judged apart."""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from inspector.tap import parse_args
from inspector.tap._gate import TrafficError
from inspector.tap._http_gate import EventCutter, HttpTraffic, event_data, with_data
from inspector.tap._http_spool import HttpSpool

UPSTREAM = "http://127.0.0.1:9001/mcp"
CALL = {
    "jsonrpc": "2.0",
    "id": 3,
    "method": "tools/call",
    "params": {"name": "echo", "arguments": {"m": "a"}},
}


def body(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode()


# --- SSE events -------------------------------------------------------------------------------------


def test_a_stream_is_cut_into_whole_events_and_an_event_begun_before_passes_as_it_is() -> None:
    cutter = EventCutter()
    cutter.passed(b'id: 1\ndata: {"a"')  # forwarded before any gate was asked
    pieces = cutter.cut(b":1}\n\nid: 2\ndata: x\n\nid: 3\nda")
    assert pieces == [(b":1}\n\n", False), (b"id: 2\ndata: x\n\n", True)]
    assert cutter.cut(b"ta: y\r\n\r\n") == [(b"id: 3\ndata: y\r\n\r\n", True)]
    fresh = EventCutter()
    assert fresh.cut(b"data: z\n") == [] and fresh.cut(b"\n") == [(b"data: z\n\n", True)]


def test_only_message_events_carry_a_message_and_an_edit_keeps_the_events_id() -> None:
    assert event_data(b"event: message\nid: 7\ndata: {}\n\n") == b"{}"
    assert event_data(b"id: 7\ndata: a\ndata: b\n\n") == b"a\nb"
    assert event_data(b"event: endpoint\ndata: /m\n\n") is None and event_data(b": ping\n\n") is None
    assert (
        with_data(b"event: message\nid: 7\ndata: {}\n\n", b'{"x":1}')
        == b'event: message\nid: 7\ndata: {"x":1}\n\n'
    )


# --- gates --------------------------------------------------------------------------------------------


def decide(traffic: HttpTraffic, direction: str, raw: bytes, then: Any = None) -> Any:
    """Run a gate's decision in a loop; ``then(traffic)`` runs in another thread (the control channel)."""

    async def go() -> Any:
        task = asyncio.ensure_future(traffic.http[direction].decide(raw))
        if then is not None:
            while not traffic.held:
                await asyncio.sleep(0.01)
            await asyncio.to_thread(then, traffic)
        return await asyncio.wait_for(task, 5)

    return asyncio.run(go())


def test_a_held_post_edited_by_a_person_goes_on_edited_and_keeps_its_original() -> None:
    traffic = HttpTraffic(queue.SimpleQueue())
    traffic.set_rules([{"direction": "out", "method": "tools/call"}])
    edited = {**CALL, "params": {"name": "echo", "arguments": {"m": "edited"}}}

    def edit(t: HttpTraffic) -> None:
        held = next(iter(t.held))
        assert t.snapshot()["held"][0]["raw"] == body(CALL).decode()
        t.release(held, "edit", "alice", raw=json.dumps(edited, indent=2))

    verdict = decide(traffic, "out", body(CALL), edit)
    assert verdict.action == "forward" and json.loads(verdict.body) == edited and b"\n" not in verdict.body
    assert verdict.change.original == body(CALL) and "edited by alice" in verdict.change.sent_note
    assert traffic.held == {}


def test_a_held_post_dropped_or_answered_with_an_error_never_goes_on() -> None:
    traffic = HttpTraffic(queue.SimpleQueue())
    traffic.set_rules([{"method": "tools/call"}])
    dropped = decide(traffic, "out", body(CALL), lambda t: t.release(next(iter(t.held)), "drop", "bob"))
    assert (dropped.action, dropped.kind) == ("drop", "request")
    answered = decide(
        traffic, "out", body(CALL), lambda t: t.release(next(iter(t.held)), "error", "bob", code=-32001)
    )
    assert answered.action == "answer" and json.loads(answered.body)["error"]["code"] == -32001
    assert json.loads(answered.body)["id"] == 3


def test_the_tap_answers_only_the_hosts_requests_itself() -> None:
    traffic = HttpTraffic(queue.SimpleQueue())
    traffic.set_rules([{"direction": "in"}])
    asked = {"jsonrpc": "2.0", "id": 9, "method": "sampling/createMessage", "params": {}}
    refused: list[str] = []

    def answer(t: HttpTraffic) -> None:
        held = next(iter(t.held))
        with pytest.raises(TrafficError, match="only the host's requests") as caught:
            t.release(held, "error", "bob")
        refused.append(str(caught.value))
        t.release(held, "forward", "bob")

    assert decide(traffic, "in", body(asked), answer).action == "forward" and refused


def test_faults_answer_a_method_drop_notifications_and_spoil_the_next_message_once() -> None:
    traffic = HttpTraffic(queue.SimpleQueue())
    traffic.set_faults({"errors": [{"method": "tools/call", "code": -32002}], "drop": {"in": 1}})
    answered = decide(traffic, "out", body(CALL))
    assert answered.action == "answer" and answered.change.fault["what"] == "error"
    note = body({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    assert decide(traffic, "in", note).action == "drop"
    traffic.set_faults({})
    traffic.once("truncate", "in")
    cut = decide(traffic, "in", note)
    assert cut.body == note[: len(note) // 2] and cut.change.fault["what"] == "truncate"
    assert decide(traffic, "in", note).body == note  # once only


def test_a_held_message_whose_exchange_ends_leaves_no_card() -> None:
    traffic = HttpTraffic(queue.SimpleQueue())
    traffic.set_rules([{"method": "tools/call"}])

    async def go() -> None:
        task = asyncio.ensure_future(traffic.http["out"].decide(body(CALL)))
        while not traffic.held:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert traffic.snapshot()["held"] == []


# --- books ------------------------------------------------------------------------------------------


ACCEPT = [(b"Accept", b"application/json, text/event-stream"), (b"Content-Type", b"application/json")]


def init(rpc_id: int) -> bytes:
    params = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "h", "version": "1"},
    }
    return body({"jsonrpc": "2.0", "id": rpc_id, "method": "initialize", "params": params})


def result(rpc_id: int) -> bytes:
    answer = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "s"}}
    return body({"jsonrpc": "2.0", "id": rpc_id, "result": answer})


def exchange(xid: int, sid: str | None, sent: bytes, answer: bytes | None, given: str = "") -> list[Any]:
    headers = [*ACCEPT, (b"MCP-Protocol-Version", b"2025-06-18")] if sid else list(ACCEPT)
    if sid:
        headers.append((b"Mcp-Session-Id", sid.encode()))
    head = [(b"Content-Type", b"application/json")] + ([(b"Mcp-Session-Id", given.encode())] if given else [])
    items: list[Any] = [("http-request", (xid, "POST", "/mcp", headers, sent))]
    if answer is None:
        return [*items, ("http-response", (xid, 202, "Accepted", [])), ("http-end", (xid, None, False))]
    return [
        *items,
        ("http-response", (xid, 200, "OK", head)),
        ("http-chunk", (xid, answer)),
        ("http-end", (xid, None, False)),
    ]


def test_two_hosts_on_one_tap_are_two_sessions_each_judged_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INSPECTOR_DATA_DIR", str(tmp_path / "data"))
    record = tmp_path / "record.jsonl"
    initialized = body({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listed = body({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = body({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}})
    items = [
        ("http-start", "http://127.0.0.1:7000/mcp"),
        *exchange(1, None, init(1), result(1), given="clean"),
        *exchange(2, "clean", initialized, None),
        *exchange(3, None, init(1), result(1), given="rude"),  # a second host starts its own session
        *exchange(4, "clean", listed, tools),  # the clean host, initialized long ago
        *exchange(5, "rude", listed, tools),  # the rude one never said it was initialized
        ("http-stop", "the tap stopped"),
    ]
    queued: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for i, (what, payload) in enumerate(items):
        queued.put((what, payload, 1000.0 + i, 10.0 + i))
    queued.put(None)
    options = parse_args(["--listen", "127.0.0.1:7000", "--name", "web", "--record", str(record), UPSTREAM])
    thread = threading.Thread(target=HttpSpool(options, queued).run)
    thread.start()
    thread.join(10)
    spools = sorted((tmp_path / "data" / "taps").glob("*.jsonl"), key=lambda p: len(p.name))
    sessions = {}
    for path in (record, tmp_path / "record-2.jsonl", *spools):
        frames = [json.loads(line) for line in path.read_text().splitlines()]
        assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))  # a session's own sequence
        assert (
            frames[0]["transport"]["state"] == "connecting" and frames[-1]["transport"]["state"] == "closed"
        )
        sids = {(f["transport"].get("http") or {}).get("headers", {}).get("Mcp-Session-Id") for f in frames}
        sessions[path.name] = (frames[0]["transport"]["tap"], sids - {None}, frames)
    assert [n for n in sessions if n.startswith("record")] == ["record.jsonl", "record-2.jsonl"]
    first, second = sessions[spools[0].name], sessions[spools[1].name]
    assert first[1] == {"clean"} and second[1] == {"rude"}  # never mixed
    assert first[0]["name"] == "web" and second[0]["name"] == "web #2"
    assert second[0]["run"] == spools[1].name.removesuffix(".jsonl") == first[0]["run"] + "-2"
    assert second[0]["control"] == first[0]["run"]
    assert [f["raw"] for f in sessions["record-2.jsonl"][2]] == [f["raw"] for f in second[2]]
    clean = [v["code"] for f in first[2] for v in f["verdicts"] if f["direction"] == "out"]
    rude = [v["code"] for f in second[2] for v in f["verdicts"] if f["direction"] == "out"]
    assert clean == [] and "client-before-initialized" in rude


def spool_sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, items: list[Any]) -> list[list[Any]]:
    """The frames of each session the HTTP tap's spool writes for ``items``, the tap's first."""
    monkeypatch.setenv("INSPECTOR_DATA_DIR", str(tmp_path / "data"))
    queued: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for i, (what, payload) in enumerate([("http-start", "http://127.0.0.1:7000/mcp"), *items]):
        queued.put((what, payload, 1000.0 + i, 10.0 + i))
    queued.put(None)
    HttpSpool(parse_args(["--listen", "127.0.0.1:7000", UPSTREAM]), queued).run()
    spools = sorted((tmp_path / "data" / "taps").glob("*.jsonl"), key=lambda p: (len(p.name), p.name))
    return [[json.loads(line) for line in p.read_text().splitlines()] for p in spools]


def test_two_hosts_initializing_at_once_keep_their_own_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = exchange(1, None, init(1), result(1), given="a"), exchange(2, None, init(1), result(1), given="b")
    items = [a[0], b[0], *a[1:], *b[1:]]  # both initialize before either is answered
    items += exchange(3, "a", body({"jsonrpc": "2.0", "method": "notifications/initialized"}), None)
    items += exchange(4, "b", body({"jsonrpc": "2.0", "method": "notifications/initialized"}), None)
    sessions = spool_sessions(tmp_path, monkeypatch, items)
    sids = [
        {(f["transport"].get("http") or {}).get("headers", {}).get("Mcp-Session-Id") for f in s} - {None}
        for s in sessions
    ]
    assert sids == [{"a"}, {"b"}]


def test_an_initialize_refused_for_authorization_and_tried_again_is_one_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    challenge = [(b"WWW-Authenticate", b'Bearer resource_metadata="http://127.0.0.1:9001/.well-known/x"')]
    items: list[Any] = [
        ("http-request", (1, "POST", "/mcp", list(ACCEPT), init(1))),
        ("http-response", (1, 401, "Unauthorized", challenge)),
        ("http-end", (1, None, False)),
        ("http-request", (2, "GET", "/.well-known/x", [], b"")),
        ("http-response", (2, 200, "OK", [(b"Content-Type", b"application/json")])),
        ("http-chunk", (2, b"{}")),
        ("http-end", (2, None, False)),
        *exchange(3, None, init(1), result(1), given="s"),
    ]
    sessions = spool_sessions(tmp_path, monkeypatch, items)
    assert len(sessions) == 1
    assert [f["method"] for f in sessions[0] if f["direction"] == "out" and f["kind"] == "message"] == [
        "initialize",
        "initialize",
    ]


def test_a_host_session_starts_when_its_first_request_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    items: list[Any] = [
        *exchange(1, None, init(1), result(1), given="a"),
        *exchange(2, None, init(1), result(1), given="b"),
        ("http-stop", "the tap stopped"),
    ]
    first, second = spool_sessions(tmp_path, monkeypatch, items)
    assert first[-1]["note"] == second[-1]["note"] == "the tap stopped"
    assert second[0]["wall"] == second[1]["wall"] == 1005.0  # the initialize that opened it, not later


def test_two_hosts_of_a_legacy_sse_server_are_two_sessions_by_their_streams_endpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sse = [(b"Content-Type", b"text/event-stream")]

    def stream(xid: int, n: int) -> list[Any]:
        return [
            ("http-request", (xid, "GET", "/mcp", [(b"Accept", b"text/event-stream")], b"")),
            ("http-response", (xid, 200, "OK", sse)),
            ("http-chunk", (xid, f"event: endpoint\ndata: /messages?s={n}\n\n".encode())),
        ]

    def posted(xid: int, n: int, sent: bytes) -> list[Any]:
        headers = [(b"Content-Type", b"application/json")]
        return [
            ("http-request", (xid, "POST", f"/messages?s={n}", headers, sent)),
            ("http-response", (xid, 202, "Accepted", [])),
            ("http-end", (xid, None, False)),
        ]

    items = [
        *stream(1, 1),
        *stream(2, 2),  # a second host opens its stream before the first initializes
        *posted(3, 1, init(1)),
        *posted(4, 2, init(1)),
        ("http-chunk", (2, b"event: message\ndata: " + result(1) + b"\n\n")),
        ("http-chunk", (1, b"event: message\ndata: " + result(1) + b"\n\n")),
        *posted(5, 2, body({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})),
    ]
    first, second = spool_sessions(tmp_path, monkeypatch, items)

    def posts(frames: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [
            (f["method"], f["transport"]["http"]["url"].rsplit("=", 1)[1])
            for f in frames
            if f["direction"] == "out" and f["kind"] == "message"
        ]

    assert posts(first) == [("initialize", "1")]
    assert posts(second) == [("initialize", "2"), ("tools/list", "2")]
    for frames in (first, second):  # each session's answer came on its own stream, paired
        answer = next(f for f in frames if f["direction"] == "in" and f["method"] == "initialize")
        assert answer["pair_seq"] is not None
    assert "client-before-initialized" in [v["code"] for f in second for v in f["verdicts"]]
