"""The session page's instruments, as pure functions and over stored frames: the capability table,
the lifecycle bar, the plots' bucketing, the time filters; and that a 100,000-frame session's pages
take a bounded number of queries."""

from __future__ import annotations

import html
import json
import time
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from support.teams import team_of

from sessions.frames import ROW_FIELDS
from sessions.models import McpSession, TimelineFrame
from sessions.templatetags.instrument import clock, duration_ms, since, svg_number
from sessions.timeline.capabilities import capability_rows, toggles_of, usage_counts
from sessions.timeline.lifecycle import Phase, lifecycle, segments
from sessions.timeline.plots import (
    BUCKETS,
    bucket_of,
    frames_per_second,
    latency_by_method,
    latency_over_time,
    plots,
)

EVERYTHING_CLIENT = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}, "url": {}}}
EVERYTHING_SERVER = {
    "tools": {"listChanged": True},
    "prompts": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "logging": {},
    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
    "completions": {},
}


def rows_by_path(revision: str, client: Any, server: Any, usage: Any = None, toggles: Any = None) -> dict:
    found = capability_rows(revision, client, server, toggles or toggles_of({}), usage or {})
    return {row.path: row for row in found}


# --- the capability table ------------------------------------------------------------------------


def test_each_revision_has_the_capabilities_it_defines() -> None:
    oldest = rows_by_path("2024-11-05", {}, {})
    assert "elicitation" not in oldest and "completions" not in oldest and "tasks" not in oldest
    assert {"roots", "roots.listChanged", "sampling", "logging", "resources.subscribe"} <= set(oldest)
    assert "completions" in rows_by_path("2025-03-26", {}, {})
    june = rows_by_path("2025-06-18", {}, {})
    assert "elicitation" in june and "elicitation.form" not in june
    november = rows_by_path("2025-11-25", {}, {})
    assert {"elicitation.url", "sampling.tools", "tasks.list", "tasks.requests.tools.call"} <= set(november)
    stateless = rows_by_path("2026-07-28", {}, {})
    assert "extensions" in stateless and "tasks" not in stateless and "roots.listChanged" not in stateless


def test_a_row_says_who_declared_it_and_shows_the_toggles_the_client_connected_with() -> None:
    toggles = toggles_of({"capabilities": {"elicitation_url": False}})
    client = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}}}
    rows = rows_by_path("2025-11-25", client, EVERYTHING_SERVER, toggles=toggles)
    assert (rows["roots"].client, rows["roots"].server) == ("declared", "")
    assert (rows["tools.listChanged"].client, rows["tools.listChanged"].server) == ("", "declared")
    assert rows["elicitation.url"].client == "not declared"
    assert rows["elicitation.url"].toggles == [("elicitation_url", False)]
    assert rows["elicitation.form"].toggles == [("elicitation_form", True)]
    # Both sides may declare tasks.list; only the server did.
    assert (rows["tasks.list"].client, rows["tasks.list"].server) == ("not declared", "declared")
    assert rows["tasks"].toggles == [("tasks", True)]
    # 2025-06-18 has one elicitation capability, which either toggle declares.
    june = rows_by_path("2025-06-18", {"elicitation": {}}, {})
    assert june["elicitation"].toggles == [("elicitation_form", True), ("elicitation_url", True)]


def test_the_apps_extension_is_a_declared_member_of_extensions_on_2025_11_25_with_its_toggle() -> None:
    ui = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}
    rows = rows_by_path("2025-11-25", ui, {})
    assert rows["extensions"].known and rows["extensions"].client == "declared"
    member = rows["extensions.io.modelcontextprotocol/ui"]
    assert member.known and member.client == "declared" and member.toggles == [("apps", True)]
    # Switched off, nothing declares it: the toggle shows on the extensions row.
    off = rows_by_path("2025-11-25", {}, {}, toggles={**toggles_of({}), "apps": False})
    assert "extensions.io.modelcontextprotocol/ui" not in off
    assert off["extensions"].toggles == [("apps", False)]


