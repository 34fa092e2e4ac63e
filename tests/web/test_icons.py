"""Icons a server sends are shown as escaped JSON, never as an image or a link: an unsafe one does nothing."""

from __future__ import annotations

import uuid
from html.parser import HTMLParser
from typing import Any

import pytest
from django.template.loader import render_to_string

UNSAFE = [
    {"src": "javascript:alert(1)", "mimeType": "image/png"},
    {"src": 'x" onerror="alert(2)', "mimeType": "image/png"},
    {"src": "file:///etc/passwd"},
]
SESSION = {"public_id": uuid.UUID(int=1)}


class Attributes(HTMLParser):
    """Every attribute of every tag of a page, as the browser parses it."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found += [(name, value or "") for name, value in attrs]


def attributes_naming_icons(page: str) -> list[tuple[str, str]]:
    """Attributes that carry an icon's URI, or an event handler the icon's text could have opened."""
    return [
        (name, value)
        for name, value in Attributes(page).found
        if name.startswith("on") or "javascript" in value or "passwd" in value
    ]


@pytest.mark.parametrize(
    ("template", "context"),
    [
        (
            "sessions/tools/_form.html",
            {"tool": {"name": "t", "inputSchema": {"type": "object"}, "icons": UNSAFE}, "root": None},
        ),
        (
            "sessions/results/_content.html",
            {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a", "icons": UNSAFE}]},
        ),
    ],
)
def test_an_unsafe_icon_is_never_rendered_as_an_image_or_link(template: str, context: dict[str, Any]) -> None:
    page = render_to_string(template, {"session": SESSION, **context})
    assert attributes_naming_icons(page) == []
    if template.endswith("_form.html"):
        assert "javascript:alert(1)" in page  # shown to the person, as text
