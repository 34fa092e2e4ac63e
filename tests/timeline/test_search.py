"""Search across sessions: full text over the whole frame, OR and parentheses, and clear refusals."""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from support.teams import team_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.timeline import fulltext
from sessions.timeline.search import results

pytestmark = pytest.mark.django_db

# A tool result far beyond the 300-character preview, the word after an escaped newline at its end.
BIG_TEXT = "lorem ipsum " * 50_000 + "first line\nneedlework in the haystack"


def _store(session: McpSession, *frames: Frame) -> list[TimelineFrame]:
    """Record frames as the runtime would, numbered on from the session's last."""
    start = TimelineFrame.objects.filter(session=session).count() + 1
    rows = []
    for seq, frame in enumerate(frames, start=start):
        frame.seq = seq
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    return TimelineFrame.objects.bulk_create(rows)


def message(direction: str, body: dict[str, Any]) -> Frame:
    frame = Frame("message", direction, json.dumps(body).encode(), message=body)  # type: ignore[arg-type]
    frame.rpc_kind = "result" if "result" in body else "request" if "id" in body else "notification"
    frame.method = body.get("method")
    frame.rpc_id = body.get("id")
    return frame


def call(tool: str, rpc_id: int) -> Frame:
    params = {"name": tool, "arguments": {}}
    return message("out", {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params})


def answer(rpc_id: int, text: str) -> Frame:
    result = {"content": [{"type": "text", "text": text}]}
    return message("in", {"jsonrpc": "2.0", "id": rpc_id, "result": result})


def seqs(owner: User, q: str) -> list[int]:
    found = results(McpSession.objects.filter(team=team_of(owner)), q)
    assert not found["query"].problems, found["query"].problems
    return sorted(f.seq for f in found["rows"])


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def session(alice: User) -> McpSession:
    return McpSession.objects.create(owner=alice, team=team_of(alice), name="everything")


def test_a_word_deep_inside_a_big_tool_result_is_found_and_so_are_its_prefix_and_a_phrase(
    alice: User, session: McpSession
) -> None:
    _store(session, call("haystack", 1), answer(1, BIG_TEXT), answer(2, "nothing to see"))
    assert seqs(alice, "needlework") == [2]
    assert seqs(alice, "NEEDLE") == [2]  # a word matches the words it begins, in any case
    assert seqs(alice, '"in the haystack"') == [2]
    assert seqs(alice, '"the in haystack"') == []
    assert seqs(alice, "haystack") == [1, 2]  # the tool's name in the request, the word in the result
    assert seqs(alice, "needlework haystack nothing") == []
    bob = User.objects.create_user("bob")
    assert seqs(bob, "needlework") == []


def test_stderr_lines_notes_and_text_that_is_not_json_are_searched_too(
    alice: User, session: McpSession
) -> None:
    stderr = Frame("stderr", "in", b"Traceback: \xff\xfe ZeroDivisionError in handler")
    exit_frame = Frame("exit", "local", note="process exited with code 3")
    garbage = Frame("message", "in", b"{not json at all: frobnicate")
    _store(session, stderr, exit_frame, garbage)
    assert seqs(alice, "zerodivisionerror") == [1]
    assert seqs(alice, '"exited with code"') == [2]
    assert seqs(alice, "frobnicate") == [3]


def test_or_joins_field_terms_and_words_and_parentheses_group_them(alice: User, session: McpSession) -> None:
    listed = message("out", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    read = message("out", {"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "a://b"}})
    _store(session, call("alpha", 1), answer(1, "apple"), listed, read, answer(4, "banana"))
    assert seqs(alice, "method:tools/list OR method:resources/read") == [3, 4]
    assert seqs(alice, "apple OR banana") == [2, 5]
    assert seqs(alice, "(apple OR banana) dir:in") == [2, 5]
    assert seqs(alice, "dir:out (method:tools/call OR banana)") == [1]


@pytest.mark.parametrize(
    ("q", "says"),
    [
        ('"needle in', "is never closed"),
        ('method:"tools/call', "is never closed"),
        ("colour:red", "colour: is not a field"),
        ("latency:>fast", "latency: needs > or < and milliseconds"),
        ("latency:100", "latency: needs > or < and milliseconds"),
        ("status:weird", "use status:error or status:violation"),
        ("method:tools/list OR", "OR needs a term on each side"),
        ("(apple OR banana", "is never closed"),
        ("apple)", "has no ( before it"),
        ("needle\x00", "NUL"),
        ("{}", "no letters or digits"),
    ],
)
def test_a_query_that_cannot_be_read_is_a_400_saying_what_is_wrong(alice: User, q: str, says: str) -> None:
    client = Client()
    client.force_login(alice)
    response = client.get("/search", {"q": q})
    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert says in page
    assert "matching frame" not in page


def test_the_page_shows_matches_for_a_good_query(alice: User, session: McpSession) -> None:
    _store(session, call("haystack", 1), answer(1, BIG_TEXT))
    client = Client()
    client.force_login(alice)
    response = client.get("/search", {"q": "needlework OR nothing"})
    assert response.status_code == 200
    assert "1 matching frame" in response.content.decode()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the FTS5 index of the embedded set-up")
def test_frames_recorded_after_a_search_are_indexed_by_the_next_and_deleted_ones_leave_the_index(
    alice: User, session: McpSession
) -> None:
    _store(session, answer(1, "early bird"))
    assert seqs(alice, "bird") == [1]
    _store(session, answer(2, "late bird"))
    assert fulltext.catch_up() == 1 and fulltext.catch_up() == 0
    assert seqs(alice, "bird") == [1, 2]
    other = McpSession.objects.create(owner=alice, team=team_of(alice), name="other")
    _store(other, answer(1, "bird of passage"))
    assert seqs(alice, "passage") == [1]
    session.delete()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rowid FROM {fulltext.INDEX} WHERE {fulltext.INDEX} MATCH 'bird'")
        indexed = {row[0] for row in cursor.fetchall()}
    assert indexed == set(TimelineFrame.objects.values_list("pk", flat=True))  # only other's frame