def test_subcapabilities_follow_their_capability_and_nest_deeper() -> None:
    rows = capability_rows("2025-11-25", EVERYTHING_CLIENT, EVERYTHING_SERVER, toggles_of({}), {})
    paths = [row.path for row in rows]
    assert paths.index("resources") < paths.index("resources.subscribe") < paths.index("tools")
    call = next(row for row in rows if row.path == "tasks.requests.tools.call")
    assert call.depth == 3 and call.name == "call"


def test_use_is_counted_and_a_use_nobody_declared_is_a_mismatch() -> None:
    usage = {
        ("out", "resources/subscribe"): 3,
        ("in", "notifications/resources/updated"): 1,
        ("in", "roots/list"): 2,
        ("in", "notifications/prompts/list_changed"): 1,
        ("out", "completion/complete"): 1,
    }
    server = {"resources": {"subscribe": True}, "prompts": {}}
    rows = rows_by_path("2025-11-25", {"sampling": {}}, server, usage)
    assert rows["resources.subscribe"].used == ["3 subscriptions", "1 update"]
    assert rows["resources.subscribe"].mismatches == []
    assert rows["roots"].mismatches == [
        "the server sent roots/list ×2 though the client did not declare roots"
    ]
    assert rows["prompts.listChanged"].mismatches == [
        "the server sent notifications/prompts/list_changed ×1 though the server did not declare "
        "prompts.listChanged"
    ]
    assert rows["completions"].mismatches == [
        "the client sent completion/complete ×1 though the server did not declare completions"
    ]


def test_what_a_side_declared_beyond_the_revision_is_a_row_too() -> None:
    server = {
        "experimental": {"com.example/feature.v2": {"on": True}},
        "madeUp": {"deeper": {"still": 1}},
        "logging": {},
    }
    rows = rows_by_path("2025-11-25", {"extensions": {"io.x/y": {}}}, server)
    member = rows["experimental.com.example/feature.v2"]  # a name with dots is one capability
    assert (member.server, member.known, member.depth) == ("declared", True, 1)
    assert not rows["madeUp"].known and rows["madeUp.deeper.still"].value == 1
    # Not in 2025-11-25's schema, yet where hosts declare extensions (MCP Apps): not flagged.
    assert rows["extensions"].known and rows["extensions.io.x/y"].known
    hostile: dict[str, Any] = {}
    level = hostile
    for _ in range(1000):
        level["x"] = {}
        level = level["x"]
    deep = capability_rows("2025-11-25", {}, hostile, {}, {})
    assert max(row.depth for row in deep) < 6


# --- the lifecycle bar ---------------------------------------------------------------------------

T = 1_800_000_000.0


def test_phases_become_segments_to_scale_and_the_live_one_runs_until_now() -> None:
    phases = [
        Phase(T, "connecting", seq=1),
        Phase(T + 1, "initializing", seq=3),
        Phase(T + 3, "ready", seq=8),
    ]
    bar = segments(phases, "ready", "", T, None, now=T + 4)
    assert [(s.state, s.ms) for s in bar.segments] == [
        ("connecting", 1000.0),
        ("initializing", 2000.0),
        ("ready", 1000.0),
    ]
    assert [round(s.x) for s in bar.segments] == [0, 25, 75]
    assert sum(s.width for s in bar.segments) == pytest.approx(100)
    assert bar.segments[-1].ongoing and bar.runs == 1


def test_a_start_up_that_failed_before_any_frame_ends_failed_not_starting() -> None:
    bar = segments([], "failed", "cannot connect: no command", T, T + 0.5, now=T + 60)
    assert [(s.state, s.inferred) for s in bar.segments] == [("starting", False), ("failed", True)]
    assert bar.segments[0].ms == 500 and bar.segments[-1].note == "cannot connect: no command"
    assert not any(s.ongoing for s in bar.segments)


