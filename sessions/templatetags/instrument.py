"""Template filters for the session page's instruments: times, durations, and numbers for SVG."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from django import template
from django.template.defaultfilters import floatformat
from django.utils.safestring import SafeString, mark_safe

from sessions.timeline.shown import Shown

register = template.Library()


def _number(value: Any) -> float | None:
    """A finite number, or None; text as ``{% firstof %}`` leaves a number is read back."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


@register.filter
def duration_ms(value: Any) -> str:
    """A duration in milliseconds, in the unit that reads best: 0.42 ms, 742 ms, 27.2 s, 3 min 20 s."""
    ms = _number(value)
    if ms is None:
        return ""
    if ms < 10:
        return f"{ms:.2f} ms"
    if ms < 1000:
        return f"{ms:.1f} ms" if ms < 100 else f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.1f} s"
    minutes, seconds = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _utc(wall: Any) -> datetime | None:
    """Wall-clock seconds as a UTC datetime; None for what is not a time."""
    seconds = _number(wall)
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


@register.filter
def clock(wall: Any) -> str:
    """Wall-clock seconds as the time of day to the millisecond (UTC, as every page shows times)."""
    moment = _utc(wall)
    return moment.strftime("%H:%M:%S.%f")[:12] if moment is not None else ""


@register.filter
def iso_time(wall: Any) -> str:
    """Wall-clock seconds as an ISO 8601 date and time (a <time> element's datetime)."""
    moment = _utc(wall)
    return moment.isoformat(timespec="milliseconds") if moment is not None else ""


@register.filter
def since(wall: Any, start: Any) -> str:
    """Seconds after the session's start, signed, to the millisecond: +1.234 s."""
    at, origin = _number(wall), _number(start)
    if at is None or origin is None:
        return ""
    offset = at - origin
    if abs(offset) >= 3600:
        hours, rest = divmod(abs(offset), 3600)
        return f"{'-' if offset < 0 else '+'}{int(hours)}:{int(rest // 60):02d}:{rest % 60:06.3f}"
    if abs(offset) >= 60:
        minutes, rest = divmod(abs(offset), 60)
        return f"{'-' if offset < 0 else '+'}{int(minutes)}:{rest:06.3f}"
    return f"{offset:+.3f} s"


@register.filter
def svg_number(value: Any) -> str:
    """A number for an SVG attribute: plain digits and a dot whatever the locale, three decimals."""
    number = _number(value)
    return "0" if number is None else f"{number:.3f}".rstrip("0").rstrip(".") or "0"


# The plots' marks, hundreds a plot: written in Python, each exactly what its template loop wrote
# (tests/timeline/test_timeline_rows.py holds them against those loops).


@register.simple_tag
def heat_cells(cells: Any) -> SafeString:
    """The latency heatmap's cells: a rect each, its opacity the answers it holds."""
    shown = Shown()
    return mark_safe(
        "".join(
            f'<rect class="cell" x="{shown(c.x)}" y="{shown(c.y)}" width="1" height="1"'
            f' fill-opacity="{shown(svg_number(c.opacity))}"><title>{shown(c.count)}</title></rect>'
            for c in cells or ()
        )
    )


@register.simple_tag
def fps_bars(bars: Any) -> SafeString:
    """The frames-per-second plot's bars."""
    shown = Shown()
    return mark_safe(
        "".join(
            f'<rect class="bar" x="{shown(b.x)}" y="{shown(svg_number(b.y))}" width="0.9"'
            f' height="{shown(svg_number(b.height))}"><title>{shown(floatformat(b.rate, "-1"))} frames/s'
            "</title></rect>"
            for b in bars or ()
        )
    )


@register.simple_tag
def method_bars(bars: Any) -> SafeString:
    """One method's latency histogram: a bar per non-empty bucket."""
    shown = Shown()
    return mark_safe(
        "".join(
            f'<rect class="bar" x="{shown(b.x)}.1" y="{shown(svg_number(b.y))}" width="0.8"'
            f' height="{shown(svg_number(b.height))}"><title>{shown(b.count)} from {shown(b.label)}'
            "</title></rect>"
            for b in bars or ()
        )
    )


def _field(value: Any, key: str) -> Any:
    """``value[key]`` when value is a dict, else None: a stored frame's shape is not trusted."""
    return value.get(key) if isinstance(value, dict) else None


@register.filter
def frame_what(f: Any) -> str:
    """What a timeline row calls its frame: the method, an HTTP exchange, an OAuth step, or its kind."""
    transport = _field(f, "transport")
    http = _field(transport, "http")
    if _field(f, "kind") == "message":
        return str(_field(f, "method") or _field(f, "rpc_kind") or "")
    if _field(f, "kind") == "http":
        oauth = "OAuth " if _field(http, "oauth") else ""
        return f"{oauth}HTTP {_field(http, 'method') or _field(http, 'status') or ''}".rstrip()
    if _field(transport, "state") == "oauth":
        return f"OAuth {_field(_field(transport, 'oauth'), 'step') or ''}".rstrip()
    if _field(transport, "state") == "app-message":  # MCP Apps: a message between a view and its host
        app = _field(transport, "app")
        arrow = "⇠" if _field(app, "direction") == "in" else "⇢"
        return f"app {arrow} {_field(app, 'what') or ''}".rstrip()
    return str(_field(f, "kind") or "")
