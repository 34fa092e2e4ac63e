"""``{{ value }}`` without the template engine: what a value looks like in a page, for the parts of
pages and files written in Python because they repeat by the thousand (plot marks, the HTML export's
frames); what the template language shows (tests/timeline/test_timeline_rows.py and
tests/timeline/test_exports.py hold each such part against its template)."""

from __future__ import annotations

import html
from typing import Any

from django.template import Context
from django.template.base import render_value_in_context
from django.template.defaultfilters import truncatechars
from django.utils.formats import localize
from django.utils.text import add_truncation_text, calculate_truncate_chars_length

__all__ = ["Shown", "truncated"]


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
        return render_value_in_context(value, self.context)


def truncated(value: Any, cut: int) -> str:
    """``value|truncatechars:cut``, quickly for Latin-1 text (ASCII included): NFC leaves it alone and
    none of its characters is combining, so truncatechars counts each as one. Such text that fits is
    itself; longer, it is its head cut as truncatechars cuts it (its Python loop over each character
    cost more than the rest of an exported frame), with truncatechars's own functions. The tests hold it
    to truncatechars."""
    if type(value) is str and cut > 0 and _latin_1(value):
        if len(value) <= cut:
            return value
        return add_truncation_text(value[: calculate_truncate_chars_length(cut, None)], None)
    return truncatechars(value, cut)


def _latin_1(text: str) -> bool:
    """Whether every character of ``text`` is Latin-1 (U+0000 to U+00FF): a copy when it is."""
    if text.isascii():
        return True
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return True
