"""MCP Apps in Chromium, read back from the recording: a view's "Source", and a view over a share link
(read-only, rendered from the recorded resource and result, with no network, unable to call tools).

A real `mcp-inspector`, Debian's Chromium and our App server (tests/servers/apps_server.py).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
from support.browser import (
    LONG,
    LiveApp,
    assert_clean,
    connect,
    list_tools,
    new_context,
    open_page,
    open_tool,
    status,
    timeline_rows,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

APPS_SERVER = Path(__file__).parents[1] / "servers/apps_server.py"
SHOTS = Path("/tmp/mcp-inspector-apps")


def _call_with_view(page: Any, city: str) -> Any:
    connect(page, stdio={"command": sys.executable, "args": [str(APPS_SERVER), "stdio"]})
    list_tools(page, until=("show_weather",))
    form = open_tool(page, "show_weather")
    form.get_by_label("city").fill(city)
    form.get_by_role("button", name="Call show_weather").click()
    view = page.get_by_role("region", name="View of show_weather").first
    inside = view.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text(f"{city}: ", timeout=LONG)
    return view


def test_source_shows_the_views_html_as_text_and_its_meta_ui_with_the_verdicts(home: Any) -> None:
    view = _call_with_view(home, "Oslo")
    view.get_by_role("button", name="Source", exact=True).click()
    detail = home.locator("#frame-detail")
    source = detail.locator("details.app-source")
    expect(source).to_contain_text("Source of the view ui://weather/view.html")
    source.locator("summary").click()
    # The HTML is text: its markup is shown, never made into elements of our page.
    expect(source.locator(".app-source-html")).to_contain_text("<h1>Weather</h1>")
    expect(source.locator(".app-source-html")).to_contain_text("window.parent.postMessage")
    expect(detail.locator("h1")).to_have_count(0)
    expect(detail.get_by_role("button", name="Flood the host")).to_have_count(0)
    expect(source).to_contain_text('"prefersBorder": true')
    # The planted source that would widen the view's policy is flagged, and left out of the policy.
    expect(source.locator(".verdict-list")).to_contain_text("apps-csp-dropped")
    expect(source.locator(".verdict-list")).to_contain_text("'unsafe-eval'")
    policy = source.locator("pre.raw").first
    expect(policy).to_contain_text("script-src 'unsafe-inline' https://cdn.example.com;")
    expect(policy).not_to_contain_text("unsafe-eval")
    SHOTS.mkdir(exist_ok=True)
    home.screenshot(path=str(SHOTS / "apps-source.png"), full_page=True)
    assert_clean(home)


def test_a_share_renders_the_view_from_the_recording_read_only_and_with_no_network(
    app_context: Any, browser: Any, live_app: LiveApp
) -> None:
    alice = open_page(app_context, live_app.url("/"))
    _call_with_view(alice, "Cairo")
    alice.get_by_text("Share", exact=True).click()
    form = alice.locator("#share-form")
    form.get_by_label("Who may open it").select_option("anyone")
    form.get_by_role("button", name="Make the link").click()
    url = alice.locator("#share-url").input_value()

    visitor = new_context(browser, viewport={"width": 1400, "height": 1000})  # no account
    visitor.set_default_timeout(LONG)
    carol = open_page(visitor, url)
    requests: list[Any] = []
    carol.on("request", lambda request: requests.append(request))
    timeline_rows(carol, "tools/call").filter(has_text="show_weather").first.click()
    view = carol.get_by_role("region", name="View of show_weather")
    inside = view.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text("Cairo: 31 °C")
    expect(inside.locator("#input")).to_have_text('{"city":"Cairo"}')
    expect(view.locator(".app-view-head")).to_contain_text("read-only, no network")
    # The view asks for a tool: refused by the page, saying why; nothing reaches the server.
    inside.get_by_role("button", name="Refresh").click()
    expect(inside.locator("#refreshed")).to_contain_text("error: this is a read-only share")
    expect(timeline_rows(alice, "tools/call").filter(has_text="refresh_weather")).to_have_count(0)
    SHOTS.mkdir(exist_ok=True)
    carol.screenshot(path=str(SHOTS / "apps-share.png"), full_page=True)

    # Its document comes from the recording, under a policy that reaches no network at all (the live
    # view's declared domain is gone too); the frame made no request but for its document.
    frame_element = view.locator("iframe.app-frame")
    document = urljoin(carol.url, frame_element.get_attribute("src") or "")
    assert "/shared/" in document
    policy = carol.request.get(document).headers["content-security-policy"]
    assert "connect-src 'none'" in policy and "sandbox allow-scripts" in policy
    assert "cdn.example.com" not in policy
    from_view = [r.url for r in requests if r.frame.url.startswith(document) and r.url != document]
    assert from_view == []
    # Nothing the share page does posts anything: no form, no hx-post, no view message recorded.
    assert not [r.url for r in requests if r.method != "GET"]
    assert_clean(alice, carol)
    visitor.close()


def test_a_views_tools_call_is_linked_both_ways_and_its_messages_are_a_filter_and_a_flow_lane(
    home: Any,
) -> None:
    view = _call_with_view(home, "Lisbon")
    inside = view.frame_locator("iframe.app-frame")
    inside.get_by_role("button", name="Refresh").click()
    expect(inside.locator("#refreshed")).to_have_text("refreshed Lisbon: 20 °C")
    rows = home.locator("#timeline-rows > .frame")
    asked = rows.filter(has_text="app ⇠ tools/call")
    expect(asked).to_have_count(1)
    # The host's answer to the view (recorded with the next batch) names the request it caused.
    expect(rows.filter(has_text="app ⇢ result #2")).to_have_count(1)  # the view's second request
    # The timeline's filter of their own: only what passed between the view and the page.
    home.get_by_label("view ↔ host").check()
    expect(rows.filter(has_text="resources/read")).to_have_count(0)
    expect(rows.first).to_contain_text("app ")
    assert all("app " in text for text in rows.all_inner_texts())
    asked.click()
    detail = home.locator("#frame-detail")
    expect(detail.locator(".detail-head")).to_contain_text("local state")
    # From the view's message to the request it caused, and back.
    link = detail.get_by_role("link", name=re.compile(r"^request #\d+$"))
    expect(link).to_be_visible()
    asked_seq = asked.get_attribute("data-seq")
    request_seq = (link.inner_text()).removeprefix("request #")
    link.click()
    expect(detail.locator(".detail-head")).to_contain_text(f"#{request_seq} out message tools/call")
    expect(detail).to_contain_text('"refresh_weather"')
    back = detail.get_by_role("link", name=f"the view's message #{asked_seq}")
    back.click()
    expect(detail.locator(".detail-head")).to_contain_text(f"#{asked_seq} local state")
    home.get_by_label("view ↔ host").uncheck()

    # The flow has a lane for them; the host's answer to the view points at its message and at the
    # request to the server.
    home.get_by_role("button", name="Flow", exact=True).click()
    lane = home.locator("#timeline-rows.flow > .flow-row.lane-app")
    expect(lane.filter(has_text="ui/initialize").first).to_be_visible()
    answer = lane.filter(has=home.locator('[title="host → view result #2"]'))
    expect(answer).to_have_count(1)
    home.screenshot(path=str(SHOTS / "apps-flow-lane.png"), full_page=True)
    pairs = (answer.get_attribute("data-pair") or "").split()
    assert asked_seq in pairs and request_seq in pairs, pairs
    home.get_by_role("button", name="Table", exact=True).click()
    assert_clean(home)


def test_a_view_goes_fullscreen_and_back_and_opens_again_after_a_reload_live_or_from_the_recording(
    home: Any,
) -> None:
    view = _call_with_view(home, "Oslo")
    inside = view.frame_locator("iframe.app-frame")
    # A mode the host does not offer is not given: the answer says the mode the view has.
    inside.get_by_role("button", name="Picture in picture").click()
    expect(inside.locator("#log")).to_contain_text("display mode inline")
    inside.get_by_role("button", name="Go fullscreen").click()
    expect(inside.locator("#log")).to_contain_text("display mode fullscreen")
    expect(inside.locator("#log")).to_contain_text("now fullscreen")  # host-context-changed
    expect(view).to_have_attribute("data-display-mode", "fullscreen")
    box = view.locator("iframe.app-frame").bounding_box()
    size = home.viewport_size
    assert box is not None and size is not None
    assert box["width"] > size["width"] * 0.9 and box["height"] > size["height"] * 0.8, (box, size)
    home.screenshot(path=str(SHOTS / "apps-fullscreen.png"))
    home.keyboard.press("Escape")  # focus is on the host's Exit fullscreen, in our page
    expect(view).to_have_attribute("data-display-mode", "inline")
    expect(inside.locator("#log")).to_contain_text("now inline")
    expect(view.get_by_role("button", name="Exit fullscreen")).to_be_hidden()

    # After a reload the call's frame detail opens its view again, when asked: read again, with the
    # call's recorded arguments and result, and live (its tools/call goes through the session).
    home.reload()
    timeline_rows(home, "tools/call").filter(has_text="show_weather").first.click()
    again = home.locator("#frame-detail").get_by_role("region", name="View of show_weather")
    expect(again.locator(".app-view-state")).to_contain_text("not open")
    expect(again.locator("iframe")).to_have_count(0)
    again.get_by_role("button", name="Open view").click()
    inside = again.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text("Oslo: 4", timeout=LONG)
    expect(inside.locator("#input")).to_have_text('{"city":"Oslo"}')
    inside.get_by_role("button", name="Refresh").click()
    expect(inside.locator("#refreshed")).to_have_text("refreshed Oslo: 5 °C")

    # Once the session has ended, the call's view is drawn from the recording, as a share draws it.
    # (First the host's answer to the view is on the timeline: the first view's ui/request-display-mode
    # was its request #2 too.)
    expect(home.locator("#timeline-rows > .frame").filter(has_text="app ⇢ result #2")).to_have_count(2)
    home.get_by_role("button", name="Disconnect").click()
    expect(status(home)).to_have_text("closed", timeout=LONG)
    home.reload()
    timeline_rows(home, "tools/call").filter(has_text="show_weather").first.click()
    recorded = home.locator("#frame-detail").get_by_role("region", name="View of show_weather")
    expect(recorded.locator(".app-view-head")).to_contain_text(
        "read-only, no network (the session is closed)"
    )
    inside = recorded.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text("Oslo: 4", timeout=LONG)
    source = recorded.locator("iframe.app-frame").get_attribute("src") or ""
    assert source.endswith("?offline=1")
    policy = home.request.get(urljoin(home.url, source)).headers["content-security-policy"]
    assert "cdn.example.com" not in policy and "connect-src 'none'" in policy
    inside.get_by_role("button", name="Refresh").click()
    expect(inside.locator("#refreshed")).to_contain_text("error: the session is closed: the view, drawn from")
    assert_clean(home)


def test_what_a_view_said_just_before_the_page_was_reloaded_is_on_the_timeline(home: Any) -> None:
    view = _call_with_view(home, "Oslo")
    rows = home.locator("#timeline-rows > .frame")
    # The view's first messages were sent as a batch: nothing waits to be sent now.
    expect(rows.filter(has_text="app ⇠ ui/notifications/size-changed").first).to_be_visible(timeout=LONG)
    inside = view.frame_locator("iframe.app-frame")
    inside.get_by_role("button", name="Go fullscreen").click()
    expect(inside.locator("#log")).to_contain_text("display mode fullscreen")
    # Well within the half second the page gathers a view's messages for: they go as the page does.
    home.reload()
    expect(rows.filter(has_text="app ⇠ ui/request-display-mode")).to_have_count(1)
    expect(rows.filter(has_text="app ⇢ ui/resource-teardown")).to_have_count(1)
