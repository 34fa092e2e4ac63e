"""OAuth in Chromium: connect to a server behind OAuth, authorize in the tab the page opens by itself,
call a tool; walk the same flow in the OAuth debugger one step at a time; forget the tokens. The page
opens the authorization page once (not on a reload), and the card's Cancel ends the session's wait.

The server is the Python SDK's authorization support (tests/servers/protected_web.py): its
authorization server approves at once and redirects back to the inspector's callback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from support.browser import (
    LONG,
    LiveApp,
    assert_clean,
    call_card,
    call_tool_raw,
    list_tools,
    open_page,
    open_tab,
    status,
)
from support.oauth import protected_web

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def protected_url() -> Iterator[str]:
    with protected_web() as url:
        yield url


def _authorized(tab: Any) -> None:
    """The authorization page a card opened comes back through our callback."""
    expect(tab.get_by_role("heading", name="Authorized")).to_be_visible(timeout=LONG)
    tab.close()


def _authorize(page: Any, host: str) -> None:
    """Click the "Authorize at" card's link (the debugger's card opens nothing by itself)."""
    link = page.get_by_role("link", name=f"Authorize at {host}")
    expect(link).to_be_visible(timeout=LONG)
    with page.expect_popup() as opened:
        link.click()
    _authorized(opened.value)


def _connect(page: Any, url: str) -> None:
    form = page.locator("#connect-form")
    form.get_by_label("Transport").select_option(label="Streamable HTTP")
    form.get_by_label("URL", exact=True).fill(url)
    form.get_by_text("Authorization (OAuth)").click()
    expect(form.get_by_label("Authorize with OAuth when the server asks")).to_be_checked()
    form.get_by_role("button", name="Connect", exact=True).click()
    page.wait_for_url(re.compile(r"/s/"))


def test_a_protected_server_is_authorized_in_the_browser_then_debugged_step_by_step(
    app_context: Any, live_app: LiveApp, protected_url: str
) -> None:
    host = protected_url.split("/")[2]
    page = open_page(app_context, live_app.url("/"))
    # The 401 starts the flow: the card names the authorization server and the page opens it in a
    # new tab by itself; authorizing there makes the session ready.
    with app_context.expect_page(timeout=LONG) as opened:
        _connect(page, protected_url)
    _authorized(opened.value)
    expect(status(page)).to_have_text("ready", timeout=LONG)
    expect(page.locator("#oauth-authorizations article")).to_have_count(0)
    list_tools(page, until=("whoami",))
    call_tool_raw(page, "whoami", "{}")
    expect(call_card(page, "tools/call", "whoami").first).to_contain_text("mcp:tools", timeout=LONG)
    # The flow's steps read as such on the timeline, and the challenge is shown as the server sent it
    # (the metadata URL a person needs), not masked.
    expect(page.locator("#timeline-rows")).to_contain_text("OAuth resource-metadata")
    page.locator("#timeline-rows").get_by_text("the server asks for authorization").first.click()
    expect(page.locator("#frame-detail")).to_contain_text("resource_metadata=")

    # The debugger, from the session: the same server and settings, one step at a time.
    session_url = page.url
    page.get_by_role("link", name="Debug OAuth").click()
    page.get_by_role("button", name=re.compile(r"^Debug ")).click()
    page.wait_for_url(re.compile(r"/oauth$"))
    run = page.get_by_role("button", name="Run the next step")

    def step(name: str) -> Any:
        return page.locator(f"#step-{name}")

    for name in ("discovery", "resource-metadata", "authorization-server", "client"):
        run.click()
        expect(step(name)).to_have_attribute("data-outcome", "done", timeout=LONG)
    expect(step("discovery")).to_contain_text("401 Unauthorized")
    expect(step("discovery")).to_contain_text("www-authenticate")
    expect(step("resource-metadata")).to_contain_text("/.well-known/oauth-protected-resource/mcp")
    expect(step("resource-metadata")).to_contain_text("RFC 9728")  # what the spec requires
    expect(step("authorization-server")).to_contain_text("code_challenge_methods_supported")
    expect(step("client")).to_contain_text("dynamic client registration")
    expect(step("client")).to_contain_text(live_app.url("/oauth/callback"))  # our redirect URI
    expect(step("client")).to_contain_text('"application_type": "web"')

    run.click()  # authorization: waits for the person
    expect(step("authorization")).to_have_attribute("data-outcome", "running", timeout=LONG)
    _authorize(page, host)
    expect(step("authorization")).to_have_attribute("data-outcome", "done", timeout=LONG)
    expect(step("authorization")).to_contain_text("code_challenge_method=S256")

    page.get_by_role("button", name="Run all").click()
    expect(step("request")).to_have_attribute("data-outcome", "done", timeout=LONG)
    expect(step("token")).to_contain_text("Bearer token for mcp:tools")
    expect(step("token")).to_contain_text("access_token")
    expect(step("request")).to_contain_text("initialize")
    expect(page.get_by_role("button", name="Run the next step")).to_have_count(0)

    # Forget the tokens: the session authorizes again at its next request.
    page.goto(session_url)
    expect(status(page)).to_have_text("ready")
    page.get_by_role("button", name="Forget tokens").click()
    expect(page.get_by_role("status").filter(has_text="Tokens forgotten.")).to_be_visible()
    open_tab(page, "Tools")
    with app_context.expect_page(timeout=LONG) as opened:
        page.locator("#tools-panel").get_by_role("button", name=re.compile(r"^List tools")).click()
    _authorized(opened.value)  # the card again, its page opened: the stored token is gone
    expect(page.get_by_role("button", name="Open tool whoami", exact=True)).to_be_visible(timeout=LONG)
    assert_clean(page)
    page.close()


def test_the_card_opens_its_page_once_cancel_ends_the_wait_and_readiness_opens_tools(
    app_context: Any, live_app: LiveApp
) -> None:
    held: list[str] = []

    def hold(route: Any) -> None:
        """The person has not approved yet: the authorization server's page stays open."""
        held.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<title>Approve?</title><p>Approve?</p>")

    with protected_web() as url:  # a server of this test's own: no tokens stored for it
        host = url.split("/")[2]
        app_context.route(f"http://{host}/authorize*", hold)
        page = open_page(app_context, live_app.url("/"))
        page.set_viewport_size({"width": 800, "height": 900})
        card = page.locator("#oauth-authorizations article")

        # The card opens its page by itself, and says so; Cancel ends the session's wait at once.
        with app_context.expect_page(timeout=LONG) as opened:
            _connect(page, url)
        expect(opened.value).to_have_title("Approve?")
        opened.value.close()
        expect(card).to_contain_text(re.compile(r"in a new tab.*If your browser block.*, use the button"))
        expect(card).to_contain_text("the session waits 10 minutes for it")
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 800
        page.get_by_role("button", name=f"Cancel the authorization at {host}").click()
        expect(card).to_have_count(0)
        expect(status(page)).to_have_text("failed", timeout=LONG)
        expect(page.locator("#timeline-rows")).to_contain_text("the authorization was cancelled")

        # Again: one tab opens, and no other on a reload. The person picks a tab while the server
        # waits; it stays theirs. Another page of the session, where nobody picks one, opens Tools.
        page.goto(live_app.url("/"))
        with app_context.expect_page(timeout=LONG) as opened:
            _connect(page, url)
        approve = opened.value
        pages = len(app_context.pages)
        page.reload()
        expect(card).to_contain_text("opened already")
        open_tab(page, "Activity")
        other = open_page(app_context, page.url.split("?")[0])
        expect(other.locator("#oauth-authorizations article")).to_contain_text("opened already")
        assert len(app_context.pages) == pages + 1  # the other page, and no authorization page

        app_context.unroute(f"http://{host}/authorize*")
        approve.goto(held[-1])
        _authorized(approve)
        expect(status(page)).to_have_text("ready", timeout=LONG)
        expect(other.get_by_role("button", name="Open tool whoami", exact=True)).to_be_visible(timeout=LONG)
        expect(other.get_by_role("tab", name="Tools", exact=True)).to_have_attribute("aria-selected", "true")
        activity = page.get_by_role("tab", name="Activity", exact=True)
        expect(activity).to_have_attribute("aria-selected", "true")
        assert_clean(page, other)
        other.close()
        page.close()