def test_a_failure_is_the_end_of_its_run_whatever_the_engine_closes_after() -> None:
    phases = [
        Phase(T, "connecting", seq=1),
        Phase(T + 0.1, "initializing", seq=3),
        Phase(T + 0.2, "failed", "the server process exited with code 3", seq=6),
        Phase(T + 0.21, "failed", "initialize failed", seq=7),
        Phase(T + 0.22, "closed", "closed (exit code 3)", seq=8),
    ]
    bar = segments(phases, "failed", "connecting failed", T, T + 0.3, now=T + 60)
    assert [s.state for s in bar.segments] == ["connecting", "initializing", "failed"]
    assert bar.segments[-1].note == "the server process exited with code 3"


def test_a_reconnect_is_a_second_run_after_the_closed_phase() -> None:
    phases = [
        Phase(T, "connecting", seq=1),
        Phase(T + 1, "ready", seq=8),
        Phase(T + 2, "closing", seq=14),
        Phase(T + 2.5, "closed", seq=18),
        Phase(T + 5, "connecting", seq=19),
        Phase(T + 6, "ready", seq=26),
    ]
    bar = segments(phases, "ready", "", T, None, now=T + 8)
    assert bar.runs == 2
    assert [(s.state, s.run, s.ms) for s in bar.segments][3:5] == [
        ("closed", 0, 2500.0),
        ("connecting", 1, 1000.0),
    ]


def test_a_reconnect_after_an_unrecorded_end_shows_a_closed_phase_all_the_same() -> None:
    phases = [
        Phase(T, "connecting"),
        Phase(T + 1, "ready"),
        Phase(T + 5, "connecting"),
        Phase(T + 6, "ready"),
    ]
    bar = segments(phases, "closed", "", T, T + 7, now=T + 60)
    states = [(s.state, s.inferred) for s in bar.segments]
    assert states[:4] == [("connecting", False), ("ready", False), ("closed", True), ("connecting", False)]
    assert states[-1] == ("closed", True)  # ended: its end was not recorded either
    assert bar.segments[1].ms == 4000


# --- plots ---------------------------------------------------------------------------------------


def test_latencies_fall_in_log_spaced_buckets() -> None:
    assert [bucket_of(v) for v in (0, 0.09, 0.1, 0.99, 1, 9.9, 10, 999, 1000, 60_000, 1e9)] == [
        0, 0, 1, 3, 4, 6, 7, 12, 13, 18, 18,
    ]  # fmt: skip
    assert bucket_of(1e9) == BUCKETS - 1


def test_latency_by_method_orders_methods_by_answers_with_the_buckets_of_their_percentiles() -> None:
    answers = [("tools/call", float(ms)) for ms in range(1, 101)] + [("ping", 0.5), ("", 3.0)]
    counts: dict[tuple[str, int], int] = {}
    for method, latency in answers:
        counts[method, bucket_of(latency)] = counts.get((method, bucket_of(latency)), 0) + 1
    rows = latency_by_method([(m, b, n) for (m, b), n in counts.items()], shown=2)
    assert [(r.method, r.count) for r in rows] == [("tools/call", 100), ("?", 1)]
    call = rows[0]
    assert (call.p50_bucket, call.p95_bucket) == (bucket_of(50.0), bucket_of(95.0))
    assert (call.p50, call.p95) == ("< 100 ms", "< 100 ms") and sum(call.buckets) == 100
    assert max(b.height for b in call.bars) == 10 and all(b.height >= 0.8 for b in call.bars)
    assert all(b.y + b.height == pytest.approx(10) for b in call.bars)
    slow = latency_by_method([("x", BUCKETS - 1, 1)])[0]
    assert slow.p95 == "≥ 1 min"


