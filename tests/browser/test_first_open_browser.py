"""A session's first impression in Chromium, against server-everything: a connected session opens on
Tools with its tools listed, each list tab lists once as it first opens, and "List on open", switched
off, keeps every list for the person to ask for.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.browser import LiveApp, assert_clean, connect, open_page, open_tab, timeline_rows

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LISTS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")


def _lists_posted(page: Any) -> list[str]:
    """The list requests the page posts, as it posts them."""
    posted: list[str] = []
    page.on("request", lambda r: posted.append(r.url) if r.method == "POST" and "/list" in r.url else None)
    return posted


def _settled(page: Any) -> None:
    expect(page.locator(".htmx-request, .htmx-swapping, .htmx-settling")).to_have_count(0)


@pytest.mark.parametrize("width", [1440, 800])
def test_a_connected_session_opens_on_its_tools_listed_and_each_list_tab_lists_once(
    app_context: Any, live_app: LiveApp, everything_stdio: dict, width: int
) -> None:
    page = open_page(app_context, live_app.url("/"))
    page.set_viewport_size({"width": width, "height": 900})
    posted = _lists_posted(page)
    connect(page, stdio=everything_stdio)  # the page came while the server was starting

    # Tools, listed without a click; the switch that stops it is in the Tools bar.
    expect(page.get_by_role("tab", name="Tools", exact=True)).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("button", name="Open tool echo", exact=True)).to_be_visible()
    switch = page.locator("#tools-panel").get_by_label("List on open")
    expect(switch).to_be_visible()
    expect(switch).to_be_checked()

    # Resources lists its resources and its templates in one request; prompts theirs.
    open_tab(page, "Resources")
    expect(page.locator(".panel-resources table.fp-table")).to_be_visible()
    expect(page.locator(".panel-resources form.fp-item").first).to_be_visible()  # a template
    open_tab(page, "Prompts")
    expect(page.get_by_role("button", name="Get simple-prompt")).to_be_visible()

    # Each once: open again, they show what they listed and send nothing.
    for tab in ("Tools", "Resources", "Prompts"):
        open_tab(page, tab)
        expect(page.locator("#panel form[data-list-on-open]")).to_have_count(0)
    _settled(page)
    for method in LISTS:
        expect(timeline_rows(page, method)).to_have_count(2)  # the request and its response
    assert [url.rsplit("/s/", 1)[1].split("/", 1)[1] for url in posted] == [
        "panel/tools/list",
        "panel/resources/list",
        "panel/prompts/list",
    ]
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    assert_clean(page)
    page.close()


def test_with_list_on_open_off_a_tab_lists_only_when_asked(
    app_context: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    page = open_page(app_context, live_app.url("/"))
    posted = _lists_posted(page)
    connect(page, stdio=everything_stdio)
    panel = page.locator("#tools-panel")
    expect(panel.get_by_role("button", name="Open tool echo", exact=True)).to_be_visible()
    panel.get_by_label("List on open").uncheck()  # the person's, for every session from now on

    page.goto(live_app.url("/"))
    posted.clear()
    connect(page, stdio=everything_stdio)
    expect(page.get_by_role("tab", name="Tools", exact=True)).to_have_attribute("aria-selected", "true")
    expect(page.locator("#tools-panel")).to_contain_text("No tools/list yet in this session")
    expect(page.locator("#tools-panel").get_by_label("List on open")).not_to_be_checked()
    open_tab(page, "Resources")
    expect(page.locator(".panel-resources")).to_contain_text("Not listed yet")
    _settled(page)
    assert posted == []
    expect(timeline_rows(page, "tools/list")).to_have_count(0)
    expect(timeline_rows(page, "resources/list")).to_have_count(0)

    # Back on: the next first open lists again.
    page.locator(".panel-resources").get_by_label("List on open").check()
    open_tab(page, "Prompts")
    expect(page.get_by_role("button", name="Get simple-prompt")).to_be_visible()
    assert_clean(page)
    page.close()
