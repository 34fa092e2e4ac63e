"""A big session's page stays fast (issue 10): every query the session page and its Conformance tab
make finds its frames through an index that fits it, never by reading every frame's row; and the
counts the database now does for the Conformance report and plots are the ones Python made before."""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import BigIntegerField, Count
from django.db.models.functions import Cast
from django.test import Client
from django.utils import timezone
from support.teams import team_of

from sessions.engine import Frame, Verdict
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.timeline import conformance, plots
from sessions.timeline.capabilities import USED, usage_counts

FRAMES_TABLE = TimelineFrame._meta.db_table
# Plans that read a bounded part of a session's frames, or only an index's narrow entries.
NARROW = (
    re.compile(r"USING COVERING INDEX \w+"),  # the index alone, not the rows (raw bytes and all)
    re.compile(r"USING INDEX \w+ \(session_id=\? AND "),  # a range within the session: seq, rpc_id, method
    re.compile(r"USING INDEX (frame_state|frame_flagged) "),  # partial indexes of the few frames they hold
)
# By seq, with a LIMIT: the newest frames, when every frame counts; a method's frames walked this way
# are looked for among all of the session's (a few tools/list frames among 100,000).
NEWEST = re.compile(r"USING INDEX sqlite_autoindex_\w+ \(session_id=\?\)")


def _session(person: User, calls: int, seed: int = 7) -> McpSession:
    """A closed session of ``calls`` tools/calls with progress, logs, errors and verdicts, stored as
    the recorder stores frames (``frame_row``), over about an hour of wall time."""
    rng = random.Random(seed)
    session = McpSession.objects.create(
        owner=person,
        team=team_of(person),
        name="big",
        status="closed",
        protocol_version="2025-11-25",
        server_capabilities={"tools": {}, "logging": {}},
        ended=timezone.now(),
    )
    frames: list[Frame] = []
    wall = 1_800_000_000.0

    def add(frame: Frame) -> Frame:
        frame.seq, frame.wall, frame.mono = len(frames) + 1, wall, wall
        frames.append(frame)
        return frame

    def message(direction: str, body: dict[str, Any], **fields: Any) -> Frame:
        frame = Frame("message", direction, json.dumps(body).encode(), message=body)  # type: ignore[arg-type]
        for name, value in fields.items():
            setattr(frame, name, value)
        return add(frame)

    add(Frame("state", "local", transport={"state": "connecting"}, note="opening"))
    add(Frame("state", "local", transport={"state": "ready"}, note="ready"))
    methods = ("tools/call", "tools/call", "tools/call", "ping", "resources/read", "")
    for i in range(calls):
        wall += rng.expovariate(1 / 3.6)
        method = methods[i % len(methods)]
        request = message("out", {"jsonrpc": "2.0", "id": i, "method": method or "x"}, rpc_kind="request")
        request.method, request.rpc_id = method, i
        wall += 0.01
        log = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}}
        message("in", log, rpc_kind="notification", method="notifications/message")
        latency = round(rng.lognormvariate(2, 1.5), 3) if i % 17 else 12.0  # some ties
        wall += latency / 1000
        error = i % 9 == 0
        body = {
            "jsonrpc": "2.0",
            "id": i,
            **({"error": {"code": -1, "message": "no"}} if error else {"result": {}}),
        }
        answer = message(
            "in", body, rpc_kind="error" if error else "result", method=method, rpc_id=i,
            pair_seq=request.seq, latency_ms=latency,
        )  # fmt: skip
        if i % 13 == 0:
            answer.verdicts.append(Verdict("invalid-error", "error", "error must have an integer code"))
    TimelineFrame.insert_rows(session.pk, [frame_row(f, 0) for f in frames])
    session.last_seq = len(frames)
    session.save(update_fields=["last_seq"])
    return session


