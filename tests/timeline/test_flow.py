"""The message flow's pairing and nesting (sessions/timeline/flow.py), over rows as stored."""

from __future__ import annotations

import json
from typing import Any

from sessions.timeline.flow import Call, FlowState, batch_members


def row(
    seq: int,
    direction: str,
    rpc_kind: str,
    method: str = "",
    rpc_id: Any = None,
    *,
    pair: int | None = None,
    latency: float | None = None,
    params: dict[str, Any] | None = None,
    stream: str = "",
    kind: str = "message",
) -> dict[str, Any]:
    """A stored row's summary fields (what a window or a live batch carries)."""
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if method and rpc_kind in ("request", "notification"):
        body["method"] = method
    if params is not None:
        body["params"] = params
    return {
        "seq": seq, "kind": kind, "direction": direction, "wall": 1000.0 + seq / 10, "method": method,
        "rpc_id": json.dumps(rpc_id) if rpc_id is not None else "", "rpc_kind": rpc_kind,
        "pair_seq": pair, "latency_ms": latency, "preview": json.dumps(body)[:300], "note": "",
        "transport": {"http": {"stream": stream, "status": 200}} if stream else {},
    }  # fmt: skip


def test_a_request_and_its_response_pair_both_ways_with_the_latency() -> None:
    items = FlowState().feed(
        [
            row(1, "out", "request", "tools/list", 1),
            row(2, "in", "result", "tools/list", 1, pair=1, latency=4.5),
        ]
    )
    assert (items[0].pairs, items[1].pairs) == ([2], [1])
    assert items[1].latency_ms == 4.5
    assert (items[0].shape, items[1].shape, items[1].method) == ("request", "response", "tools/list")
    # The server's activation bar runs from the request down to its answer, then ends.
    assert [i.server_busy for i in items] == [1, 1]
    assert all(i.depth == 0 for i in items)


def test_a_server_request_sits_inside_the_call_it_came_during_with_the_clients_answer() -> None:
    state = FlowState()
    items = state.feed(
        [
            row(1, "out", "request", "tools/call", 1),
            row(2, "in", "request", "sampling/createMessage", 0),
            row(3, "out", "result", "sampling/createMessage", 0, pair=2),
            row(4, "in", "result", "tools/call", 1, pair=1, latency=900.0),
            row(5, "in", "request", "ping", 1),
        ]
    )
    sampling, answer, done, ping = items[1:]
    assert (sampling.parent, sampling.root, sampling.depth, sampling.how) == (1, 1, 1, "time")
    assert (answer.parent, answer.depth, answer.pairs) == (1, 1, [2])
    assert answer.latency_ms == 100.0  # the client's answer: from the rows' clocks
    assert (done.parent, done.depth, done.pairs, done.root) == (None, 0, [1], 1)
    assert (sampling.client_busy, sampling.server_busy) == (1, 1)
    assert (done.client_busy, done.server_busy) == (0, 1)
    assert (ping.parent, ping.depth) == (None, 0)  # nothing open: not inside anything
    assert state.open == [Call(5, "in", "1", "ping", 1000.5, root=5)]


def test_the_http_stream_names_the_call_even_when_a_newer_one_is_open() -> None:
    # The second connection: its frame 0 is stored as seq 10, so "POST #1" is seq 11.
    items = FlowState(base=10).feed(
        [
            row(11, "out", "request", "tools/call", 1),
            row(12, "out", "request", "tools/call", 2),
            row(13, "in", "request", "elicitation/create", 0, stream="POST #1"),
            row(14, "in", "notification", "notifications/message", stream="POST #2"),
            row(15, "in", "request", "roots/list", 1, stream="GET stream"),
        ]
    )
    assert (items[2].parent, items[2].how) == (11, "stream")
    assert (items[3].parent, items[3].how, items[3].depth) == (12, "stream", 1)
    assert items[4].parent is None  # the standalone GET stream carries what no request caused


def test_by_time_with_several_calls_open_the_newest_is_assumed_and_said_so() -> None:
    items = FlowState().feed(
        [
            row(1, "out", "request", "tools/call", 1),
            row(2, "out", "request", "tools/call", 2),
            row(3, "in", "request", "sampling/createMessage", 0),
        ]
    )
    assert (items[2].parent, items[2].ambiguous) == (2, 2)
    assert "newest is assumed" in items[2].why


def test_out_of_order_responses_each_find_their_own_request() -> None:
    items = FlowState().feed(
        [
            row(1, "out", "request", "tools/call", 1),
            row(2, "out", "request", "resources/read", 2),
            row(3, "in", "result", "resources/read", 2, pair=2),
            row(4, "in", "error", "tools/call", 1, pair=1),
        ]
    )
    assert (items[0].pairs, items[1].pairs) == ([4], [3])
    assert (items[2].pairs, items[3].pairs) == ([2], [1])
    assert items[3].shape == "error"
    assert [i.server_busy for i in items] == [1, 2, 2, 1]