def test_latency_over_time_counts_answers_per_time_column_and_latency_bucket() -> None:
    assert latency_over_time([]) is None
    assert latency_over_time([(100, -1, 50)]) is None  # frames, but no answer among them
    counts = [(100, bucket_of(5), 2), (105, bucket_of(5), 1), (119, bucket_of(500), 1), (110, -1, 9)]
    heat = latency_over_time(counts, bins=10)
    assert heat is not None and heat.most == 2 and heat.bins == 10 and heat.column_ms == 2000
    cells = {(c.x, c.y): c.count for c in heat.cells}
    top = BUCKETS - 1
    assert cells == {(0, top - bucket_of(5)): 2, (2, top - bucket_of(5)): 1, (9, top - bucket_of(500)): 1}
    assert max(c.opacity for c in heat.cells) == pytest.approx(1)


def test_frames_per_second_are_rebinned_to_a_bounded_number_of_bars() -> None:
    assert frames_per_second([]) is None
    short = frames_per_second([(100, 5), (102, 10)])
    assert short is not None and (short.bins, short.seconds, short.peak) == (3, 3, 10)
    assert [(b.x, b.rate) for b in short.bars] == [(0, 5), (2, 10)]
    long = frames_per_second([(s, 1) for s in range(0, 3600, 2)], bins=120)
    assert long is not None and long.bins <= 120 and long.bin_seconds == 30
    assert long.total == 1800 and long.peak == pytest.approx(0.5)


@pytest.mark.django_db
def test_the_database_counts_what_the_plots_show() -> None:
    alice = User.objects.create(username="alice")
    session = big_session(alice, 40)
    drawn = plots(session)
    (call,) = drawn["latency_methods"]
    assert call.method == "tools/call" and call.count == 40
    assert call.buckets == [0] * 4 + [1, 3, 5, 10, 21] + [0] * 10  # latencies 1..40 ms
    assert sum(c.count for c in drawn["latency_heatmap"].cells) == 40
    assert drawn["fps"].total == 82  # every frame, answers or not


# --- time filters --------------------------------------------------------------------------------


def test_durations_and_times_read_in_the_unit_that_fits() -> None:
    assert [duration_ms(v) for v in (0.42, 12.34, 742, 27196.9, 200_000, 7_500_000)] == [
        "0.42 ms", "12.3 ms", "742 ms", "27.2 s", "3 min 20 s", "2 h 5 min",
    ]  # fmt: skip
    assert duration_ms(None) == duration_ms("x") == duration_ms(float("nan")) == ""
    assert clock(T + 0.25) == "08:00:00.250"
    assert since(T + 1.5, T) == "+1.500 s" and since(T + 75, T) == "+1:15.000"
    assert since(T + 2, str(T)) == "+2.000 s"  # as {% firstof %} leaves the start
    assert since(T, "") == "" and svg_number(12.5) == "12.5" and svg_number(None) == "0"


# --- over stored frames --------------------------------------------------------------------------


def row(seq: int, wall: float, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "seq": seq, "kind": "message", "direction": "out", "wall": wall, "mono": wall, "method": "",
        "rpc_id": "", "rpc_kind": "", "pair_seq": None, "latency_ms": None, "size": 40, "raw": b"{}",
        "preview": "{}", "parse_error": "", "transport": {}, "verdicts": [], "worst": "", "note": "",
        "is_error": False, "uri": "", "level": "",
    }  # fmt: skip
    base.update(fields)
    assert set(base) == set(ROW_FIELDS)
    return base


