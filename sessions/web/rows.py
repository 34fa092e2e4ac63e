"""The timeline's rows as HTML, written in Python: the session page, a page of older rows, and the live
socket's batches (every 0.25 s during a flood) all render them, and the template they replace spent most
of its time resolving variables and in a template include per row for the notes marker.

The output is byte for byte what ``tests/templates/timeline_rows_oracle.html`` (the former
``sessions/_timeline_rows.html``) renders, which ``tests/test_timeline_rows.py`` checks over every row
shape: values are looked up as the template language looks them up (a missing key is "", a ``None``
shown is "None"), shown as it shows them (``render_value_in_context``: localized, then escaped), and
through the same filters (``since``, ``clock``, ``duration_ms``, ``filesizeformat``, ``truncatechars``,
``pluralize``), called here rather than written again.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.template.base import render_value_in_context
from django.template.defaultfilters import filesizeformat, pluralize
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

from sessions.templatetags.instrument import clock, duration_ms, since
from sessions.timeline.shown import MISSING, Shown, lookup, truncated

__all__ = ["timeline_rows"]

PREVIEW_CUT = 160  # the preview column's width, in characters (truncatechars)


def _cond(value: Any) -> Any:
    """A lookup as ``{% if %}`` reads it: what is missing is None."""
    return None if value is MISSING else value


class _Shown(Shown):
    """Values shown in one rendering of rows, and their sizes (``filesizeformat``) remembered."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[Any, str] = {}

    def size(self, value: Any) -> str:
        """``{{ value|filesizeformat }}``, remembered per value for this rendering."""
        key = (type(value), value) if isinstance(value, int | float | str) else None
        if key is not None and key in self.sizes:
            return self.sizes[key]
        text = conditional_escape(filesizeformat("" if value is MISSING else value))
        if key is not None:
            self.sizes[key] = text
        return text


def _marker(shown: _Shown, seq: Any, count: Any) -> str:
    """``sessions/notes/_marker.html`` with ``oob=False``: a frame's notes, as the timeline shows them."""
    if not count or count is MISSING:
        return f'<span class="notes-mark" id="notes-{shown(seq)}"></span>\n'
    n = shown(count)
    return (
        f'<span class="notes-mark" id="notes-{shown(seq)}" title="{n} note{shown(pluralize(count))}">'
        f"✎{n}</span>\n"
    )


def _what(shown: _Shown, f: dict[str, Any]) -> str:
    """The "what" column: the method, the HTTP exchange, the OAuth step, or the kind."""
    kind = f.get("kind", MISSING)
    if kind == "message":
        return shown(f.get("method") or f.get("rpc_kind", MISSING))
    transport = f.get("transport")
    if kind == "http":
        prefix = "OAuth HTTP " if _cond(lookup(transport, "http", "oauth")) else "HTTP "
        method = lookup(transport, "http", "method")
        return prefix + shown(method if _cond(method) else lookup(transport, "http", "status"))
    if lookup(transport, "state") == "oauth":
        return "OAuth " + shown(_cond(lookup(transport, "oauth", "step")) or "")
    return shown(kind)


def _verdicts(shown: _Shown, verdicts: Any) -> str:
    if verdicts is MISSING or verdicts is None:
        return ""
    if not hasattr(verdicts, "__len__"):
        verdicts = list(verdicts)
    out = []
    for v in verdicts:
        code, severity = shown(lookup(v, "code")), shown(lookup(v, "severity"))
        out.append(
            f'<button type="button" class="verdict sev-{severity}" data-filter-rule="{code}"'
            f' title="{shown(lookup(v, "message"))} (click to show only the frames that broke {code})"'
            f' aria-label="Show {code} frames in the timeline">{code}</button>'
        )
    return "".join(out)


def _row(shown: _Shown, f: dict[str, Any], start: str) -> str:
    get = f.get
    seq = shown(get("seq", MISSING))
    direction = get("direction", MISSING)
    worst = get("worst")
    rpc_kind = get("rpc_kind")
    wall = get("wall")
    rpc_id = get("rpc_id")
    latency = get("latency_ms")
    size = get("size", MISSING)
    note = get("note")
    preview = get("preview", MISSING)
    arrow = "→" if direction == "out" else "←" if direction == "in" else "•"
    text = note if note else ("" if preview is MISSING else preview)
    return (
        f'<div class="frame kind-{shown(get("kind", MISSING))} dir-{shown(direction)}'
        f"{f' worst-{shown(worst)}' if worst else ''}{' rpc-error' if rpc_kind == 'error' else ''}"
        f'" role="listitem" id="f-{seq}" data-seq="{seq}"\n'
        '  tabindex="0">\n'
        f'  <span class="seq">{seq}</span>\n'
        f'  <span class="t"><span class="t-rel">{shown(since(wall, start))}</span>'
        f'<span class="t-abs">{shown(clock(wall))}</span></span>\n'
        f'  <span class="dir" title="{shown(direction)}">{arrow}</span>\n'
        f'  <span class="what">{_what(shown, f)}</span>\n'
        f'  <span class="rid">{"#" + shown(rpc_id) if rpc_id else ""}</span>\n'
        f'  <span class="lat">{shown(duration_ms(latency)) if latency is not None else ""}</span>\n'
        f'  <span class="size" title="{shown(size)} bytes">{shown.size(size)}</span>\n'
        f'  <span class="verdicts">{_marker(shown, get("seq", MISSING), get("notes"))}'
        f"{_verdicts(shown, get('verdicts'))}</span>\n"
        f'  <span class="preview">{shown(truncated(text, PREVIEW_CUT))}</span>\n'
        "</div>"
    )


def timeline_rows(rows: Iterable[dict[str, Any]] | None, session: Any = None, t0: Any = None) -> SafeString:
    """The timeline's rows (``page_of_rows``' dicts, or a live batch's), as the timeline shows them;
    their times counted from ``t0``, else from the session's start."""
    shown = _Shown()
    origin = t0 or getattr(session, "start_wall", None)
    start = render_value_in_context(origin, shown.context) if origin else ""
    return mark_safe("".join([_row(shown, f, start) for f in rows or ()]) + "\n")
