"""The exports read a session's frames as values, a batch at a time (sessions/timeline/exports.py): what
they write is byte for byte what a frame read as a model instance made (``record_line``; the frame
template the HTML export used), whatever the batches, raw and redacted."""

from __future__ import annotations

import asyncio
import json
import unicodedata
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template import engines
from django.template.defaultfilters import truncatechars
from support.teams import team_of

from sessions.engine import Frame
from sessions.frames import frame_row, pretty_json, record_line
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Note
from sessions.timeline import exports
from sessions.timeline.exports import _notes, document, jsonl_lines
from sessions.timeline.redaction import Redactor
from sessions.timeline.shown import truncated

CONFIG = {
    "transport": "http",
    "url": "https://mcp.example.com/mcp?api_key=URLSECRET123",
    "headers": {"Authorization": "Bearer HEADERSECRET456"},
}
# The template the HTML export rendered each frame with, before it wrote them in Python.
FRAMES_TEMPLATE = """\
{% for item in frames %}{% with f=item.f %}<li id="f-{{ f.seq }}"><details><summary class="frame kind-{{ f.kind }} dir-{{ f.direction }}{% if f.worst %} worst-{{ f.worst }}{% endif %}{% if f.rpc_kind == 'error' %} rpc-error{% endif %}"><span class="seq">{{ f.seq }}</span><span class="dir">{% if f.direction == 'out' %}→{% elif f.direction == 'in' %}←{% else %}•{% endif %}</span><span class="what">{% if f.kind == 'message' %}{{ f.method|default:f.rpc_kind }}{% else %}{{ f.kind }}{% endif %}</span><span class="rid">{% if f.rpc_id %}#{{ f.rpc_id }}{% endif %}</span><span class="lat">{% if f.latency_ms is not None %}{{ f.latency_ms|floatformat:1 }} ms{% endif %}</span><span class="size">{{ f.size|filesizeformat }}</span><span class="verdicts">{% for v in f.verdicts %}<span class="verdict sev-{{ v.severity }}">{{ v.code }}</span>{% endfor %}</span><span class="preview">{% if item.notes %}<span class="notes-mark">✎{{ item.notes|length }}</span> {% endif %}{{ f.note|default:f.preview|truncatechars:160 }}</span></summary>
{% if f.pair_seq %}<p>paired with <a href="#f-{{ f.pair_seq }}">#{{ f.pair_seq }}</a></p>{% endif %}
{% if f.verdicts %}<ul class="verdict-list">{% for v in f.verdicts %}<li class="sev-{{ v.severity }}"><strong>{{ v.code }}</strong> {{ v.message }}</li>{% endfor %}</ul>{% endif %}
{% if f.note %}<p class="note">{{ f.note }}</p>{% endif %}
{% if item.notes %}{% include "sessions/notes/_export.html" with notes=item.notes %}{% endif %}
{% if f.parse_error %}<p class="error">parse error: {{ f.parse_error }}</p>{% endif %}
{% if item.transport %}<pre>{{ item.transport }}</pre>{% endif %}
{% if item.body %}<pre class="{% if item.pretty %}json{% else %}raw{% endif %}">{{ item.body }}</pre>{% if item.cut %}<p class="muted">(cut at 64 KB; the JSONL export has every byte)</p>{% endif %}{% endif %}
</details></li>
{% endwith %}{% endfor %}
"""  # noqa: E501
HOSTILE = "<script>alert('x')</script> & \"quoted\" ünïcödé e\u0301 \u2028 \x7f 🔑"


def _frame(kind: str, direction: str, body: Any, **facts: Any) -> Frame:
    raw = (
        body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=facts.pop("ascii", True)).encode()
    )
    frame = Frame(kind, direction, raw, message=body if isinstance(body, dict) else None)  # type: ignore[arg-type]
    for name, value in facts.items():
        setattr(frame, name, value)
    return frame


