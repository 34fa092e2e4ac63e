"""A secret split across adjacent frames of one stream: the end of one frame and the start of the next
(and any frame between) hold it together, though neither holds it alone.

A stream is what a server writes a piece at a time, each piece a frame: its stderr (a frame a line;
a long token wrapped, or written in two writes) and its log notifications (``notifications/message``
with text ``data``; one stream per logger). Two frames of a stream are adjacent when no frame of the
stream comes between them and they are at most ``STREAM_GAP`` frames apart (further apart, they are
not the two halves of one write). The pieces are masked in each frame before the other rules run
(``cut_raw``); the recording is never changed. While a session is live, the newest frame of a
stream that ends with the opening of a secret has that opening masked too: its rest may come next.
"""

from __future__ import annotations

import copy
import json
from bisect import bisect_left
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from sessions.models import McpSession, TimelineFrame
from sessions.timeline.redaction import MASK
from sessions.timeline.secret_forms import SecretForms

__all__ = ["STREAM_GAP", "Cut", "Seams", "cut_raw", "stream_cuts", "stream_text"]

STREAM_GAP = 100
REMEMBERED = 4096  # stream texts a Seams keeps (an export's batch and its margins)
UNCOVERED_QUERIES = 4  # queries for the frames around a batch, at most
LOG = "notifications/message"
# Between the kept ends of a long frame's text, so that no match joins them (no secret holds a NUL).
_BREAK = "\x00"


@dataclass(frozen=True)
class Cut:
    """What of a frame's stream text is a piece of a split secret: its first ``head`` characters and
    everything from ``tail`` on (None: nothing)."""

    head: int = 0
    tail: int | None = None


def may_stream(kind: str, direction: str, method: str | None) -> bool:
    """Whether a frame of this kind may be part of a stream (``streams_of`` says which)."""
    return kind == "stderr" or (kind == "message" and direction == "in" and method == LOG)


def stream_text(kind: str, direction: str, raw: bytes) -> tuple[tuple[str, ...], str] | None:
    """The stream a frame that ``may_stream`` is part of, and its text there (a log notification's is
    its ``params.data``); None if it is none."""
    if kind == "stderr":
        return ("stderr", direction), raw.decode("utf-8", errors="surrogateescape")
    params = _message(raw).get("params")
    if isinstance(params, dict) and isinstance(params.get("data"), str):
        return ("log", str(params.get("logger") or "")), params["data"]
    return None


_DECODER = json.JSONDecoder()


def _message(raw: bytes) -> dict[str, Any]:
    """``message_of``, in half its time (what ``json.loads`` adds, finding the bytes' encoding, is not
    needed: a message is UTF-8)."""
    try:
        text = raw.decode("utf-8").strip()
        message, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        return {}
    return message if end == len(text) and isinstance(message, dict) else {}


def stream_cuts(forms: SecretForms, frames: Iterable[tuple[int, tuple[str, ...], str]]) -> dict[int, Cut]:
    """The cuts of the frames (seq, stream, text; in seq order) where a secret crosses from one frame of
    a stream into the next: every form ``forms`` finds in a stream's texts joined, but not within one."""
    runs: dict[tuple[str, ...], list[list[tuple[int, str]]]] = {}
    for seq, stream, text in frames:
        stream_runs = runs.setdefault(stream, [[]])
        if stream_runs[-1] and seq - stream_runs[-1][-1][0] > STREAM_GAP:
            stream_runs.append([])
        stream_runs[-1].append((seq, text))
    cuts: dict[int, Cut] = {}
    keep = max(forms.longest - 1, 0)
    for run in (run for stream_runs in runs.values() for run in stream_runs):
        if len(run) > 1:
            _cut_run(forms, run, keep, cuts)
    return cuts


