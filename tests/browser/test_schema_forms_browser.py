"""The tool form's anyOf/oneOf choice in Chromium: picking a variant shows its fields, and only its."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.template.loader import render_to_string
from support.browser import CHROMIUM, CHROMIUM_ARGS, SHORT

from sessions.web.schema_forms import build_form

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SCHEMA = {
    "type": "object",
    "properties": {
        "shape": {
            "oneOf": [
                {
                    "title": "circle",
                    "type": "object",
                    "properties": {"r": {"type": "number"}},
                    "required": ["r"],
                },
                {
                    "title": "square",
                    "type": "object",
                    "properties": {"side": {"type": "number"}},
                    "required": ["side"],
                },
            ]
        }
    },
    "required": ["shape"],
}


@pytest.fixture
def page() -> Iterator[Any]:
    """A blank Chromium page (Debian's, never a downloaded one) with our JavaScript and htmx."""
    with playwright.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = chromium.new_page()
            page.set_default_timeout(SHORT)
            yield page
        finally:
            chromium.close()


def test_picking_a_variant_shows_its_fields_and_stars_and_hides_the_others(page: Any) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    form = build_form(SCHEMA)
    fields = "".join(render_to_string("sessions/tools/_field.html", {"field": f}) for f in form.children)
    page.set_content(f'<form class="schema-form">{fields}</form>')
    for script in ("django_htmx/htmx-2.min.js", "inspector/app.js"):
        page.add_script_tag(path=finders.find(script))
    circle, side = page.locator('[name="arg.shape.~0.r"]'), page.locator('[name="arg.shape.~1.side"]')
    stars = page.locator("abbr.req")
    expect(circle).to_be_visible()
    expect(side).to_be_hidden()
    expect(stars.locator("visible=true")).to_have_count(2)  # "shape" and the circle's "r"

    page.get_by_label("shape: variant").select_option(label="square")
    expect(side).to_be_visible()
    expect(circle).to_be_hidden()
    expect(stars.locator("visible=true")).to_have_count(2)  # "shape" and the square's "side"
    assert not errors


CHECKED = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "enum": ["New York", "Paris"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 5},
        "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
    },
    "required": ["location", "days"],
}


def test_a_form_missing_a_required_value_or_out_of_its_limits_is_not_sent_but_raw_json_is(page: Any) -> None:
    form = build_form(CHECKED)
    fields = "".join(render_to_string("sessions/tools/_field.html", {"field": f}) for f in form.children)
    buttons = '<button name="mode" value="form">Call</button>'
    buttons += '<button name="mode" value="raw" formnovalidate>Raw</button>'
    page.set_content(f'<form class="schema-form" id="f">{fields}{buttons}</form>')
    page.evaluate(
        "() => { window.sent = []; document.getElementById('f').addEventListener('submit', (e) => {"
        " e.preventDefault(); window.sent.push(e.submitter.value); }); }"
    )
    call, raw = page.get_by_role("button", name="Call"), page.get_by_role("button", name="Raw")
    location, days = page.locator('[name="arg.location"]'), page.locator('[name="arg.days"]')
    call.click()
    assert page.evaluate("window.sent") == []
    expect(location).to_have_js_property("validity.valueMissing", True)
    raw.click()  # the raw JSON is the person's to send as it is
    assert page.evaluate("window.sent") == ["raw"]
    location.select_option("Paris")
    days.fill("9")
    call.click()
    assert page.evaluate("window.sent") == ["raw"]
    expect(days).to_have_js_property("validity.rangeOverflow", True)
    days.fill("3")
    call.click()  # the optional object's required "lat" may stay empty
    assert page.evaluate("window.sent") == ["raw", "form"]
