"""The read side's queries over stored frames: the columns computed when a frame is recorded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from support.teams import team_of

from sessions.engine import Frame, app_frames
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.conformance import latency_rows
from sessions.timeline.queries import TimelineFilter, page_of_rows
from sessions.timeline.search import results

pytestmark = pytest.mark.django_db

LONG = "x" * 1000  # far beyond the 300-character preview


def _store(session: McpSession, *messages: tuple[str, dict[str, Any]]) -> None:
    """Record messages (direction, JSON-RPC body) as the runtime would, numbered from 1."""
    rows = []
    for seq, (direction, body) in enumerate(messages, start=1):
        frame = Frame("message", direction, json.dumps(body).encode(), seq=seq, message=body)  # type: ignore[arg-type]
        frame.rpc_kind = "result" if "result" in body else "error" if "error" in body else "notification"
        frame.method = body.get("method")
        frame.rpc_id = body.get("id")
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)


def _session() -> McpSession:
    alice = User.objects.create(username="alice")
    return McpSession.objects.create(owner=alice, team=team_of(alice), name="everything")


def test_a_tool_error_with_a_long_message_is_found_by_the_errors_filter_and_by_search() -> None:
    session = _session()
    _store(
        session,
        (
            "in",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"content": [{"type": "text", "text": LONG}], "isError": True},
            },
        ),
        ("in", {"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": LONG}]}}),
    )
    errors = TimelineFilter(errors=True)
    assert [r["seq"] for r in page_of_rows(session, errors)] == [1]
    assert [errors.matches(r) for r in page_of_rows(session, TimelineFilter())] == [True, False]
    assert [f.seq for f in results(McpSession.objects.filter(team=session.team), "status:error")["rows"]] == [
        1
    ]


def test_resource_and_log_frames_carry_their_uri_and_level() -> None:
    session = _session()
    uri = "demo://resource/" + LONG
    _store(
        session,
        ("in", {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}),
        (
            "in",
            {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "alert", "data": LONG}},
        ),
    )
    updated, logged = TimelineFrame.objects.filter(session=session).order_by("seq")
    assert (updated.uri, updated.level, updated.is_error) == (uri, "", False)
    assert (logged.uri, logged.level) == ("", "alert")


def test_latency_by_method_counts_a_result_with_is_error_as_an_error() -> None:
    session = _session()
    answers = [
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": True}},  # the tool failed
        {"jsonrpc": "2.0", "id": 2, "result": {"content": []}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "Unknown tool"}},
    ]
    rows = []
    for seq, body in enumerate(answers, start=1):
        frame = Frame("message", "in", json.dumps(body).encode(), seq=seq, message=body)  # type: ignore[arg-type]
        frame.rpc_kind = "error" if "error" in body else "result"
        frame.method, frame.rpc_id, frame.latency_ms = "tools/call", body["id"], 10.0 * seq
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)
    [row], _ = latency_rows(session)
    assert (row["method"], row["calls"], row["errors"]) == ("tools/call", 3, 2)
    [found] = results(McpSession.objects.filter(team=session.team), "method:tools/call")["latency_rows"]
    assert found["errors"] == 2  # the search page's table says the same


def test_the_view_host_filter_finds_only_the_messages_between_a_view_and_its_host() -> None:
    session = _session()
    _store(session, ("out", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}))
    batch = [{"direction": "in", "message": {"jsonrpc": "2.0", "id": 1, "method": "ui/initialize"}}]
    state = Frame("state", "local", seq=3, transport={"state": "ready"})
    frames = [*app_frames("ui://v", batch), state]
    for seq, frame in enumerate(frames, start=2):
        frame.seq = seq
    TimelineFrame.objects.bulk_create(TimelineFrame(session=session, **frame_row(f, 0)) for f in frames)
    apps = TimelineFilter.from_data({"apps": "1"})
    assert [r["seq"] for r in page_of_rows(session, apps)] == [2]
    assert [apps.matches(r) for r in page_of_rows(session, TimelineFilter())] == [False, True, False]