def _cut_run(forms: SecretForms, run: list[tuple[int, str]], keep: int, cuts: dict[int, Cut]) -> None:
    """The cuts of one run of adjacent frames: their texts joined, each long one by its two ends only
    (a match that crosses a frame's edge reaches at most ``keep`` characters into it)."""
    joined: list[str] = []
    # Each frame's place in the joined text: where its kept head starts, and where its kept tail starts.
    places: list[tuple[int, int, int, str]] = []  # (seq, start in joined, length, text)
    at = 0
    for seq, text in run:
        shown = text if len(text) <= 2 * keep + 1 else text[:keep] + _BREAK + text[len(text) - keep :]
        places.append((seq, at, len(shown), text))
        joined.append(shown)
        at += len(shown)
    whole = "".join(joined)
    for start, end in forms.matches(whole):
        touched = [place for place in places if place[1] < end and start < place[1] + place[2]]
        if len(touched) < 2:
            continue  # within one frame: the frame's own redaction masks it
        for i, (seq, first, length, text) in enumerate(touched):
            cut = cuts.get(seq, Cut())
            if i == 0:  # the secret starts in this frame's tail
                tail = len(text) - (first + length - start)
                cut = Cut(cut.head, tail if cut.tail is None else min(cut.tail, tail))
            elif i == len(touched) - 1:  # and ends in this one's head
                cut = Cut(max(cut.head, end - first), cut.tail)
            else:  # and holds the whole of this one
                cut = Cut(len(text), cut.tail)
            cuts[seq] = cut


def cut_raw(raw: bytes, kind: str, cut: Cut, mask: str) -> bytes:
    """A frame's bytes with the pieces of its stream text ``cut`` says replaced by ``mask``."""
    if kind == "stderr":
        return _cut_text(raw.decode("utf-8", errors="surrogateescape"), cut, mask).encode(
            "utf-8", errors="surrogateescape"
        )
    message = _message(raw)
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("data"), str):
        return raw
    params["data"] = _cut_text(params["data"], cut, mask)
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _cut_text(text: str, cut: Cut, mask: str) -> str:
    if cut.tail is not None and cut.tail <= cut.head:
        return mask
    head = mask if cut.head else ""
    tail = mask if cut.tail is not None else ""
    return head + text[cut.head : cut.tail] + tail


