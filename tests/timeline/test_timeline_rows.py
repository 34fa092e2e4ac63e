"""The timeline's rows, rendered by their template (sessions/_timeline_row.html) for every row shape the
app makes, odd stored values and hostile text; the pages and fragments that show rows; the live
pipeline's batches (sessions/web/feed.py), rendered once and picked from per filter. And the plots'
marks (heatmap cells, frames-per-second bars, latency bars: sessions/templatetags/instrument.py)
against the template loops they replaced."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template import Context, Template
from django.template.loader import render_to_string
from django.test import Client
from support.teams import team_of

from sessions.engine import Frame
from sessions.engine._frames import Verdict
from sessions.frames import frame_row, summary
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Note
from sessions.templatetags.instrument import fps_bars, heat_cells, method_bars
from sessions.timeline import plots
from sessions.timeline.queries import TimelineFilter, page_of_rows
from sessions.web import feed

START = 1_732_430_000.125
HOSTILE = [
    "<script>alert(1)</script>",
    "\"quoted\" 'single' & ampersand &amp; <b>",
    "NUL ␀ shown, then é, ü, 日本語, emoji 🦀, e\u0301 combining, zero\u200bwidth",
    "x" * 159 + "é" + "y" * 40,
    "a" * 160,
    "a" * 161,
    "e\u0301" * 200,
    "{{ not a template }} {% neither %}",
    "",
]


def rows_html(rows: Any, session: Any = None, t0: Any = None) -> str:
    """The rows as a page includes them."""
    return render_to_string("sessions/_timeline_rows.html", {"rows": rows, "session": session, "t0": t0})


def engine_rows() -> list[dict[str, Any]]:
    """Rows made the way the recorder makes them (frame_row, then a live batch's summary)."""
    frames: list[Frame] = []
    wall = START
    for i, text in enumerate(HOSTILE):
        body = {"jsonrpc": "2.0", "id": i, "method": f"tools/{text[:40]}", "params": {"text": text}}
        raw = json.dumps(body, ensure_ascii=False).encode()
        frame = Frame("message", "out", raw, wall=wall + i * 0.37, rpc_kind="request", method=body["method"])
        frame.rpc_id = [i, 1000 + i, None][i % 3]
        if frame.rpc_id is None:
            frame.rpc_kind, frame.method = "notification", f"notifications/{text[:20]}"
        frame.verdicts = [Verdict(f"R{i}<{text[:8]}>", "warning", text), Verdict("X&Y", "error", "a & b")]
        frames.append(frame)
        answer = Frame("message", "in", b'{"jsonrpc":"2.0","id":%d,"error":{"code":-1}}' % i, wall=wall + i)
        answer.rpc_kind, answer.rpc_id = "error", i
        answer.latency_ms = [None, 0, 0.004, 12.5, 742, 2e5][i % 6]
        frames.append(answer)
    frames += [
        Frame("stderr", "in", b"boom <b> & \x00 nul\n", wall=wall - 5, note="stderr line"),
        Frame("exit", "local", b"", wall=wall + 4000, note="exited with code 1 <&>"),
        Frame("state", "local", b"", wall=wall + 90, note="connected", transport={"state": "connected"}),
        Frame(
            "state",
            "local",
            b"",
            wall=wall + 1.5,
            transport={"state": "oauth", "oauth": {"step": 'token <exchange> & "go"'}},
        ),
        Frame("state", "local", b"", transport={"state": "oauth", "oauth": {}}),
        Frame("http", "out", b"", transport={"http": {"method": "POST", "url": "https://x/?a=<b>"}}),
        Frame("http", "in", b"x" * 5000, transport={"http": {"status": 401, "oauth": True}}),
        Frame("http", "in", b"x" * 3_000_000, transport={"http": {"status": None}}),
        Frame("http", "in", b"", transport={"http": {}}),
        Frame("http", "in", b"", transport={}),
        Frame("http", "out", b"", transport={"http": {"method": "<GET>", "oauth": "yes"}}),
        Frame("message", "in", b"not json \x00", parse_error="bad", rpc_kind="invalid"),
        Frame("message", "in", b'{"method":"notifications/message"}', rpc_kind="notification"),
    ]
    for seq, frame in enumerate(frames, start=1):
        frame.seq = seq
    rows = [summary(frame_row(f, 0)) for f in frames]
    for n, row in zip(itertools.cycle([0, 1, 2, 17]), rows, strict=False):
        row["notes"] = n
    return rows


def odd_rows() -> list[dict[str, Any]]:
    """Values stored rows could hold without the engine making them (imports, old rows), and a live
    batch's rows (no notes counted). Every row has the summary's fields (the template needed them)."""
    base = summary(frame_row(Frame("message", "in", b"{}", wall=START, seq=1), 0))
    variants: list[dict[str, Any]] = [
        base,
        {**base, "seq": 5},
        {**base, "method": "", "rpc_kind": "result", "note": "", "preview": "p"},
        {**base, "method": None, "note": None, "preview": None},
        {**base, "note": "a note wins over the preview", "preview": "preview"},
        {**base, "worst": "error", "rpc_kind": "error", "notes": 1},
        {**base, "latency_ms": 0},
        {**base, "latency_ms": 0.0},
        {**base, "latency_ms": None},
        {**base, "latency_ms": 1e20},
        {**base, "latency_ms": "12"},
        {**base, "size": 0},
        {**base, "size": 1023},
        {**base, "size": 1024},
        {**base, "size": 10**16},
        {**base, "size": None},
        {**base, "size": True},
        {**base, "size": 3.5},
        {**base, "wall": None},
        {**base, "wall": "bad"},
        {**base, "wall": START + 7200.5},
        {**base, "wall": START - 65},
        {**base, "wall": 1e300},
        {**base, "rpc_id": "0"},
        {**base, "rpc_id": 0},
        {**base, "rpc_id": '"<id> & co"'},
        {**base, "seq": 10**12, "notes": 10**6},
        {**base, "notes": True},
        {**base, "direction": "sideways"},
        {**base, "kind": "<kind>", "direction": "\"'"},
        {**base, "verdicts": None},
        {**base, "verdicts": [{"code": 5, "severity": None}]},
        {**base, "verdicts": [{}, "text", 3, ["a"]]},
        {**base, "verdicts": {"code": "a dict"}},
        {**base, "verdicts": "str"},
        {**base, "kind": "http", "transport": {"http": "not a dict"}},
        {**base, "kind": "http", "transport": {"http": {"method": 7, "status": 1.5}}},
        {**base, "kind": "http", "transport": ["http"]},
        {**base, "kind": "http", "transport": None},
        {**base, "kind": "state", "transport": {"state": "oauth", "oauth": {"step": None}}},
        {**base, "kind": "state", "transport": {"state": "oauth", "oauth": "step"}},
        {**base, "kind": "message", "method": "x", "transport": {"state": "oauth"}},
        {**base, "kind": None},
        {**base, "preview": 12345},
        {**base, "preview": "\n\t  spaced  \r"},
    ]
    return variants


@pytest.mark.parametrize("t0", [None, "", 0, START + 1, "1732430001.5"])
def test_every_row_shape_renders_as_a_row_of_its_own(t0: Any) -> None:
    session = McpSession(name="s", phases=[{"wall": START}])
    rows = engine_rows() + odd_rows()
    html = rows_html(rows, session, t0)
    assert html.count('role="listitem"') == len(rows)
    # The live path renders each row alone, the page all at once: the same bytes.
    assert "".join(feed.render_rows(rows, t0 or START)) == rows_html(rows, session, t0 or START)


def test_a_row_shows_what_a_person_reads() -> None:
    session = McpSession(phases=[{"wall": START}])
    html = rows_html(engine_rows(), session)
    assert '<span class="t-rel">+0.000 s</span>' in html and '<span class="seq">1</span>' in html
    assert (
        '<span class="dir" title="out">→</span>' in html and '<span class="dir" title="in">←</span>' in html
    )
    assert (
        '<span class="what" title="HTTP POST">HTTP POST</span>' in html
        and '<span class="what" title="OAuth HTTP 401">OAuth HTTP 401</span>' in html
    )
    assert '<span class="size" title="5000 bytes">4.9\xa0KB</span>' in html
    assert 'title="17 notes">✎17</span>' in html and 'title="1 note">✎1</span>' in html
    assert '<span class="lat">742 ms</span>' in html and '<span class="rid">#1001</span>' in html
    assert 'data-filter-rule="X&amp;Y"' in html and "worst-error" in html and "rpc-error" in html


def test_hostile_text_is_escaped() -> None:
    html = rows_html(engine_rows(), McpSession(phases=[{"wall": START}]))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&quot;quoted&quot; &#x27;single&#x27; &amp; ampersand &amp;amp; &lt;b&gt;" in html
    assert "\x00" not in html and "␀" in html
    cut = rows_html([{**engine_rows()[0], "preview": "a" * 161}])
    assert '<span class="preview">' + "a" * 159 + "…</span>" in cut
    what = "OAuth token &lt;exchange&gt; &amp; &quot;go&quot;"
    assert f'<span class="what" title="{what}">{what}</span>' in html


def test_the_fragments_that_carry_rows_swap_them_in_place() -> None:
    rows = engine_rows()
    expected = rows_html(rows, t0=START)
    appended = feed.appended(feed.render_rows(rows, START))
    assert appended == f'<div hx-swap-oob="rowsend:#timeline-rows" data-view="table">{expected}</div>\n'
    shared = {"rendered": [expected], "shared": {"base": "/shared/t/"}, "live": True}
    replaced = render_to_string("sessions/_timeline_replace.html", shared)
    assert 'data-frame-url="/shared/t/frames/0" hx-swap-oob="rows:#timeline-rows">' + expected in replaced


def test_a_batch_is_rendered_once_and_each_filter_picks_its_rows() -> None:
    rows = engine_rows()
    before = dict(feed.stats)
    batch = feed.Batch(rows, START, rows[-1]["seq"])
    assert feed.stats == before, "nothing rendered before a tab needs it"
    assert batch.message(TimelineFilter(), rows[-1]["seq"]) == batch.count and feed.stats == before
    errors = batch.message(TimelineFilter(errors=True), 0)
    failed = sum(1 for r in rows if r["is_error"])
    assert errors.count('role="listitem"') == failed > 0, "only the rows a tab shows are rendered"
    assert feed.stats["rows"] == before["rows"] + failed
    everything = batch.message(TimelineFilter(), 0)
    assert feed.stats["rows"] == before["rows"] + len(rows), "each row rendered once"
    assert everything is batch.message(TimelineFilter(), 0), "the same message, made once"
    assert everything.count('role="listitem"') == len(rows) and 'id="frame-count"' in everything
    later = batch.message(TimelineFilter(), rows[-3]["seq"])
    assert later.count('role="listitem"') == 2
    none = batch.message(TimelineFilter(method="nothing/matches"), 0)
    assert "listitem" not in none and 'id="frame-count"' in none
    assert feed.stats["rows"] == before["rows"] + len(rows), "picking re-renders nothing"


async def test_once_makes_an_answer_once_for_every_asker_and_forgets_a_failure() -> None:
    import asyncio

    made: list[int] = []
    gate = asyncio.Event()

    async def make() -> int:
        made.append(1)
        await gate.wait()
        return 42

    key = ("test", object())
    askers = [asyncio.ensure_future(feed.once(key, make)) for _ in range(20)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*askers) == [42] * 20 and made == [1]

    async def fail() -> int:
        raise ValueError("no")

    other = ("test", object())
    with pytest.raises(ValueError):
        await feed.once(other, fail)
    assert await feed.once(other, make) == 42, "a failure is not remembered"


@pytest.mark.django_db
def test_the_timeline_page_and_the_session_page_show_stored_rows() -> None:
    alice = User.objects.create(username="alice")
    team = team_of(alice)
    session = McpSession.objects.create(owner=alice, team=team, name="rows", phases=[{"wall": START}])
    stored = engine_rows()
    TimelineFrame.objects.bulk_create(
        [
            TimelineFrame(session=session, mono=1.0, **{k: v for k, v in r.items() if k != "notes"})
            for r in stored
        ]
    )
    Note.objects.bulk_create([Note(session=session, frame_seq=s, author=alice, text="n") for s in (1, 3, 3)])
    rows = page_of_rows(session, TimelineFilter())
    assert [r["notes"] for r in rows[:3]] == [1, 0, 2]
    client = Client()
    client.force_login(alice)
    page = client.get(f"/s/{session.public_id}/timeline")
    assert page.status_code == 200
    expected = rows_html(rows, session)
    assert page.content.decode() == expected
    whole = client.get(f"/s/{session.public_id}/").content.decode()
    assert expected in whole


# The loops the plot tags replaced, as the templates had them.
HEAT_LOOP = Template(
    '{% load instrument %}{% for cell in map.cells %}<rect class="cell" x="{{ cell.x }}" y="{{ cell.y }}"'
    ' width="1" height="1" fill-opacity="{{ cell.opacity|svg_number }}"><title>{{ cell.count }}</title>'
    "</rect>{% endfor %}"
)
FPS_LOOP = Template(
    '{% load instrument %}{% for bar in plot.bars %}<rect class="bar" x="{{ bar.x }}"'
    ' y="{{ bar.y|svg_number }}" width="0.9" height="{{ bar.height|svg_number }}">'
    '<title>{{ bar.rate|floatformat:"-1" }} frames/s</title></rect>{% endfor %}'
)
METHOD_LOOP = Template(
    '{% load instrument %}{% for bar in row.bars %}<rect class="bar" x="{{ bar.x }}.1"'
    ' y="{{ bar.y|svg_number }}" width="0.8" height="{{ bar.height|svg_number }}"><title>{{ bar.count }} from'
    " {{ bar.label }}</title></rect>{% endfor %}"
)


@pytest.mark.parametrize("seed", range(4))
def test_the_plots_marks_match_the_template_loops(seed: int) -> None:
    rng = random.Random(seed)
    start = 1_800_000_000 + rng.randint(0, 10**6)
    seconds = rng.choice([1, 7, 130, 3600, 90_000])
    per_second = {start + rng.randrange(seconds): rng.choice([1, 2, 3, 1000, 77_777]) for _ in range(400)}
    answers = [
        (start + rng.randrange(seconds), plots.bucket_of(rng.lognormvariate(2, 3)), rng.randint(1, 50))
        for _ in range(600)
    ]
    methods = [(rng.choice(["tools/call", "ping", '<odd & "method">', ""]), b, n) for _, b, n in answers]
    heat = plots.latency_over_time(answers)
    fps = plots.frames_per_second(per_second.items())
    assert heat is not None and fps is not None
    assert heat_cells(heat.cells) == HEAT_LOOP.render(Context({"map": heat}))
    assert fps_bars(fps.bars) == FPS_LOOP.render(Context({"plot": fps}))
    for row in plots.latency_by_method(methods):
        assert method_bars(row.bars) == METHOD_LOOP.render(Context({"row": row}))
    assert heat_cells([]) == fps_bars(None) == method_bars([]) == ""