def _session() -> McpSession:
    """A session whose frames hold everything a frame can: odd ids, bytes that are not UTF-8 or not
    JSON, verdicts, notes, transport details with secrets and non-ASCII, hostile text, a huge body."""
    person = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=person, team=team_of(person), name="odd", config=CONFIG)
    headers = {"Authorization": "Bearer HEADERSECRET456", "X-Name": "é", "Accept": "*/*"}
    http = {"http": {"status": 200, "stream": "POST", "event": "message", "event_id": "1-1"}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": {"progressToken": 1}}}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1}}
    result = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": HOSTILE}]}}
    error = {"jsonrpc": "2.0", "id": 'é-"x"', "error": {"code": -32600, "message": HOSTILE}}
    log = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": "é" * 200},
    }
    frames = [
        _frame("state", "local", b"", transport={"state": "starting"}, note=f"starting {HOSTILE}"),
        _frame(
            "message", "out", call, rpc_kind="request", method="tools/call", rpc_id=1,
            transport={"http": {"method": "POST", "url": CONFIG["url"], "headers": headers}},
        ),
        _frame("message", "in", progress, rpc_kind="notification", transport=http),
        _frame(
            "message", "in", result, rpc_kind="result", method="tools/call", rpc_id=1, pair_seq=2,
            latency_ms=12.345, ascii=False,
        ),
        _frame(
            "message", "in", error, rpc_kind="error", method="tools/call", rpc_id='é-"x"', latency_ms=0.0,
            verdicts=[], note="the key is URLSECRET123",
        ),
        _frame("message", "in", b"not json {token=abc", parse_error="Expecting <here>", rpc_kind="invalid"),
        _frame("stderr", "in", b"<b>\xff\xfe</b> api_key=HEADERSECRET456\n", transport={"stream": "x"}),
        _frame("message", "out", {"jsonrpc": "2.0", "id": -7, "method": "ping"}, rpc_id=-7),
        _frame(
            "message", "in", {"jsonrpc": "2.0", "id": "abc", "result": {"text": "x" * 70_000}},
            rpc_kind="result", rpc_id="abc", note="p" * 200,
        ),
        _frame("message", "in", log),
        _frame("exit", "local", b"", note="exit 1", transport={"list": [1, 2.5, None, True, {"a": []}]}),
    ]  # fmt: skip
    frames[4].flag("error-shape", "error", f"bad <{HOSTILE}>")
    frames[4].flag("note-this", "warning", "Authorization: Bearer HEADERSECRET456")
    for seq, frame in enumerate(frames, start=1):
        frame.seq = seq
    TimelineFrame.insert_rows(session.pk, [frame_row(frame, 0) for frame in frames])
    TimelineFrame.objects.filter(session=session, seq=11).update(mono=-1e-07, wall=1.5e9)
    TimelineFrame.objects.filter(session=session, seq=10).update(verdicts=["odd", {"severity": "info"}])
    McpSession.objects.filter(pk=session.pk).update(last_seq=len(frames))
    first = Note.objects.create(session=session, frame_seq=4, author=person, text=f"look {HOSTILE}")
    Note.objects.create(session=session, frame_seq=4, author=person, text="URLSECRET123 <b>", reply_to=first)
    Note.objects.create(session=session, frame_seq=9, author=None, text="orphan")
    return session


def _rows(session: McpSession) -> list[TimelineFrame]:
    return list(TimelineFrame.objects.filter(session=session).order_by("seq"))


def _old_item(row: TimelineFrame, redactor: Redactor | None, session: McpSession) -> str:
    """One frame's item as the template made it from a model instance (the old ``frame_view``)."""
    shown = row if redactor is None else redactor.frame(row)
    raw = bytes(shown.raw)
    pretty = pretty_json(raw)
    body = pretty or raw.decode("utf-8", errors="replace")
    notes = _notes(session, row.seq, row.seq).get(row.seq, [])
    for note in notes:
        note.text = note.text if redactor is None else redactor.text(note.text)
    view = {
        "f": shown,
        "body": body[: 64 * 1024],
        "cut": len(body) > 64 * 1024,
        "pretty": bool(pretty),
        "transport": json.dumps(shown.transport, indent=2, ensure_ascii=False) if shown.transport else "",
        "notes": notes,
    }
    return engines["django"].from_string(FRAMES_TEMPLATE).render({"frames": [view]})


