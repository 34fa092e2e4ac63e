"""A secret split across adjacent frames of one stream (sessions/timeline/seams.py): both pieces masked,
in a share's rows and frame detail and in every redacted export; frames of other streams left alone."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from support.teams import team_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Share
from sessions.timeline.exports import document, jsonl_lines
from sessions.timeline.redaction import MASK, Redactor
from sessions.timeline.seams import STREAM_GAP, Cut, cut_raw, stream_cuts
from sessions.timeline.secret_forms import SecretForms
from sessions.timeline.shared import SharedSession, preview

SECRET = "ENVSECRET456xyz"
HEAD, TAIL = SECRET[:7], SECRET[7:]  # neither is a secret alone
FORMS = SecretForms([SECRET])
STDERR = ("stderr", "in")


def test_a_secret_split_across_two_lines_is_cut_from_the_end_of_one_and_the_start_of_the_next() -> None:
    cuts = stream_cuts(FORMS, [(1, STDERR, f"token is {HEAD}"), (2, STDERR, f"{TAIL} (expires soon)")])
    assert cuts == {1: Cut(tail=len("token is ")), 2: Cut(head=len(TAIL))}
    assert cut_raw(f"token is {HEAD}".encode(), "stderr", cuts[1], MASK) == f"token is {MASK}".encode()
    assert (
        cut_raw(f"{TAIL} (expires soon)".encode(), "stderr", cuts[2], MASK)
        == f"{MASK} (expires soon)".encode()
    )


def test_a_secret_in_three_pieces_masks_the_middle_frame_whole() -> None:
    frames = [(1, STDERR, f"a {SECRET[:4]}"), (2, STDERR, SECRET[4:9]), (3, STDERR, f"{SECRET[9:]} b")]
    assert stream_cuts(FORMS, frames) == {1: Cut(tail=2), 2: Cut(head=5), 3: Cut(head=len(SECRET) - 9)}
    assert cut_raw(SECRET[4:9].encode(), "stderr", Cut(head=5), MASK) == MASK.encode()


def test_an_encoded_secret_split_across_frames_is_cut_too() -> None:
    encoded = base64.b64encode(b"prefix-" + SECRET.encode()).decode()
    upper = SECRET.upper()
    frames = [
        (1, STDERR, f"blob {encoded[:12]}"),
        (2, STDERR, f"{encoded[12:]} end"),
        (3, STDERR, f"shout {upper[:5]}"),
        (4, STDERR, f"{upper[5:]}!"),
    ]
    cuts = stream_cuts(FORMS, frames)
    assert set(cuts) == {1, 2, 3, 4}
    shown = [cut_raw(text.encode(), "stderr", cuts[seq], MASK).decode() for seq, _, text in frames]
    assert shown[2] == f"shout {MASK}" and shown[3] == f"{MASK}!"
    assert encoded[8:12] not in shown[0] and encoded[12:16] not in shown[1]


def test_frames_of_other_streams_or_far_apart_or_whole_on_their_own_are_not_joined() -> None:
    other_log = ("log", "db")
    frames = [
        (1, STDERR, f"x {HEAD}"),
        (2, ("log", "server"), f"{TAIL} y"),  # another stream
        (3, other_log, HEAD),
        (4 + STREAM_GAP, other_log, TAIL),  # the same stream, too far
        (5 + STREAM_GAP, STDERR, f"{SECRET} whole"),  # one frame holds it: its own redaction masks it
        (6 + STREAM_GAP, STDERR, "nothing here"),
    ]
    assert stream_cuts(FORMS, frames) == {}


def test_a_long_line_is_joined_by_its_ends_only_and_still_cut_right() -> None:
    long_head = "x" * 5000 + f" {HEAD}"
    cuts = stream_cuts(FORMS, [(1, STDERR, long_head), (2, STDERR, TAIL + "y" * 5000)])
    assert cuts == {1: Cut(tail=len(long_head) - len(HEAD)), 2: Cut(head=len(TAIL))}
    # A long frame between the pieces keeps them apart: joined by its ends, nothing crosses it.
    assert stream_cuts(FORMS, [(1, STDERR, HEAD), (2, STDERR, "z" * 3000), (3, STDERR, TAIL)]) == {}


def test_a_log_notifications_data_is_cut_and_stays_json() -> None:
    log = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "data": f"k={HEAD}"},
    }
    shown = json.loads(cut_raw(json.dumps(log).encode(), "message", Cut(tail=2), MASK))
    assert shown["params"] == {"level": "info", "data": f"k={MASK}"}


# --- with stored frames: a share and the exports ------------------------------------------------------


def _log(data: str, logger: str = "server") -> Frame:
    body = {
        "jsonrpc": "2.0",
        "method": "notifications/message",
        "params": {"level": "info", "logger": logger, "data": data},
    }
    frame = Frame("message", "in", json.dumps(body).encode(), message=body)
    frame.rpc_kind, frame.method = "notification", "notifications/message"
    return frame


def _session() -> McpSession:
    person = User.objects.create(username="alice")
    config = {"transport": "stdio", "command": "x", "env": {"API_KEY": SECRET}}
    session = McpSession.objects.create(owner=person, team=team_of(person), name="split", config=config)
    frames = [
        Frame("stderr", "in", f"the key: {HEAD}".encode()),
        _log("unrelated"),
        Frame("stderr", "in", f"{TAIL} -- done".encode()),
        _log(f"sending {SECRET[:3]}"),
        Frame("message", "out", b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'),
        _log(f"{SECRET[3:]} upstream"),
    ]
    for seq, frame in enumerate(frames, start=1):
        frame.seq = seq
    TimelineFrame.insert_rows(session.pk, [frame_row(frame, 0) for frame in frames])
    McpSession.objects.filter(pk=session.pk).update(last_seq=len(frames))
    return McpSession.objects.get(pk=session.pk)


def _collect(lines: Any) -> str:
    async def read() -> str:
        return "".join([line async for line in lines])

    return asyncio.run(read())


def _pieces_in(text: str) -> list[str]:
    return [piece for piece in (HEAD, TAIL, SECRET[:3] + '"', SECRET[3:]) if piece in text]


@pytest.mark.django_db(transaction=True)
def test_both_pieces_are_masked_in_a_shares_rows_and_frames_and_in_every_redacted_export() -> None:
    session = _session()
    redactor = Redactor.for_session(session.config)
    assert HEAD in _collect(jsonl_lines(session)) and TAIL in _collect(jsonl_lines(session))  # as recorded
    for export in (_collect(jsonl_lines(session, redactor)), _collect(document(session, redactor))):
        assert not _pieces_in(export), _pieces_in(export)
        assert export.count(MASK) >= 4
    share = Share(session=session, digest="x", audience="anyone", rules={}, filter={})
    shared = SharedSession.of(share)
    rows = shared.rows(shared.scope_filter)
    assert len(rows) == 6 and not _pieces_in(json.dumps([row["preview"] for row in rows]))
    for seq in range(1, 7):
        detail = shared.detail(seq)
        assert detail is not None
        shown = detail["text"]
        assert not _pieces_in(shown), (seq, shown)
    assert shared.detail(1)["text"] == f"the key: {MASK}"  # type: ignore[index]
    # The sharer's preview shows the frames a split secret was cut from, as changed.
    previewed = {item["frame"].seq: item for item in preview(shared)}
    assert {1, 3} <= set(previewed) and previewed[1]["changed"]
    assert not _pieces_in(json.dumps([item["text"] for item in previewed.values()]))
    # A share of one frame still masks the piece it holds: the other piece is read outside its scope.
    ranged = SharedSession(session, redactor, first_seq=3, last_seq=3)
    assert [row["preview"] for row in ranged.rows(ranged.scope_filter)] == [f"{MASK} -- done"]
    assert MASK in _collect(jsonl_lines(session, redactor, ranged.frames()))


@pytest.mark.django_db(transaction=True)
def test_while_live_the_newest_frame_of_a_stream_that_ends_with_a_secrets_opening_has_it_masked() -> None:
    """A live view sends a frame as soon as it is stored; the rest of the secret may come in the next."""
    session = _session()
    TimelineFrame.objects.filter(session=session, seq__gte=3).delete()  # the rest has not come yet
    McpSession.objects.filter(pk=session.pk).update(last_seq=2, status="ready")
    session.refresh_from_db()
    shared = SharedSession(session, Redactor.for_session(session.config))
    assert [row["preview"] for row in shared.rows(shared.scope_filter)][0] == f"the key: {MASK}"
    # Closed, a frame that ends with a secret's opening is the end of its stream: left as it is.
    McpSession.objects.filter(pk=session.pk).update(status="closed")
    session.refresh_from_db()
    assert [row["preview"] for row in shared.rows(shared.scope_filter)][0] == f"the key: {HEAD}"
    assert FORMS.opening_at("nothing to see") is None and FORMS.opening_at(f"x {SECRET[:3]}") is None
    assert FORMS.opening_at(f"x {SECRET[:4].lower()}") == 2
