"""What makes a tool call, a connect and the CLI cheap (issue 10), held in place: each test fails
if the work it guards comes back (a query, a thread hop, an import)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from support.paths import REPO
from support.teams import team_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.runtime.store import close_connections, in_db_thread
from sessions.teams.access import session_with_role
from sessions.timeline.calls import call_context, recent_calls
from sessions.timeline.exports import CHUNK, jsonl_lines
from sessions.timeline.listings import find_tool
from sessions.timeline.replays import conversation_of


def _session(name: str = "alice") -> McpSession:
    person = User.objects.create(username=name)
    return McpSession.objects.create(owner=person, team=team_of(person), name="everything")


def _store(session: McpSession, first: int, *messages: tuple[str, dict[str, Any]]) -> None:
    """Record messages (direction, JSON-RPC body) as the runtime would, numbered from ``first``; a
    response takes the method of the request before it, as the engine pairs them."""
    rows = []
    method = None
    for seq, (direction, body) in enumerate(messages, start=first):
        frame = Frame("message", direction, json.dumps(body).encode(), seq=seq, message=body)  # type: ignore[arg-type]
        method = body.get("method") or method
        frame.method = method
        frame.rpc_id = body.get("id")
        frame.rpc_kind = "request" if frame.method and "id" in body else "result" if "result" in body else ""
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)


def _listing(session: McpSession, first: int, rpc_id: int, *names: str) -> None:
    tools = [{"name": n, "inputSchema": {"type": "object"}} for n in names]
    _store(
        session,
        first,
        ("out", {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/list"}),
        ("in", {"jsonrpc": "2.0", "id": rpc_id, "result": {"tools": tools}}),
    )


# --- a tool call's reads ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_session_and_the_persons_role_take_one_query(django_assert_num_queries: Any) -> None:
    session = _session()
    alice = User.objects.get(username="alice")
    with django_assert_num_queries(1):
        found = session_with_role(alice.pk, session.public_id)
    assert found is not None and found[0] == session and found[1] == "admin"
    stranger = User.objects.create(username="charlie")
    assert session_with_role(stranger.pk, session.public_id) is None


@pytest.mark.django_db
def test_a_logged_in_request_finds_its_login_without_reading_the_session_table(
    client: Any, django_assert_max_num_queries: Any
) -> None:
    session = _session()
    client.force_login(User.objects.get(username="alice"))
    client.get(f"/s/{session.public_id}/")
    with django_assert_max_num_queries(20) as queries:
        assert client.get(f"/s/{session.public_id}/").status_code == 200
    assert not [q for q in queries.captured_queries if "django_session" in q["sql"]]


@pytest.mark.django_db
def test_a_call_card_drawn_from_the_owners_outcome_reads_no_frame(django_assert_num_queries: Any) -> None:
    session = _session()
    outcome = {
        "rpc_id": 7,
        "method": "tools/call",
        "result": {"content": [{"type": "text", "text": "Echo: hi"}]},
        "request_seq": 11,
        "response_seq": 12,
        "latency_ms": 0.6,
        "size": 80,
        "verdicts": [],
        "note": None,
    }
    sent = {"method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}}
    with django_assert_num_queries(0):
        card = call_context(session, 7, outcome=outcome, sent=sent)
    assert (card["method"], card["request_seq"], card["response_seq"], card["latency_ms"]) == (
        "tools/call",
        11,
        12,
        0.6,
    )
    assert card["params"]["name"] == "echo" and not card["running"]
    assert json.loads(card["arguments_json"]) == {"name": "echo", "arguments": {"message": "hi"}}


@pytest.mark.django_db
def test_a_tool_is_found_in_the_newest_listing_and_a_new_listing_replaces_it() -> None:
    session = _session()
    assert find_tool(session, "echo") is None
    _listing(session, 1, 0, "echo", "add")
    assert find_tool(session, "add") == {"name": "add", "inputSchema": {"type": "object"}}
    _listing(session, 3, 1, "echo")  # the server dropped "add"
    assert find_tool(session, "add") is None
    assert find_tool(session, "echo") is not None


def _frames(session: McpSession, *frames: tuple[str, str, Any, dict[str, Any]]) -> None:
    """Record frames (direction, rpc_kind, id, body) in order, numbered from 1."""
    rows = []
    for seq, (direction, kind, rpc_id, body) in enumerate(frames, start=1):
        raw = json.dumps(body, separators=(",", ":")).encode()  # as the engine sends it
        frame = Frame("message", direction, raw, seq=seq, message=body)  # type: ignore[arg-type]
        frame.rpc_kind, frame.rpc_id, frame.method = kind, rpc_id, body.get("method")
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)


def _call(rpc_id: Any, method: str = "tools/call", **params: Any) -> tuple[str, str, Any, dict[str, Any]]:
    return ("out", "request", rpc_id, {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})


def _answer(rpc_id: Any, *, error: bool = False, text: str = "ok") -> tuple[str, str, Any, dict[str, Any]]:
    body = {"code": -32000, "message": text} if error else {"content": [{"type": "text", "text": text}]}
    kind = "error" if error else "result"
    return ("in", kind, rpc_id, {"jsonrpc": "2.0", "id": rpc_id, kind: body})


def _note(method: str, **params: Any) -> tuple[str, str, Any, dict[str, Any]]:
    direction = "out" if method == "notifications/cancelled" else "in"
    return (direction, "notification", None, {"jsonrpc": "2.0", "method": method, "params": params})


@pytest.mark.django_db
def test_the_session_pages_call_cards_are_read_at_once(
    django_assert_max_num_queries: Any,
) -> None:
    """recent_calls draws each card as call_context does, from a few queries for all of them."""
    session = _session()
    _frames(
        session,
        _call(0, "initialize"),
        _answer(0),
        _answer(9, text="an answer before its request"),
        _call(1, name="echo"),
        _note("notifications/progress", progressToken=1, progress=1, total=2),
        _answer(1),
        _call(2, name="fails"),
        _answer(2, error=True, text="<boom>"),
        _call(3, name="slow"),
        _note("notifications/cancelled", requestId=3),
        _call(4, name="never answered"),
        _note("notifications/progress", progressToken=4, progress=5, total=9),
        _call(5, "resources/read", uri="demo://big"),
        _answer(5, text="x" * (1 << 20)),
        _call(6, name="id used again by a ping"),
        _answer(6, text="first"),
        _call(6, "ping"),
        _answer(6, text="the ping's"),
        _call(7, name="before a reconnect"),
        _answer(7, text="old"),
        _call(7, name="after a reconnect"),
        _answer(7, text="new"),
        _call("abc", "prompts/get", name="p"),
        _answer("abc", text="a string id"),
        _call(9, name="answered twice"),
        _answer(9, text="first of two"),
        _answer(9, text="second of two"),
        _call(10, "tools/list"),
        _answer(10),
        _call(11, "completion/complete", ref={"type": "ref/prompt", "name": "p"}),
        _answer(11),
    )
    TimelineFrame.objects.create(
        session=session, seq=100, kind="message", direction="out", wall=1.0, mono=1.0, rpc_kind="request"
    )  # a recording's request without an id: no card (it was a 500)
    requests = (
        TimelineFrame.objects.filter(session=session, direction="out", rpc_kind="request")
        .exclude(method__in=("initialize", "ping", "completion/complete"))  # a form's lookups: no card
        .exclude(method__endswith="/list")
        .exclude(rpc_id="")
        .order_by("-seq")
    )
    for status in (McpSession.Status.CLOSED, McpSession.Status.READY):
        session.status = status
        expected = [call_context(session, json.loads(f.rpc_id)) for f in requests]
        assert len(expected) == 10
        # Three, and for each unanswered call a look for its cancelling (and its progress, live).
        with django_assert_max_num_queries(6):
            found = recent_calls(session, limit=20)
        assert found == expected
        assert recent_calls(session, limit=4) == expected[:3]  # the newest request, without an id, counts
    assert [c["response_seq"] for c in expected] == [26, 24, 22, 22, 18, 14, None, None, 8, 6]
    assert expected[5]["outcome"]["too_big"]["seq"] == 14 and expected[6]["progress"]["progress"] == 5
    assert expected[7]["outcome"]["error"]["message"] == "cancelled or timed out"


# --- the runtime's database thread ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_runtime_database_thread_keeps_its_connection_between_calls() -> None:
    @in_db_thread
    def current() -> int:
        connection.ensure_connection()
        return id(connection.connection)

    async def twice() -> tuple[int, int]:
        try:
            return await current(), await current()
        finally:
            await close_connections()

    first, second = asyncio.run(twice())
    assert first == second


# --- the JSON Lines export -------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_json_lines_export_sends_a_chunk_of_frames_at_a_time() -> None:
    session = _session()
    count = CHUNK + 10
    _store(session, 1, *[("in", {"jsonrpc": "2.0", "method": "notifications/message"})] * count)

    async def chunks() -> list[str]:
        return [chunk async for chunk in jsonl_lines(session)]

    sent = asyncio.run(chunks())
    assert len(sent) == 2
    assert [json.loads(line)["seq"] for line in "".join(sent).splitlines()] == list(range(1, count + 1))


# --- a replay's reading of a session ---------------------------------------------------------------------


@pytest.mark.django_db
def test_a_sessions_conversation_is_read_in_one_query_however_long(django_assert_num_queries: Any) -> None:
    session = _session()
    _store(session, 1, ("out", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
    _store(session, 2, *[("out", {"jsonrpc": "2.0", "id": n, "method": "ping"}) for n in range(2, 40)])
    with django_assert_num_queries(1):
        conversation = conversation_of(session)
    assert len(conversation.requests) == 38


# --- start-up ---------------------------------------------------------------------------------------------


def _python(code: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_warming_up_loads_the_schema_checks_before_any_handshake() -> None:
    code = (
        "import json, sys\n"
        "from sessions.engine import warm_up\n"
        "before = 'sessions.engine._schema' in sys.modules\n"
        "warm_up()\n"
        "print(json.dumps({'before': before, 'after': 'sessions.engine._schema' in sys.modules}))\n"
    )
    assert _python(code) == {"before": False, "after": True}


@pytest.mark.slow
def test_mcp_inspector_s_process_that_runs_sessions_collects_garbage_less_often() -> None:
    code = (
        "import gc, json\n"
        "from inspector.__main__ import GC_THRESHOLDS, tune_for_sessions\n"
        "before = gc.get_threshold()\n"
        "tune_for_sessions()\n"
        "print(json.dumps({'before': before, 'after': gc.get_threshold(), 'set': GC_THRESHOLDS}))\n"
    )
    found = _python(code)
    assert found["before"] == [700, 10, 10] and found["after"] == found["set"] != found["before"]


@pytest.mark.slow
def test_the_cli_loads_neither_django_nor_the_browser_opener() -> None:
    code = (
        "import json, sys\n"
        "from inspector.__main__ import main\n"
        "try:\n"
        "    main(['--cli', 'http://127.0.0.1:9/mcp', '--method', 'ping'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "heavy = sorted(loaded & {'django', 'channels', 'daphne', 'twisted', 'webbrowser'})\n"
        "print(json.dumps({'httpx': 'httpx' in sys.modules, 'heavy': heavy}))\n"
    )
    assert _python(code) == {"httpx": True, "heavy": []}
