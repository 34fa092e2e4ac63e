"""What a share shows: a session's frames within the share's scope (a frame range, a timeline filter),
everything redacted by the built-in rules, the session's own secrets and the sharer's rules.

The recording is never changed: every row, frame and fact is redacted as it is read out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django.db.models import QuerySet

from sessions.frames import pretty_json
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Share, ShareOpening, token_digest
from sessions.timeline import conformance, plots
from sessions.timeline.overview import overview
from sessions.timeline.queries import PAGE, TimelineFilter, detail_of, page_of_rows
from sessions.timeline.redaction import Redactor, Rules
from sessions.timeline.seams import Seams

__all__ = ["ROW_RAW_LIMIT", "SharedSession", "find_share", "log_opening", "preview"]

# A list row's preview is made again from the redacted bytes; bigger frames show none (open them).
ROW_RAW_LIMIT = 256 * 1024
# The preview before a link is made: at most this many frames, found among the first SCAN in scope.
PREVIEW_FRAMES = 6
PREVIEW_SCAN = 2000
PREVIEW_CHUNK = 200  # frames looked at together (their split secrets found at once)
PREVIEW_CHARS = 4000


@dataclass
class SharedSession:
    """A session as one share (or its preview) shows it."""

    session: McpSession
    redactor: Redactor
    first_seq: int | None = None
    last_seq: int | None = None
    scope_filter: TimelineFilter = TimelineFilter()

    @classmethod
    def of(cls, share: Share) -> SharedSession:
        session = share.session
        return cls(
            session,
            Redactor.for_session(session.config, Rules.from_dict(share.rules)),
            share.first_seq,
            share.last_seq,
            TimelineFilter.from_data(share.filter if isinstance(share.filter, dict) else {}),
        )

    @cached_property
    def seams(self) -> Seams:
        """Secrets split across adjacent frames of a stream, found with the frames around them."""
        return Seams(self.session, self.redactor.forms)

    def frames(self) -> QuerySet[TimelineFrame]:
        """The frames in the share's scope."""
        frames = TimelineFrame.objects.filter(session=self.session)
        if self.first_seq is not None:
            frames = frames.filter(seq__gte=self.first_seq)
        if self.last_seq is not None:
            frames = frames.filter(seq__lte=self.last_seq)
        return self.scope_filter.apply(frames)

    def in_scope(self, row: dict[str, Any]) -> bool:
        """Whether a live row (a summary) is in the share's scope."""
        seq = row["seq"]
        if self.first_seq is not None and seq < self.first_seq:
            return False
        if self.last_seq is not None and seq > self.last_seq:
            return False
        return self.scope_filter.matches(row)

    def rows(
        self, flt: TimelineFilter, *, before: int | None = None, after: int | None = None, limit: int = PAGE
    ) -> list[dict[str, Any]]:
        """A page of redacted rows of the scope, filtered further by the viewer."""
        rows = page_of_rows(self.session, flt, before=before, after=after, limit=limit, frames=self.frames())
        return self.redacted_rows(rows)

    def redacted_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows redacted, each preview made again from its redacted bytes (read here, a page at once), a
        secret split across frames of a stream masked in each."""
        small = [r["seq"] for r in rows if (r.get("size") or 0) <= ROW_RAW_LIMIT]
        raws = dict(
            TimelineFrame.objects.filter(session=self.session, seq__in=small).values_list("seq", "raw")
        )
        seams = self.seams
        read = {seq: bytes(raw) for seq, raw in raws.items()}
        cuts = seams.cuts(
            (r["seq"], r["kind"], r["direction"], r["method"], read[r["seq"]])
            for r in rows
            if r["seq"] in read
        )
        return [
            self.redactor.row(r, seams.cut(r["seq"], r["kind"], read[r["seq"]], cuts))
            if r["seq"] in read
            else self.redactor.row(r, None)
            for r in rows
        ]

    def detail(self, seq: int) -> dict[str, Any] | None:
        """One frame of the scope, redacted, with nothing to send again."""
        frame = self.frames().filter(seq=seq).first()
        return (
            None if frame is None else detail_of(self.redactor.frame(self.seams.frame(frame)), replay=False)
        )

    def shown(self, frame: TimelineFrame) -> TimelineFrame:
        """A frame of the scope as the share shows it: redacted, a secret split across frames masked."""
        return self.redactor.frame(self.seams.frame(frame))

    def shown_session(self) -> McpSession:
        """The session's name, server URL, config and facts redacted (a copy that is never saved)."""
        return self.redactor.session(self.session)

    def overview(self) -> dict[str, Any]:
        """The lifecycle bar and capability table, their notes and facts redacted."""
        shown = self.shown_session()
        return overview(self.session, shown=shown, text=self.redactor.text, frames=self.frames())

    def report(self) -> dict[str, Any]:
        """The Conformance tab over the scope, with its plots, its examples and methods redacted."""
        found = conformance.report(self.session, self.frames())
        for row in found["verdict_rows"]:
            row["example"] = self.redactor.text(row["example"])
        drawn = plots.plots(self.session, self.frames())
        for row in drawn["latency_methods"]:
            row.method = self.redactor.text(row.method)
        return {**found, **drawn}


