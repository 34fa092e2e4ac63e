"""The HTML export's frames: one ``<li>`` each, written in Python rather than with a template.

A file holds every frame of a session, by the hundred thousand, and the template engine's cost per
frame made a big one take minutes (docs/bench.md). This writes exactly what
``templates/sessions/export/frames.html`` wrote (the markup below is that template's, line for line;
tests/timeline/test_exports.py renders the template it replaced and compares): every value a server or a
person sent escaped as Django escapes (``html.escape``), the filters the template used called as they are
(``floatformat``, ``filesizeformat``, ``truncatechars``; their answers remembered, the same come back),
and the notes, rare, still rendered by their template.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any

from django.template.defaultfilters import filesizeformat, floatformat
from django.template.loader import render_to_string

from sessions.frames import indented_json, pretty_json
from sessions.teams.models import Note
from sessions.timeline.redaction import Redactor, preview_of
from sessions.timeline.seams import Seams
from sessions.timeline.shown import Shown, truncated

__all__ = ["BODY_LIMIT", "HTML_FIELDS", "LONGEST_KEPT", "FrameHtml", "Memo"]

BODY_LIMIT = 64 * 1024  # characters of each frame's body in the file; the JSONL export has them all
PREVIEW = 160  # characters of the summary line's note or preview
# The values a frame's item is written from, in this order (``transport`` and ``verdicts`` as JSON text).
HTML_FIELDS = (
    "seq", "kind", "direction", "worst", "rpc_kind", "method", "rpc_id", "latency_ms", "size", "raw",
    "verdicts", "note", "preview", "pair_seq", "parse_error", "transport",
)  # fmt: skip
ARROWS = {"out": "→", "in": "←"}
MEMO = 1024  # texts a writer remembers (transport details, methods, sizes): the same come back
LONGEST_KEPT = 4096  # transport details this long or longer are not remembered
CUT = '<p class="muted">(cut at 64 KB; the JSONL export has every byte)</p>'


class Memo:
    """A few texts and what they became, forgotten all at once when full (the same come back); a text
    of ``longest`` characters or more is made each time, not kept."""

    def __init__(self, make: Callable[[Any], str], longest: int | None = None) -> None:
        self.make = make
        self.longest = longest
        self.done: dict[Any, str] = {}

    def __call__(self, key: Any) -> str:
        done = self.done.get(key)
        if done is None:
            done = self.make(key)
            if self.longest is None or len(key or "") < self.longest:
                if len(self.done) >= MEMO:
                    self.done.clear()
                self.done[key] = done
        return done

    def knows(self, key: Any) -> bool:
        """Whether ``key`` was made already (and is still kept)."""
        return key in self.done


class FrameHtml:
    """A frame's values (``HTML_FIELDS``) as the file's list item; with a ``redactor``, redacted as
    ``Redactor.frame`` redacts a stored frame."""

    def __init__(self, redactor: Redactor | None, seams: Seams | None = None) -> None:
        self.redactor = redactor
        self.seams = seams
        self.shown = Shown()  # a value as ``{{ value }}`` shows it
        self.sizes, self.latencies = Memo(self._size), Memo(self._latency)
        self.transports, self.texts = Memo(self._transport, LONGEST_KEPT), Memo(self._text)
        # The batch's notes and transport details that no rule changes (``all`` looks): shown
        # as they are. Any other is redacted the long way, which gives a plain one back unchanged.
        self.plain: set[str] = set()

    def _code(self, verdict: dict[str, Any]) -> str:
        return self.shown(verdict.get("code", ""))

    def _size(self, size: Any) -> str:
        return self.shown(filesizeformat(size))

    def _latency(self, latency: Any) -> str:
        return f"{floatformat(latency, 1)} ms"

    def _transport(self, stored: str) -> str:
        """The transport details as the file shows them: indented JSON in a ``<pre>``, or nothing."""
        value = json.loads(stored) if stored else {}
        if self.redactor is not None and not (isinstance(value, dict) and stored in self.plain):
            value = self.redactor.transport(value)
        return f"<pre>{escape(indented_json(value))}</pre>" if value else ""

    def _text(self, text: str) -> str:
        return self.redactor.text(text) if self.redactor is not None else text

    def _redacted(self, text: str) -> str:
        """A text redacted, at a glance when no rule can change it (a preview: JSON cut anywhere)."""
        assert self.redactor is not None
        return text if not text or text in self.plain else self.redactor.text(text)

    def _preview(self, text: str) -> str:
        """``{{ text|truncatechars:160 }}``."""
        return self.shown(truncated(text, PREVIEW))

    def all(self, rows: list[tuple[Any, ...]], notes: dict[int, list[Note]]) -> str:
        """The items of a batch of frames (their bytes redacted together: ``Redactor.raws``; their notes
        and transport details looked at together: ``Redactor.plains``)."""
        raws = [bytes(row[9]) for row in rows]
        if self.seams is not None:  # seq, kind, direction, method, raw
            raws = self.seams.raws(rows, (0, 1, 2, 5, 9))
        if self.redactor is not None:
            raws = self.redactor.raws(raws)
            self.plain = self._plain(rows)
        return "".join([self.item(row, raw, notes.get(row[0])) for row, raw in zip(rows, raws, strict=True)])

    def _plain(self, rows: list[tuple[Any, ...]]) -> set[str]:
        """The notes and transport details (those not written already) of a batch that no rule
        changes: ``Redactor.plains`` of them all at once, quicker than ``plain`` of each."""
        assert self.redactor is not None
        known = self.transports.knows
        texts = {row[11] for row in rows if row[11]}
        texts.update(row[15] for row in rows if row[15] and not known(row[15]))
        looked = list(texts)
        return {text for text, plain in zip(looked, self.redactor.plains(looked), strict=True) if plain}

    def _verdict(self, verdict: dict[str, Any]) -> str:
        severity = self.shown(verdict.get("severity", ""))
        return f'<span class="verdict sev-{severity}">{self._code(verdict)}</span>'

    def item(self, row: tuple[Any, ...], raw: bytes, notes: list[Note] | None) -> str:
        """A frame's item, its bytes ``raw`` (redacted already, if they are), the notes on it."""
        (
            seq, kind, direction, worst, rpc_kind, method, rpc_id, latency, size, _, verdicts, note,
            preview, pair_seq, parse_error, transport,
        ) = row  # fmt: skip
        verdicts = json.loads(verdicts) if verdicts and verdicts != "[]" else []
        redactor = self.redactor
        if redactor is not None:
            size = len(raw)
            verdicts = redactor.value(verdicts if isinstance(verdicts, list) else [])
            method = self.texts(method)
            rpc_id, parse_error = redactor.text(rpc_id), redactor.text(parse_error)
            note = self._redacted(note)
            preview = preview_of(raw, note)  # the stored one may be cut through a secret
        marks = [v if isinstance(v, dict) else {} for v in verdicts] if isinstance(verdicts, list) else []
        _shown = self.shown
        # Line 1 of the template: the summary.
        pieces = [
            f'<li id="f-{_shown(seq)}"><details><summary class="frame kind-{_shown(kind)}',
            f" dir-{_shown(direction)}",
            f" worst-{_shown(worst)}" if worst else "",
            " rpc-error" if rpc_kind == "error" else "",
            f'"><span class="seq">{_shown(seq)}</span>',
            f'<span class="dir">{ARROWS.get(direction, "•")}</span>',
            f'<span class="what">{_shown((method or rpc_kind) if kind == "message" else kind)}</span>',
            f'<span class="rid">#{_shown(rpc_id)}</span>' if rpc_id else '<span class="rid"></span>',
            '<span class="lat">',
            self.latencies(latency) if latency is not None else "",
            f'</span><span class="size">{self.sizes(size)}</span>',
            '<span class="verdicts">',
            *[self._verdict(m) for m in marks],
            '</span><span class="preview">',
            f'<span class="notes-mark">✎{len(notes)}</span> ' if notes else "",
            f"{self._preview(note or preview)}</span></summary>\n",
        ]
        # Then one line each: the pair, the verdicts, the note, the notes, a parse error, the transport.
        if pair_seq:
            pieces.append(f'<p>paired with <a href="#f-{_shown(pair_seq)}">#{_shown(pair_seq)}</a></p>')
        pieces.append("\n")
        if marks:
            pieces.append('<ul class="verdict-list">')
            for m in marks:
                severity, message = _shown(m.get("severity", "")), _shown(m.get("message", ""))
                pieces.append(f'<li class="sev-{severity}"><strong>{self._code(m)}</strong> {message}</li>')
            pieces.append("</ul>")
        pieces.append(f'\n<p class="note">{escape(note)}</p>\n' if note else "\n\n")
        if notes:
            context = {"f": {"seq": seq}, "notes": notes}
            pieces.append(render_to_string("sessions/notes/_export.html", context))
        pieces.append(
            f'\n<p class="error">parse error: {escape(parse_error)}</p>\n' if parse_error else "\n\n"
        )
        pieces.append(self.transports(transport))
        # The body, and the end of the item.
        pretty = pretty_json(raw)
        body = pretty or raw.decode("utf-8", errors="replace")
        if body:
            pieces.append(f'\n<pre class="{"json" if pretty else "raw"}">{escape(body[:BODY_LIMIT])}</pre>')
            pieces.append(CUT if len(body) > BODY_LIMIT else "")
            pieces.append("\n</details></li>\n")
        else:
            pieces.append("\n\n</details></li>\n")
        return "".join(pieces)
