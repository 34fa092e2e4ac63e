"""A window of the message flow over stored frames: bounded work on a 100,000-frame session."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from support.teams import team_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.flow_window import connection_base, flow_of
from sessions.timeline.queries import TimelineFilter, page_of_rows

pytestmark = pytest.mark.django_db

CYCLE = 10  # frames per tool call in the big session


def _frame(seq: int, direction: Any, kind: str, body: dict[str, Any], *, pair: int | None = None) -> Frame:
    frame = Frame("message", direction, json.dumps(body).encode(), seq=seq, wall=1000.0 + seq / 1000)
    frame.rpc_kind, frame.method, frame.rpc_id, frame.pair_seq = (
        kind,
        body.get("method"),
        body.get("id"),
        pair,
    )
    if pair is not None and direction == "in":
        frame.latency_ms = 9.0
    return frame


def _call(start: int, n: int) -> list[Frame]:
    """One tool call: the request, a sampling request and its answer, progress, the result."""
    progress = [
        _frame(start + 3 + k, "in", "notification", {
            "jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": n, "progress": k},
        })
        for k in range(CYCLE - 4)
    ]  # fmt: skip
    return [
        _frame(start, "out", "request", {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {}}),
        _frame(start + 1, "in", "request", {"jsonrpc": "2.0", "id": n, "method": "sampling/createMessage"}),
        _frame(start + 2, "out", "result", {"jsonrpc": "2.0", "id": n, "result": {}}, pair=start + 1),
        *progress,
        _frame(start + CYCLE - 1, "in", "result", {"jsonrpc": "2.0", "id": n, "result": {}}, pair=start),
    ]


def _session(calls: int) -> McpSession:
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="flood")
    for first in range(0, calls, 1000):
        frames = [f for n in range(first, min(first + 1000, calls)) for f in _call(n * CYCLE + 1, n)]
        TimelineFrame.insert_rows(session.pk, [frame_row(f, 0) for f in frames])
    McpSession.objects.filter(pk=session.pk).update(last_seq=calls * CYCLE)
    session.refresh_from_db()
    return session


def test_a_window_that_starts_inside_a_call_nests_what_came_inside_it() -> None:
    session = _session(30)
    # The window starts at seq 104: inside call 10 (seqs 101 to 110), after its sampling request.
    rows = page_of_rows(session, TimelineFilter(), after=103, limit=20)
    items, state = flow_of(session, rows)
    by_seq = {r["seq"]: i for r, i in zip(rows, items, strict=True)}
    assert (by_seq[104].parent, by_seq[104].how) == (101, "progress")
    assert (by_seq[110].pairs, by_seq[110].depth) == ([101], 0)
    assert (by_seq[112].parent, by_seq[112].depth) == (111, 1)  # sampling inside call 11
    assert by_seq[111].pairs == [120]
    # The last call is still open at the window's end (answered at 130): a live tab keeps it.
    assert [c.seq for c in state.open] == [121]
    # Its request's answer, after the window, is joined to it.
    assert by_seq[121].pairs == [130]


@pytest.mark.slow  # storing 100,000 frames takes about ten seconds
def test_the_flow_of_a_100000_frame_session_is_one_bounded_window(
    django_assert_max_num_queries: Any,
) -> None:
    session = _session(10_000)
    assert TimelineFrame.objects.filter(session=session).count() == 100_000
    client = Client()
    client.force_login(User.objects.get(username="alice"))
    page = f"/s/{session.public_id}/flow"
    for query in ("", "?before=50005", "?after=70003", "?method=tools/call", "?direction=in&before=99999"):
        with django_assert_max_num_queries(12):
            response = client.get(page + query)
        assert response.status_code == 200
        body = response.content.decode()
        rows = re.findall(r'<div class="frame flow-row', body)
        assert 0 < len(rows) <= 200, query
        assert len(body) < 400_000, (query, len(body))
    # The middle of the session: the window starts inside a call and still nests what it caused.
    body = client.get(page + "?after=50003").content.decode()
    assert 'id="f-50003"' not in body
    assert re.search(r'id="f-50004"[^>]*data-group="50001" data-parent="50001"', body)


def test_a_filter_or_a_page_parameter_that_is_not_a_number_is_a_400() -> None:
    session = _session(2)
    client = Client()
    client.force_login(User.objects.get(username="alice"))
    assert client.get(f"/s/{session.public_id}/flow?before=x").status_code == 400
    assert client.get(f"/s/{session.public_id}/flow?direction=sideways").status_code == 200


def test_an_http_stream_is_read_in_the_numbering_of_the_connection_that_carried_it() -> None:
    phases = [
        {"state": "connecting", "seq": 1, "wall": 1.0},
        {"state": "ready", "seq": 6, "wall": 2.0},
        {"state": "connecting", "seq": 41, "wall": 3.0},
    ]
    session = McpSession(phases=phases)
    assert [connection_base(session, seq) for seq in (1, 40, 41, 90)] == [0, 0, 40, 40]
    assert connection_base(McpSession(phases=[{"state": "connecting", "seq": "x"}, "junk"]), 5) == 0
