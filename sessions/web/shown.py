"""``{{ value }}`` without the template engine: what a value looks like in a page, for the parts of
pages written in Python because they repeat (timeline rows, plot marks); byte for byte what the
template language shows (tests/test_timeline_rows.py holds each such part against its template)."""

from __future__ import annotations

import html
from typing import Any

from django.template import Context
from django.template.base import render_value_in_context
from django.utils.formats import localize

__all__ = ["MISSING", "Shown"]

MISSING: Any = object()  # what a template lookup does not find (shown as "", false in a condition)


class Shown:
    """``{{ value }}`` in one rendering: text escaped, numbers localized (is grouping on? asked once)."""

    def __init__(self) -> None:
        self.context = Context()
        # Integers are shown as their digits unless thousands are grouped: ask the real thing once.
        self.plain_ints = localize(1234567) == "1234567"

    def __call__(self, value: Any) -> str:
        kind = type(value)
        if kind is str:
            return html.escape(value)  # django.utils.html.escape of a plain str, without the SafeString
        if kind is int and self.plain_ints:
            return str(value)
        if value is MISSING:
            return ""
        return render_value_in_context(value, self.context)