def test_a_response_that_answers_no_request_is_marked() -> None:
    (item,) = FlowState().feed([row(1, "in", "result", "", 99)])
    assert item.orphan and item.pairs == []


def test_a_late_answer_to_a_cancelled_request_is_joined_to_it() -> None:
    state = FlowState()
    items = state.feed(
        [
            row(1, "out", "request", "tools/call", 7),
            row(2, "out", "notification", "notifications/cancelled", params={"requestId": 7}),
            row(3, "in", "request", "roots/list", 0),
            row(4, "in", "result", "", 7),
        ]
    )
    assert (items[1].parent, items[1].how, items[1].server_busy) == (1, "cancel", 1)
    assert items[2].parent is None  # the call was given up: nothing is inside it any more
    assert (items[3].pairs, items[3].how, items[3].orphan) == ([1], "late", False)


def test_progress_is_inside_the_call_its_token_names() -> None:
    items = FlowState().feed(
        [
            row(1, "out", "request", "tools/call", 3),
            row(2, "out", "request", "tools/call", 4),
            row(
                3, "in", "notification", "notifications/progress", params={"progressToken": 3, "progress": 1}
            ),
            row(4, "in", "notification", "notifications/message", params={"level": "info"}),
        ]
    )
    assert (items[2].parent, items[2].how) == (1, "progress")
    assert items[3].parent is None  # over stdio a log line is not guessed into a call


def test_a_batch_answers_each_request_it_carries() -> None:
    raw = json.dumps([{"jsonrpc": "2.0", "id": 1, "result": {}}, {"jsonrpc": "2.0", "id": 2, "error": {}}])
    members = batch_members(raw.encode())
    assert members == [("response", "1"), ("response", "2")]
    state = FlowState(batches={3: members})
    items = state.feed(
        [
            row(1, "out", "request", "tools/list", 1),
            row(2, "out", "request", "prompts/list", 2),
            row(3, "in", "batch"),
        ]
    )
    assert items[2].pairs == [1, 2]
    assert (items[2].server_busy, state.open) == (2, [])
    assert batch_members(b'[1, {"id": true}, {}]') == [] and batch_members(b"{") == []


def test_a_window_starts_with_the_calls_open_before_it_and_answers_found_after_it() -> None:
    state = FlowState(answers={20: (40, 12.0)})
    state.seed([Call(5, "out", "1", "tools/call", 1000.0, root=5)])
    items = state.feed(
        [row(20, "out", "request", "ping", 2), row(21, "in", "request", "sampling/createMessage", 0)]
    )
    assert (items[0].pairs, items[0].latency_ms) == ([40], 12.0)
    assert (items[1].parent, items[1].root) == (20, 20)  # the newest open call
    assert items[1].client_busy == 1 and items[1].server_busy == 2


def test_http_exchanges_and_the_process_lane_are_placed_beside_the_messages() -> None:
    connecting = row(1, "local", "", kind="state") | {
        "transport": {"state": "connecting"}, "note": "opening stdio transport"
    }  # fmt: skip
    http = row(8, "in", "", kind="http") | {"transport": {"http": {"status": 200, "request_seq": 2}}}
    priming = row(9, "in", "", kind="http", stream="POST #2")
    state = FlowState(base=5)
    items = state.feed([connecting, http, priming, row(10, "local", "", kind="stderr")])
    assert [i.lane for i in items] == ["side", "http", "http", "side"]
    assert state.base == 0 and items[1].pairs == items[2].pairs == [2]


def app_row(
    seq: int, direction: str, what: str, message: dict[str, Any], caused: Any = None
) -> dict[str, Any]:
    """A view↔host message as the host records it: a local state frame."""
    app: dict[str, Any] = {"view": "ui://v", "direction": direction, "what": what}
    if caused is not None:
        app["caused"] = caused
    return {
        **row(seq, "local", "", kind="state"),
        "preview": json.dumps({"jsonrpc": "2.0", **message})[:300],
        "transport": {"state": "app-message", "app": app},
    }


def test_view_host_messages_have_a_lane_and_the_hosts_answer_points_at_the_view_and_the_server_call() -> None:
    items = FlowState().feed(
        [
            app_row(1, "in", "tools/call", {"id": 2, "method": "tools/call"}),
            row(2, "out", "request", "tools/call", 9),
            row(3, "in", "result", "tools/call", 9, pair=2),
            app_row(4, "out", "result #2", {"id": 2, "result": {}}, caused=9),
            app_row(5, "in", "ui/notifications/size-changed", {"method": "ui/notifications/size-changed"}),
            app_row(6, "out", "result #5", {"id": 5, "result": {}}),  # answers nothing the view asked
        ]
    )
    assert [i.lane for i in items] == ["app", "message", "message", "app", "app", "app"]
    assert [i.shape for i in items if i.lane == "app"] == ["request", "response", "notification", "response"]
    assert items[3].pairs == [1, 2]
    assert items[5].pairs == []