def _collect(stream: Any) -> list[str]:
    async def run() -> list[str]:
        return [chunk async for chunk in stream]

    return asyncio.run(run())


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stepped", [True, False], ids=["stepped", "planned"])
@pytest.mark.parametrize("redacted", [False, True])
@pytest.mark.parametrize("batch", [(500, 256 * 1024), (3, 10**9), (4, 600)])
def test_the_json_lines_are_what_each_frame_made_alone_whatever_the_batches(
    monkeypatch: pytest.MonkeyPatch, redacted: bool, batch: tuple[int, int], stepped: bool
) -> None:
    monkeypatch.setattr(exports, "CHUNK", batch[0])
    monkeypatch.setattr(exports, "CHUNK_BYTES", batch[1])
    monkeypatch.setattr(exports, "PLAN", 5)
    if not stepped:  # cut as on PostgreSQL
        monkeypatch.setattr(exports, "_steps", lambda db: False)
    session = _session()
    redactor = Redactor.for_session(CONFIG) if redacted else None
    sent = _collect(jsonl_lines(session, redactor))
    expected = [record_line(row if redactor is None else redactor.frame(row)) for row in _rows(session)]
    assert "".join(sent) == "".join(expected)
    assert all(chunk.endswith("\n") for chunk in sent)  # every batch ends on a whole line
    if batch[0] == 3:
        # 11 frames, 3 a batch; planned, cut too where the sizes read (5 at a time) end
        assert len(sent) == (4 if stepped else 5)
    if batch[1] == 600:  # a batch of small frames, or one big frame alone
        assert len(sent) > 4 and all(len(chunk.encode()) < 4000 or chunk.count("\n") == 1 for chunk in sent)
    if redacted:
        assert not any(secret in "".join(sent) for secret in ("URLSECRET123", "HEADERSECRET456"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("redacted", [False, True])
def test_each_frame_of_the_html_file_is_what_the_template_made_of_it(
    monkeypatch: pytest.MonkeyPatch, redacted: bool
) -> None:
    monkeypatch.setattr(exports, "CHUNK", 1)
    session = _session()
    redactor = Redactor.for_session(CONFIG) if redacted else None
    sent = _collect(document(session, redactor))
    items = sent[1:-1]  # the head, a batch (here one frame) each, the end
    assert len(items) == 11
    for item, row in zip(items, _rows(session), strict=True):
        assert item == _old_item(row, redactor, session), row.seq
    html = "".join(sent)
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    if redacted:
        assert "URLSECRET123" not in html and "HEADERSECRET456" not in html


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stepped", [True, False], ids=["stepped", "planned"])
def test_a_big_session_is_read_a_bounded_batch_at_a_time(
    monkeypatch: pytest.MonkeyPatch, stepped: bool
) -> None:
    """No list of the whole session: each batch is at most CHUNK frames and CHUNK_BYTES of their bytes."""
    monkeypatch.setattr(exports, "CHUNK_BYTES", 20_000)
    if not stepped:
        monkeypatch.setattr(exports, "_steps", lambda db: False)
    person = User.objects.create(username="bob")
    session = McpSession.objects.create(owner=person, team=team_of(person), name="big")
    sizes = [100] * 700 + [50_000] * 3 + [100] * 10
    frames = [_frame("message", "in", b"x" * size) for size in sizes]
    for seq, frame in enumerate(frames, start=1):
        frame.seq = seq
    TimelineFrame.insert_rows(session.pk, [frame_row(frame, 0) for frame in frames])
    read: list[int] = []
    real = exports.Batches.next

    def counted(self: exports.Batches) -> list[tuple[Any, ...]]:
        rows = real(self)
        read.append(len(rows))
        return rows

    monkeypatch.setattr(exports.Batches, "next", counted)
    sent = _collect(jsonl_lines(session))
    assert [json.loads(line)["seq"] for line in "".join(sent).splitlines()] == list(range(1, len(sizes) + 1))
    assert max(read) <= exports.CHUNK and sum(read) == len(sizes)
    assert read[:4] == [200, 200, 200, 100]  # 100-byte frames, up to 20,000 bytes a batch
    assert read[4:7] == [1, 1, 1]  # a frame over the limit goes alone


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("redacted", [False, True])
def test_an_id_too_long_to_store_whole_still_exports(redacted: bool) -> None:
    person = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=person, team=team_of(person), name="long id", config=CONFIG)
    long_id = "i" * 300  # stored cut short: no longer JSON
    ping = _frame("message", "out", {"jsonrpc": "2.0", "id": long_id, "method": "ping"}, rpc_id=long_id)
    ping.seq = 1
    TimelineFrame.insert_rows(session.pk, [frame_row(ping, 0)])
    redactor = Redactor.for_session(CONFIG) if redacted else None
    (line,) = "".join(_collect(jsonl_lines(session, redactor))).splitlines()
    record = json.loads(line)
    assert record["rpc_id"].startswith('"iii') and json.loads(record["raw"])["id"] == long_id


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scope", ["all", "range", "bound-like"])
def test_a_batch_read_by_its_query_made_once_is_what_the_queryset_reads(
    monkeypatch: pytest.MonkeyPatch, scope: str
) -> None:
    """``Batches`` runs one SQL query with each batch's bounds: the rows are the queryset's, for a share's
    scope with parameters of its own too; a scope holding a number like a bound is read as a queryset."""
    monkeypatch.setattr(exports, "CHUNK", 3)
    session = _session()
    frames = TimelineFrame.objects.filter(session=session)
    if scope == "range":
        frames = frames.filter(seq__gte=2, seq__lte=9).exclude(seq=5)
    elif scope == "bound-like":
        frames = frames.exclude(seq=exports._AFTER)
    fields = ("seq", "raw", "transport", "verdicts", "wall", "latency_ms", "note")
    batches = exports.Batches(frames, fields)
    assert (batches.ranged is None) == (batches.stepped is None) == (scope == "bound-like")
    read: list[tuple[Any, ...]] = []
    while rows := batches.next():
        read += rows
    expected = list(
        frames.annotate(**{f"{name}_text": exports.JSON_AS_TEXT[name] for name in ("transport", "verdicts")})
        .order_by("seq")
        .values_list("seq", "raw", "transport_text", "verdicts_text", "wall", "latency_ms", "note")
    )
    assert read == expected and len(read) == (7 if scope == "range" else 11)
    kinds = [type(value) for row in read for value in row]
    assert kinds == [type(value) for row in expected for value in row]


@pytest.mark.parametrize("cut", [1, 2, 5, 160])
def test_a_preview_is_cut_as_truncatechars_cuts_it(cut: int) -> None:
    """``truncated`` (quick for Latin-1 text) gives what ``|truncatechars`` gives, at every length."""
    heads = ["", "a", "x" * 200, "ünïcödé & <b>", "\x00\x1f\x7f\x85\xa0\xff", "e\u0301", "🔑", "İK\u2028"]
    texts = [head * times + tail for head in heads for times in (1, 40) for tail in ("", "…", "é", "\u0301")]
    for text in texts:
        for length in (cut - 1, cut, cut + 1, len(text)):
            shown = text[: max(length, 0)]
            assert truncated(shown, cut) == truncatechars(shown, cut), (shown, cut)


def test_nfc_leaves_latin_1_alone_and_none_of_it_is_combining() -> None:
    """What ``truncated``'s quick way rests on, for every Latin-1 character and every pair of them."""
    latin_1 = [chr(code) for code in range(256)]
    assert not any(unicodedata.combining(char) for char in latin_1)
    assert all(unicodedata.normalize("NFC", a + b) == a + b for a in latin_1 for b in latin_1)