def big_session(alice: User, calls: int) -> McpSession:
    """A closed session of ``calls`` tools/call exchanges (two frames each) over about 1,000 s."""
    session = McpSession.objects.create(
        owner=alice,
        team=team_of(alice),
        name="big",
        status="closed",
        protocol_version="2025-11-25",
        client_capabilities=EVERYTHING_CLIENT,
        server_capabilities=EVERYTHING_SERVER,
        ended=timezone.now(),
        phases=[{"state": "connecting", "note": "opening", "wall": T, "seq": 1}],
    )
    start = T
    rows = [
        row(1, start, kind="state", direction="local", transport={"state": "connecting"}, note="opening"),
        row(2, start + 0.5, kind="state", direction="local", transport={"state": "ready"}, note="ready"),
    ]
    for i in range(calls):
        wall = start + 1 + i * 1000 / calls
        seq = 3 + 2 * i
        rows.append(row(seq, wall, method="tools/call", rpc_id=str(i), rpc_kind="request"))
        rows.append(
            row(seq + 1, wall + 0.01, direction="in", method="tools/call", rpc_id=str(i), rpc_kind="result",
                pair_seq=seq, latency_ms=1 + (i % 500))
        )  # fmt: skip
    for at in range(0, len(rows), 5000):
        TimelineFrame.insert_rows(session.pk, rows[at : at + 5000])
    session.last_seq = rows[-1]["seq"]
    session.save(update_fields=["last_seq"])
    return session


@pytest.mark.django_db
def test_usage_and_lifecycle_are_read_from_the_stored_frames() -> None:
    alice = User.objects.create(username="alice")
    session = big_session(alice, 3)
    TimelineFrame.insert_rows(
        session.pk,
        [
            row(9, T + 900, direction="in", method="roots/list", rpc_id="0", rpc_kind="request"),
            row(10, T + 901, kind="state", direction="local", transport={"state": "closed"}),
        ],
    )
    assert usage_counts(session) == {("out", "tools/call"): 3, ("in", "roots/list"): 1}
    bar = lifecycle(session, now=time.time())
    assert [s.state for s in bar.segments] == ["connecting", "ready", "closed"]
    assert bar.segments[1].ms == pytest.approx(900_500)


@pytest.mark.django_db
@pytest.mark.slow
def test_a_100000_frame_sessions_overview_and_conformance_take_a_bounded_number_of_queries(
    django_assert_max_num_queries: Any,
) -> None:
    alice = User.objects.create(username="alice")
    session = big_session(alice, 50_000)
    client = Client()
    client.force_login(alice)
    timings = {}
    # The Conformance tab's counts each read an index (tests/timeline/test_big_session_queries.py): a few
    # more queries than one grouped pass over every row, none of them a row a frame.
    for tab, most in (("overview", 9), ("conformance", 12)):
        with django_assert_max_num_queries(most):
            page = client.get(f"/s/{session.public_id}/panel/{tab}")
        started = time.perf_counter()  # again, warm: templates compiled, the database's pages cached
        client.get(f"/s/{session.public_id}/panel/{tab}")
        timings[tab] = time.perf_counter() - started
        assert page.status_code == 200
    body = page.content.decode()
    assert 'id="plot-fps"' in body and "100002 frames" in body.replace(",", "")
    assert body.count('class="lm-method"') == 1
    print("panel render times on 100,000 frames:", json.dumps({k: round(v, 3) for k, v in timings.items()}))


@pytest.mark.django_db
def test_a_frames_detail_shows_its_http_headers_as_json_and_its_time() -> None:
    alice = User.objects.create(username="alice")
    session = big_session(alice, 1)
    http = {
        "http": {"method": "POST", "headers": {"content-type": "application/json", "mcp-session-id": "abc"}}
    }
    TimelineFrame.insert_rows(session.pk, [row(5, T + 2.5, kind="http", direction="out", transport=http)])
    client = Client()
    client.force_login(alice)
    page = client.get(f"/s/{session.public_id}/frames/5").content.decode()
    shown = html.unescape(page)
    assert '"content-type": "application/json"' in shown and "{'http'" not in shown
    assert "08:00:02.500 UTC" in shown and "+2.500 s since the start" in shown
    # Its timeline row has both times; the page shows one (instrument.js and instrument.css).
    body = client.get(f"/s/{session.public_id}/").content.decode()
    times = '<span class="t-rel">+2.500 s</span><span class="t-abs">08:00:02.500</span>'
    assert f'<span class="t">{times}</span>' in body
