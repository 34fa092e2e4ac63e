"""The session page's instruments in Chromium, against server-everything: the capability table, the
lifecycle bar, the timeline's time column and its switch, and the Conformance tab's plots.

Set ``INSPECTOR_SCREENSHOTS`` to a folder to keep screenshots of each view, light and dark.
"""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from support.browser import (
    LiveApp,
    assert_clean,
    call_card,
    connect,
    open_page,
    open_tab,
    send_raw,
    timeline_rows,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _shoot(page: Any, name: str) -> None:
    """Keep a screenshot of the page, light and dark, when INSPECTOR_SCREENSHOTS names a folder."""
    folder = os.environ.get("INSPECTOR_SCREENSHOTS")
    if not folder:
        return
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.screenshot(path=os.path.join(folder, f"{name}-{scheme}.png"), full_page=False)
    page.emulate_media(color_scheme="light")


def test_the_session_page_shows_capabilities_as_a_table_the_lifecycle_as_a_bar_times_and_plots(
    app_context: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    page = open_page(app_context, live_app.url("/"))
    connect(page, stdio=everything_stdio)
    send_raw(page, "resources/subscribe", '{"uri": "demo://resource/static/document/architecture.md"}')
    expect(call_card(page, "resources/subscribe").get_by_role("status")).to_have_text("done")
    send_raw(page, "tools/call", '{"name": "echo", "arguments": {"message": "hi"}}')
    expect(call_card(page, "tools/call", "echo").get_by_role("status")).to_have_text("done")

    # A reload renders the Overview with the counts the timeline holds now.
    page.goto(page.url.split("?")[0] + "?tab=overview")
    table = page.locator("table.cap-table")
    subscribe = table.locator('tr[data-capability="resources.subscribe"]')
    expect(subscribe.locator("td").nth(1)).to_have_text("✓ declared")
    expect(subscribe.locator("td.cap-used")).to_have_text("1 subscription")
    sampling = table.locator('tr[data-capability="sampling"]')
    expect(sampling.locator("td").first).to_contain_text("✓ declared")
    expect(sampling.locator(".cap-toggle")).to_have_text("sampling: on")
    expect(table.locator('tr[data-capability="tools"] td.cap-used')).to_contain_text("1 call")
    expect(table.locator("tr.mismatch")).to_have_count(0)

    bar = page.locator("svg.lifecycle-bar")
    expect(bar).to_be_visible()
    expect(bar.locator('rect[data-state="ready"]')).to_have_count(1)
    expect(page.locator(".phase-list")).to_contain_text("initializing")
    assert float(bar.locator('rect[data-state="ready"]').get_attribute("width") or 0) > 0
    _shoot(page, "overview")
    page.get_by_text("Raw JSON", exact=True).click()
    expect(page.locator(".cap-raw pre.json").first).to_contain_text('"sampling"')

    # Time on every row: since the start by default; the switch shows the clock, and it stays so.
    row = timeline_rows(page, "initialize").first
    expect(row.locator(".t-rel")).to_be_visible()
    expect(row.locator(".t-rel")).to_have_text(re.compile(r"^\+\d+\.\d{3} s$"))
    expect(row.locator(".t-abs")).to_be_hidden()
    page.get_by_role("button", name="clock").click()
    expect(row.locator(".t-abs")).to_have_text(re.compile(r"^\d\d:\d\d:\d\d\.\d{3}$"))
    expect(row.locator(".t-rel")).to_be_hidden()
    page.reload()
    row = timeline_rows(page, "initialize").first
    expect(row.locator(".t-abs")).to_be_visible()
    expect(page.get_by_role("button", name="clock")).to_have_attribute("aria-pressed", "true")
    # Full method names: the longest one is never cut.
    updated = timeline_rows(page, "notifications/initialized").first
    expect(updated.locator(".what")).to_have_text("notifications/initialized")
    assert updated.locator(".what").evaluate("e => e.scrollWidth <= e.clientWidth")
    # Latency and size never run into each other.
    answer = timeline_rows(page, "initialize").nth(1)
    latency, size = answer.locator(".lat").bounding_box(), answer.locator(".size").bounding_box()
    assert latency and size and latency["x"] + latency["width"] <= size["x"]
    expect(answer.locator(".lat")).to_have_text(re.compile(r"^\d+(\.\d+)? m?s$"))
    row.click()
    expect(page.locator("#frame-detail .detail-time .t-abs")).to_contain_text("UTC")
    _shoot(page, "timeline")
    page.get_by_role("button", name="since start").click()

    open_tab(page, "Conformance")
    methods = page.locator("#plot-latency-methods")
    expect(methods).to_be_visible()
    expect(methods.locator(".lm-method", has_text="initialize")).to_be_visible()
    expect(methods.locator("svg.lm-bars rect.bar").first).to_be_attached()
    expect(page.locator("#plot-latency-time svg.heat rect.cell").first).to_be_attached()
    expect(page.locator("#plot-fps svg.fps")).to_be_visible()
    page.locator("#plot-latency-methods").scroll_into_view_if_needed()
    _shoot(page, "conformance")
    assert_clean(page)
    page.close()