def _page_statements(client: Client, session: McpSession) -> list[tuple[str, Any]]:
    """Every statement on the frames table that the session page and its Conformance tab run."""
    statements: list[tuple[str, Any]] = []

    def keep(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if FRAMES_TABLE in sql:
            statements.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        for path in ("", "?tab=conformance", "panel/conformance"):
            assert client.get(f"/s/{session.public_id}/{path}").status_code == 200
    return statements


@pytest.mark.django_db
def test_the_session_page_and_its_conformance_tab_read_no_frame_they_do_not_need() -> None:
    alice = User.objects.create(username="alice")
    session = _session(alice, 300)
    client = Client()
    client.force_login(alice)
    statements = _page_statements(client, session)
    if connection.vendor == "sqlite":
        # The indexes made for these queries are the ones they use.
        assert {"frame_method_use", "frame_flagged", "frame_answer", "frame_wall"} <= _sqlite_indexes(
            statements
        )
    else:  # PostgreSQL's planner picks among them by its own costs; none reads the whole table
        assert {"frame_method_use", "frame_flagged"} <= _postgres_indexes(statements)


def _sqlite_indexes(statements: list[tuple[str, Any]]) -> set[str]:
    """The indexes SQLite's plans read the frames through; no plan may scan the table or every row."""
    used: set[str] = set()
    for sql, params in statements:
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
            plan = [str(row[-1]) for row in cursor.fetchall()]
        for step in (s for s in plan if FRAMES_TABLE in s):
            used.update(re.findall(r"INDEX (\w+)", step))
            assert not step.startswith("SCAN"), f"reads every frame of the table: {step}\n{sql}"
            newest = (
                NEWEST.search(step)
                and "LIMIT" in sql
                and '"method" =' not in sql
                and not any("FOR ORDER BY" in s for s in plan)
            )
            assert newest or any(p.search(step) for p in NARROW), f"reads every frame's row: {step}\n{sql}"
    return used


def _postgres_indexes(statements: list[tuple[str, Any]]) -> set[str]:
    """The same on PostgreSQL: with sequential scans priced out (300 frames fit a page), no plan reads
    the frames table in full; the indexes its plans use."""
    used: set[str] = set()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for sql, params in statements:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(str(row[0]) for row in cursor.fetchall())
            assert f"Seq Scan on {FRAMES_TABLE}" not in plan, (
                f"reads every frame of the table:\n{plan}\n{sql}"
            )
            used.update(re.findall(r"(?:using|Bitmap Index Scan on) (\w+)", plan))
    return used


@pytest.mark.django_db
def test_the_latency_table_counted_by_the_database_is_the_one_python_made(monkeypatch: Any) -> None:
    alice = User.objects.create(username="alice")
    session = _session(alice, 240)
    answers = TimelineFrame.objects.filter(session=session, direction="in", latency_ms__isnull=False)

    def by_python(scan: int) -> list[dict[str, Any]]:
        newest = answers.order_by("-seq").values_list("method", "latency_ms", "is_error")[:scan]
        return conformance.summarize_latency(list(newest))

    rows, capped = conformance.latency_rows(session)
    assert rows == by_python(conformance.SCAN) and not capped
    assert {r["method"] for r in rows} == {"tools/call", "ping", "resources/read", "?"}
    monkeypatch.setattr(conformance, "SCAN", 100)  # the newest 100 answers only
    rows, capped = conformance.latency_rows(session)
    assert rows == by_python(100) and capped and sum(r["calls"] for r in rows) == 100
    # An answer whose method is "?" and one without a method are one row, as summarize_latency has it.
    answers.filter(method="resources/read").update(method="?")
    monkeypatch.setattr(conformance, "SCAN", 50_000)
    assert conformance.latency_rows(session)[0] == by_python(50_000)
    scope = TimelineFrame.objects.filter(session=session, seq__lte=300)  # a share's scope
    expected = conformance.summarize_latency(
        list(
            scope.filter(direction="in", latency_ms__isnull=False).values_list(
                "method", "latency_ms", "is_error"
            )
        )
    )
    assert conformance.latency_rows(session, scope)[0] == expected


@pytest.mark.django_db
def test_the_plots_counted_by_the_database_are_the_ones_python_made_from_each_frame() -> None:
    alice = User.objects.create(username="alice")
    session = _session(alice, 400)
    for scope in (None, TimelineFrame.objects.filter(session=session, seq__range=(200, 900))):
        frames = TimelineFrame.objects.filter(session=session) if scope is None else scope
        drawn = plots.plots(session, scope)
        per_second: dict[int, int] = {}
        answers: dict[tuple[int, int], int] = {}
        per_method: dict[tuple[str, int], int] = {}
        # A frame's second is its wall time's whole seconds; an answer's, the database's cast (which
        # rounds on PostgreSQL, as the plots' docstring says).
        rows = frames.annotate(second=Cast("wall", BigIntegerField()))
        for wall, second, direction, latency, method in rows.values_list(
            "wall", "second", "direction", "latency_ms", "method"
        ):
            per_second[math.floor(wall)] = per_second.get(math.floor(wall), 0) + 1
            if direction == "in" and latency is not None:
                key = (second, plots.bucket_of(latency))
                answers[key] = answers.get(key, 0) + 1
                per_method[method, key[1]] = per_method.get((method, key[1]), 0) + 1
        assert repr(drawn["fps"]) == repr(plots.frames_per_second(per_second.items()))
        heat = plots.latency_over_time((s, b, n) for (s, b), n in answers.items())
        assert repr(drawn["latency_heatmap"]) == repr(heat)
        methods = plots.latency_by_method((m, b, n) for (m, b), n in per_method.items())
        assert repr(drawn["latency_methods"]) == repr(methods)
    empty = plots.plots(session, TimelineFrame.objects.filter(session=session, seq__gt=10**9))
    assert (empty["fps"], empty["latency_heatmap"], empty["latency_methods"]) == (None, None, [])


@pytest.mark.django_db
def test_the_use_counts_read_per_method_are_the_grouped_ones_the_table_shows() -> None:
    alice = User.objects.create(username="alice")
    session = _session(alice, 120)
    TimelineFrame.objects.filter(session=session, method="ping").update(method="roots/list", direction="in")
    for scope in (None, TimelineFrame.objects.filter(session=session, seq__lte=200)):
        frames = TimelineFrame.objects.filter(session=session) if scope is None else scope
        grouped = (
            frames.filter(kind="message", rpc_kind__in=("request", "notification"))
            .order_by()
            .values_list("direction", "method")
            .annotate(n=Count("pk"))
        )
        expected = {(d, m): n for d, m, n in grouped if (d, m) in set(USED)}
        assert usage_counts(session, scope) == expected
        assert ("out", "tools/call") in expected and ("in", "roots/list") in expected
