"""OAuth in Chromium: connect to a server behind OAuth, authorize in a new tab, call a tool; walk the
same flow in the OAuth debugger one step at a time; forget the tokens.

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


def _authorize(page: Any, host: str) -> None:
    """Click the "Authorize at" card's link; the new tab comes back through our callback."""
    link = page.get_by_role("link", name=f"Authorize at {host}")
    expect(link).to_be_visible(timeout=LONG)
    with page.expect_popup() as opened:
        link.click()
    tab = opened.value
    expect(tab.get_by_role("heading", name="Authorized")).to_be_visible(timeout=LONG)
    tab.close()


def test_a_protected_server_is_authorized_in_the_browser_then_debugged_step_by_step(
    app_context: Any, live_app: LiveApp, protected_url: str
) -> None:
    host = protected_url.split("/")[2]
    page = open_page(app_context, live_app.url("/"))
    form = page.locator("#connect-form")
    form.get_by_label("Transport").select_option(label="Streamable HTTP")
    form.get_by_label("URL", exact=True).fill(protected_url)
    form.get_by_text("Authorization (OAuth)").click()
    expect(form.get_by_label("Authorize with OAuth when the server asks")).to_be_checked()
    form.get_by_role("button", name="Connect", exact=True).click()
    page.wait_for_url(re.compile(r"/s/"))

    # The 401 starts the flow: the card names the authorization server; authorizing makes it ready.
    _authorize(page, host)
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
    page.locator("#tools-panel").get_by_role("button", name=re.compile(r"^List tools")).click()
    _authorize(page, host)  # the card again: the stored token is gone
    expect(page.get_by_role("button", name="Open tool whoami", exact=True)).to_be_visible(timeout=LONG)
    assert_clean(page)
    page.close()
