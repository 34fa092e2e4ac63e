"""End to end in Chromium: alice shares her live session; a visitor with no account watches it live
through the link; alice revokes it and the visitor's page says so at once."""

from __future__ import annotations

from typing import Any

import pytest
from support.browser import (
    LONG,
    LiveApp,
    assert_clean,
    connect,
    new_context,
    open_page,
    send_raw,
    timeline_rows,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_visitor_watches_a_shared_session_live_until_it_is_revoked(
    app_context: Any, browser: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    alice = open_page(app_context, live_app.url("/"))
    connect(alice, stdio=everything_stdio)
    alice.get_by_text("Share", exact=True).click()
    form = alice.locator("#share-form")
    form.get_by_label("Label").fill("for carol")
    form.get_by_label("Who may open it").select_option("anyone")
    form.get_by_text("More redaction").click()
    form.get_by_label("Patterns (regular expressions), one a line").fill("Everything")
    form.get_by_role("button", name="Preview").click()
    preview = alice.locator(".share-preview")
    expect(preview).to_contain_text("initialize")
    expect(preview).to_contain_text("[redacted]")  # the pattern masks the server's name
    form.get_by_role("button", name="Make the link").click()
    link = alice.locator("#share-url")
    expect(link).to_be_visible()
    url = link.input_value()
    assert "/shared/" in url

    visitor_context = new_context(browser, viewport={"width": 1400, "height": 1000})  # no account
    visitor_context.set_default_timeout(LONG)
    carol = open_page(visitor_context, url)
    expect(carol.locator("h1")).to_be_visible()
    expect(timeline_rows(carol, "initialize")).to_have_count(2)
    assert carol.locator("form[method=post], [hx-post]").count() == 0
    carol.locator("#tabs").get_by_text("Conformance").click()
    expect(carol.locator("#panel")).to_contain_text("Latency by method")

    send_raw(alice, "prompts/list")
    expect(timeline_rows(carol, "prompts/list")).to_have_count(2)  # request and answer, live
    timeline_rows(carol, "prompts/list").first.click()
    expect(carol.locator("#frame-detail")).to_contain_text("prompts/list")

    alice.once("dialog", lambda dialog: dialog.accept())
    alice.locator(".share-list").get_by_role("button", name="Revoke").click()
    expect(carol.locator("#share-gone")).to_contain_text("revoked")
    expect(alice.locator(".share-list")).to_contain_text("revoked")
    assert_clean(alice, carol)
    visitor_context.close()