class Seams:
    """The cuts of a session's frames, read with their neighbours in the session (whatever a share's
    scope: the other piece may lie outside it)."""

    def __init__(self, session: McpSession, forms: SecretForms) -> None:
        self.session = session
        self.forms = forms
        # seq → its stream and text (None: in no stream): an export's batches share their margins.
        self.texts: dict[int, tuple[tuple[str, ...], str] | None] = {}

    def cuts(self, frames: Iterable[tuple[int, str, str, str | None, bytes | None]]) -> dict[int, Cut]:
        """The cuts of these frames (seq, kind, direction, method, and raw if read already), each read with
        the stream frames within ``STREAM_GAP`` of it (those not among them read here)."""
        given = list(frames)
        streaming = [row for row in given if may_stream(row[1], row[2], row[3])]
        if not streaming or self.forms.pattern is None:
            return {}
        if len(self.texts) > REMEMBERED:
            self.texts.clear()
        texts = self.texts
        for seq, kind, direction, _, raw in streaming:
            if raw is not None and seq not in texts:
                texts[seq] = stream_text(kind, direction, raw)
        known = sorted(row[0] for row in given if row[4] is not None)
        windows = _merged_ranges(sorted((row[0] - STREAM_GAP, row[0] + STREAM_GAP) for row in streaming))
        seqs = [row[0] for row in streaming if row[4] is not None]
        kinds: dict[int, tuple[str, str]] = {}
        for window in windows:
            # Ranges of seqs (the index on session and seq), only where the frames are not here already
            # (an export's batch: the two margins); which frames are there, without their bytes.
            for first, last in _uncovered(window, known):
                around = TimelineFrame.objects.filter(session=self.session, seq__gte=first, seq__lte=last)
                for seq, kind, direction, method in around.values_list("seq", "kind", "direction", "method"):
                    if may_stream(kind, direction, method):
                        kinds[seq] = (kind, direction)
        unseen = [seq for seq in kinds if seq not in texts]
        if unseen:  # the bytes of the stream frames around not seen yet
            read = TimelineFrame.objects.filter(session=self.session, seq__in=unseen).values_list(
                "seq", "raw"
            )
            for seq, data in read:
                texts[seq] = stream_text(*kinds[seq], bytes(data))
        seqs += kinds
        found = []
        for seq in sorted(set(seqs)):
            text = texts.get(seq)
            if text is not None:
                found.append((seq, *text))
        cuts = stream_cuts(self.forms, found)
        wanted = {row[0] for row in streaming}
        if self.session.is_live:
            self._pending(found, wanted, cuts)
        return {seq: cut for seq, cut in cuts.items() if seq in wanted}

    def _pending(self, found: list[tuple[Any, ...]], wanted: Collection[int], cuts: dict[int, Cut]) -> None:
        """Cut the opening of a secret from the end of each stream's newest frame, while the next may
        still come: a live view sends it now, and would not take it back."""
        newest: dict[tuple[str, ...], tuple[int, str]] = {}
        for seq, stream, text in found:
            newest[stream] = (seq, text)
        for seq, text in newest.values():
            if seq not in wanted or seq + STREAM_GAP <= self.session.last_seq:
                continue
            at = self.forms.opening_at(text)
            if at is not None:
                cut = cuts.get(seq, Cut())
                cuts[seq] = Cut(cut.head, at if cut.tail is None else min(cut.tail, at))

    def cut(self, seq: int, kind: str, raw: bytes, cuts: dict[int, Cut]) -> bytes:
        """``raw`` with its cut applied, if it has one."""
        found = cuts.get(seq)
        return raw if found is None else cut_raw(raw, kind, found, MASK)

    def raws(self, rows: list[tuple[Any, ...]], places: tuple[int, int, int, int, int]) -> list[bytes]:
        """The bytes of a batch of frames read as values (seq, kind, direction, method and raw at these
        places in each), pieces of a split secret masked."""
        seq, kind, direction, method, raw = places
        raws = [bytes(row[raw]) for row in rows]
        cuts = self.cuts(
            (row[seq], row[kind], row[direction], row[method], data)
            for row, data in zip(rows, raws, strict=True)
        )
        if not cuts:
            return raws
        return [self.cut(row[seq], row[kind], data, cuts) for row, data in zip(rows, raws, strict=True)]

    def frames(self, frames: list[Any]) -> list[Any]:
        """Stored frames with their pieces of a split secret masked: copies, those that have any."""
        raws = [bytes(frame.raw) for frame in frames]
        cuts = self.cuts(
            (frame.seq, frame.kind, frame.direction, frame.method, raw)
            for frame, raw in zip(frames, raws, strict=True)
        )
        shown = []
        for frame, raw in zip(frames, raws, strict=True):
            if frame.seq in cuts:
                frame = copy.copy(frame)
                frame.raw = cut_raw(raw, frame.kind, cuts[frame.seq], MASK)
            shown.append(frame)
        return shown

    def frame(self, frame: Any) -> Any:
        """A stored frame with its pieces of a split secret masked: a copy, if it has any."""
        return self.frames([frame])[0]


def _merged_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive ranges (in order of their starts) with those less than ``STREAM_GAP`` apart joined (one
    query reads a few more frames, not one query more)."""
    merged: list[tuple[int, int]] = []
    for first, last in ranges:
        if merged and first <= merged[-1][1] + STREAM_GAP:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def _uncovered(window: tuple[int, int], known: list[int]) -> list[tuple[int, int]]:
    """The parts of the inclusive ``window`` that hold no seq of ``known`` (in order); the whole window
    when they would be many (a page of rows far apart: one query, not one a row)."""
    first, last = window
    parts = []
    at = bisect_left(known, first)
    start = first
    while at < len(known) and known[at] <= last:
        if known[at] > start:
            parts.append((start, known[at] - 1))
        start = known[at] + 1
        at += 1
    if start <= last:
        parts.append((start, last))
    return parts if len(parts) <= UNCOVERED_QUERIES else [window]