def preview(shared: SharedSession) -> list[dict[str, Any]]:
    """What a viewer of a share will see, before the link is made: the initialize exchange and the
    frames where redaction changed something (a few, redacted)."""
    picked: list[dict[str, Any]] = []
    scanned = shared.frames().order_by("seq")[:PREVIEW_SCAN]
    seams = shared.seams
    chunk: list[TimelineFrame] = []
    for stored in scanned.iterator(chunk_size=PREVIEW_CHUNK):
        chunk.append(stored)
        if len(chunk) < PREVIEW_CHUNK:
            continue
        picked += _picked(shared, chunk, seams.frames(chunk), PREVIEW_FRAMES - len(picked))
        chunk = []
        if len(picked) >= PREVIEW_FRAMES:
            return picked
    return picked + _picked(shared, chunk, seams.frames(chunk), PREVIEW_FRAMES - len(picked))


def _picked(
    shared: SharedSession, stored: list[TimelineFrame], cut: list[TimelineFrame], wanted: int
) -> list[dict[str, Any]]:
    """Of these frames (as stored, and with their split secrets masked), the initialize exchange and
    those where redaction changed something, ``wanted`` at most."""
    picked: list[dict[str, Any]] = []
    for frame, masked in zip(stored, cut, strict=True):
        if len(picked) >= wanted:
            break
        shown = shared.redactor.frame(masked)
        changed = (
            shown.raw != bytes(frame.raw) or shown.transport != frame.transport or shown.note != frame.note
        )
        if frame.method == "initialize" or changed:
            text = pretty_json(bytes(shown.raw)) or bytes(shown.raw).decode("utf-8", errors="replace")
            transport = json.dumps(shown.transport, indent=2, ensure_ascii=False) if shown.transport else ""
            picked.append(
                {
                    "frame": shown,
                    "changed": changed,
                    "text": text[:PREVIEW_CHARS],
                    "cut": len(text) > PREVIEW_CHARS,
                    "transport": transport[:PREVIEW_CHARS],
                }
            )
    return picked


def find_share(token: str) -> Share | None:
    """The share a link's token opens (in any state), its session loaded; None for no such link."""
    if not token or len(token) > 200:
        return None
    return Share.objects.select_related("session").filter(digest=token_digest(token)).first()


def log_opening(share: Share, user_id: int | None, address: str, user_agent: str) -> None:
    """Someone opened a share: who (signed in) or from where."""
    ShareOpening.objects.create(
        share=share, user_id=user_id, address=address[:100], user_agent=user_agent[:300]
    )
