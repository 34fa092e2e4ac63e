"""End to end in Chromium: a person connects to server-everything and uses the inspector.

A real `mcp-inspector` process, Debian's Chromium through Playwright, and the real server-everything over
stdio and Streamable HTTP. Each test opens its own pages in one logged-in browser context and fails on any
console error, page error or CSP violation.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from support.browser import (
    SHORT,
    LiveApp,
    assert_clean,
    call_card,
    call_tool_raw,
    calls,
    connect,
    everything_children,
    hold,
    list_tools,
    open_page,
    open_tab,
    open_tool,
    second_window,
    send_raw,
    status,
    timeline_ids,
    timeline_rows,
    until_held,
    wait_until,
)
from support.paths import SERVERS

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The module-scoped fixtures: a live app, Chromium, a logged-in context.


def test_connecting_over_stdio_shows_ready_the_version_server_info_capabilities_and_initialize(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    state = home.locator("#session-state")
    expect(state.get_by_title("negotiated protocol version")).to_have_text("2025-11-25")
    expect(state).to_contain_text("stdio")

    open_tab(home, "Overview")
    overview = home.locator("#overview")
    expect(overview.locator("dl.facts dd").first).to_contain_text("Everything")
    capabilities = overview.locator(".caps-compare")
    expect(capabilities.locator('tr[data-capability="sampling"] .cap-yes')).to_be_visible()
    expect(capabilities.locator('tr[data-capability="tools"] .cap-yes')).to_be_visible()
    capabilities.get_by_text("Raw JSON", exact=True).click()
    expect(capabilities.get_by_role("heading", name="Client")).to_be_visible()
    expect(capabilities.get_by_role("heading", name="Server")).to_be_visible()
    client_caps, server_caps = capabilities.locator("pre.json").all()
    expect(client_caps).to_contain_text('"sampling"')
    expect(server_caps).to_contain_text('"tools"')

    initialize = timeline_rows(home, "initialize")
    expect(initialize).to_have_count(2)  # the request and its response
    expect(timeline_rows(home, "notifications/initialized")).to_have_count(1)
    # The overview the server pushes again as the state changes keeps "Raw JSON" open.
    home.get_by_role("button", name="Disconnect").click()
    expect(status(home)).to_have_text("closed")
    expect(capabilities.locator("details.cap-raw")).to_have_attribute("open", "")
    assert_clean(home)


def test_connecting_over_streamable_http_shows_ready_and_the_transport(
    home: Any, everything_http: str
) -> None:
    connect(home, url=everything_http)
    expect(home.locator("#session-state .badge", has_text="streamable-http")).to_be_visible()
    assert_clean(home)


def test_listing_and_calling_tools_shows_text_numbers_and_images(home: Any, everything_stdio: dict) -> None:
    connect(home, stdio=everything_stdio)
    list_tools(home, until=("echo", "get-sum", "get-tiny-image"))

    echo = open_tool(home, "echo")
    echo.get_by_label("message").fill("hello from the browser")
    echo.get_by_role("button", name="Call echo").click()
    card = call_card(home, "tools/call", "echo").first
    expect(card.get_by_role("status")).to_have_text("done")
    expect(card).to_contain_text("Echo: hello from the browser")

    add = open_tool(home, "get-sum")
    add.get_by_label("a", exact=True).fill("19")
    add.get_by_label("b", exact=True).fill("23")
    add.get_by_role("button", name="Call get-sum").click()
    expect(call_card(home, "tools/call", "get-sum").first).to_contain_text("42")

    open_tool(home, "get-tiny-image").get_by_role("button", name="Call get-tiny-image").click()
    image = call_card(home, "tools/call", "get-tiny-image").first.get_by_role("img")
    expect(image).to_be_visible()
    expect(image).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    assert_clean(home)


def test_a_tool_call_goes_over_the_live_socket_and_is_posted_while_the_socket_is_down(
    home: Any, everything_stdio: dict
) -> None:
    posted: list[str] = []
    sent: list[str] = []
    home.on(
        "request", lambda r: posted.append(r.url) if r.method == "POST" and "/tools/call" in r.url else None
    )
    home.on("websocket", lambda socket: socket.on("framesent", lambda payload: sent.append(str(payload))))
    connect(home, stdio=everything_stdio)
    list_tools(home, until=("echo",))
    echo = open_tool(home, "echo")
    echo.get_by_label("message").fill("over the socket")
    echo.get_by_role("button", name="Call echo").click()
    expect(call_card(home, "tools/call", "echo").first).to_contain_text("Echo: over the socket")
    assert posted == [] and [s for s in sent if '"action":"call"' in s and "over the socket" in s]
    call_tool_raw(home, "echo", "[1")  # the form comes back over the socket with what to fix
    expect(home.locator("#tool-raw-error")).to_contain_text("not valid JSON")
    assert posted == []

    # The same page with its live socket refused (a proxy that drops WebSockets): the form posts.
    home.route_web_socket(re.compile(r"/ws/sessions/"), lambda socket: socket.close())
    home.reload()
    echo = open_tool(home, "echo")
    echo.get_by_label("message").fill("posted instead")
    echo.get_by_role("button", name="Call echo").click()
    expect(call_card(home, "tools/call", "echo").first).to_contain_text("Echo: posted instead")
    assert len(posted) == 1 and not [s for s in sent if "posted instead" in s]
    assert_clean(home)


def _progress_value(card: Any) -> float:
    value = card.get_by_role("progressbar").get_attribute("value")
    return float(value) if value is not None else 0.0


def test_a_long_call_shows_rising_progress_and_cancel_stops_another(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    list_tools(home, until=("trigger-long-running-operation",))

    form = open_tool(home, "trigger-long-running-operation")
    form.get_by_label("duration", exact=True).fill("5")
    form.get_by_label("steps", exact=True).fill("5")
    form.get_by_role("button", name="Call trigger-long-running-operation").click()
    card = call_card(home, "tools/call", "trigger-long-running-operation").first
    expect(card.get_by_role("status")).to_have_text("running")
    bar = card.get_by_role("progressbar")
    expect(bar).to_have_attribute("max", "5", timeout=SHORT)
    first = _progress_value(card)
    later = "|".join(str(n) for n in range(int(first) + 1, 6))
    expect(bar).to_have_attribute("value", re.compile(f"^({later})(\\.0)?$"), timeout=SHORT)
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("Long running operation completed")

    form = open_tool(home, "trigger-long-running-operation")
    form.get_by_label("duration", exact=True).fill("30")
    form.get_by_label("steps", exact=True).fill("30")
    form.get_by_role("button", name="Call trigger-long-running-operation").click()
    expect(call_card(home, "tools/call", "trigger-long-running-operation")).to_have_count(2)
    card = call_card(home, "tools/call", "trigger-long-running-operation").first
    expect(card.get_by_role("status")).to_have_text("running")
    card.get_by_role("button", name="Cancel").click()
    expect(card.get_by_role("status")).to_have_text(re.compile("error|cancel"), timeout=SHORT)
    expect(card).to_contain_text(re.compile("cancel", re.IGNORECASE))
    expect(timeline_rows(home, "notifications/cancelled")).to_have_count(1, timeout=SHORT)
    assert_clean(home)


def _reviews(page: Any) -> Any:
    return page.locator("#reviews article.review")


def test_sampling_and_elicitation_wait_for_a_person_and_return_what_they_sent(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    list_tools(home, until=("trigger-sampling-request", "trigger-elicitation-request"))

    call_tool_raw(home, "trigger-sampling-request", '{"prompt": "Name a colour", "maxTokens": 50}')
    review = _reviews(home).filter(has_text="a reply from your model")
    expect(review).to_have_count(1, timeout=SHORT)
    expect(review).to_contain_text("Name a colour")
    expect(home).to_have_title(re.compile(r"^\(1\) "))
    review.get_by_label("Reply (sent as the assistant's text)").fill("Ultramarine, said a person")
    review.get_by_role("button", name="Approve and send").click()
    # Answered, the card leaves the list and the title its count; the response frame says who edited it.
    expect(review).to_have_count(0)
    expect(home).not_to_have_title(re.compile(r"^\(\d+\) "))
    edited = timeline_rows(home, "sampling/createMessage").filter(has_text="edited and answered by")
    expect(edited).to_have_count(1)
    card = call_card(home, "tools/call", "trigger-sampling-request").first
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("Ultramarine, said a person")

    open_tool(home, "trigger-elicitation-request").get_by_role(
        "button", name="Call trigger-elicitation-request"
    ).click()
    review = _reviews(home).filter(has_text="for information")
    expect(review).to_have_count(1, timeout=SHORT)
    review.get_by_role("textbox", name="String", exact=True).fill("Ada Lovelace")
    review.get_by_role("button", name="Accept").click()
    expect(review).to_have_count(0)
    card = call_card(home, "tools/call", "trigger-elicitation-request").first
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("Name: Ada Lovelace")
    expect(card).to_contain_text('"action": "accept"')
    assert_clean(home)


def test_a_tool_enabled_sampling_request_is_answered_with_a_tool_use_and_then_with_words(home: Any) -> None:
    """2025-11-25: the card offers the request's tools; a person picks one and its input, the server
    runs it and asks again with the tool's result in the messages, and the words answer the call."""
    connect(home, stdio={"command": sys.executable, "args": [str(SERVERS / "sampling_tools.py")]})
    form = open_tool(home, "forecast")
    form.get_by_label("city").fill("Oslo")
    form.get_by_role("button", name="Call forecast").click()
    review = _reviews(home).filter(has_text="a reply from your model")
    expect(review).to_have_count(1, timeout=SHORT)
    expect(review.locator(".sampling-tools")).to_contain_text("The weather in a city.")
    review.get_by_label("Use a tool").select_option("get_weather")
    review.get_by_label("Its input (JSON object)").fill('{"city": "Oslo"}')
    review.get_by_role("button", name="Approve and send").click()

    again = _reviews(home).filter(has_text="sunny in Oslo")
    expect(again).to_have_count(1, timeout=SHORT)
    expect(again.locator(".tool-use-block")).to_contain_text("get_weather")
    again.get_by_label("Reply (sent as the assistant's text)").fill("Sunny: take sunglasses")
    again.get_by_role("button", name="Approve and send").click()
    card = call_card(home, "tools/call", "forecast").first
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("human: Sunny: take sunglasses")
    assert_clean(home)


def test_roots_list_waits_for_review_and_the_edited_roots_reach_the_server(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio, roots="file:///tmp/project project", review_roots=True)
    # server-everything asks for roots/list shortly after initialize: the card is pre-filled with our roots.
    review = _reviews(home).filter(has_text="for your roots")
    expect(review).to_have_count(1, timeout=SHORT)
    roots = review.get_by_label("Roots to send, one per line: a file:// URI, then an optional name")
    expect(roots).to_have_value(re.compile(r"file:///tmp/project project"))
    roots.fill("file:///tmp/project project\nfile:///tmp/extra extra-root")
    review.get_by_role("button", name="Send roots").click()
    expect(review).to_have_count(0)
    answer = timeline_rows(home, "roots/list").filter(has=home.locator(".dir", has_text="→"))
    expect(answer.filter(has_text="edited and answered by")).to_have_count(1)

    list_tools(home, until=("get-roots-list",))
    open_tool(home, "get-roots-list").get_by_role("button", name="Call get-roots-list").click()
    card = call_card(home, "tools/call", "get-roots-list").first
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("Current MCP Roots (2 total)")
    expect(card).to_contain_text("URI: file:///tmp/project")
    expect(card).to_contain_text("extra-root")
    assert_clean(home)


def _listed_resource(home: Any, everything_stdio: dict) -> tuple[Any, str]:
    """Connect, list the resources; the first one's Subscribe button and its URI."""
    connect(home, stdio=everything_stdio)
    open_tab(home, "Resources")
    home.get_by_role("button", name="List resources").click()
    subscribe = home.get_by_role("button", name=re.compile(r"^Subscribe to ")).first
    expect(subscribe).to_be_visible()
    # The panel's own first listing may have drawn it while the click's was still on its way.
    expect(home.locator("#panel.htmx-request, #panel .htmx-request")).to_have_count(0)
    return subscribe, (subscribe.get_attribute("aria-label") or "").removeprefix("Subscribe to ")


def test_a_subscribed_resource_shows_the_servers_update_live(home: Any, everything_stdio: dict) -> None:
    subscribe, uri = _listed_resource(home, everything_stdio)
    subscribe.click()
    expect(home.get_by_role("button", name=f"Unsubscribe from {uri}").first).to_be_visible()
    subscriptions = home.locator(
        "section", has=home.get_by_role("heading", name=re.compile("^Subscriptions"))
    )
    marker = subscriptions.locator("li", has_text=uri).locator(".res-updated")
    expect(marker).to_have_text("no update yet")

    # The call's card goes into the requests list; the Resources panel stays, listening.
    send_raw(home, "tools/call", '{"name": "toggle-subscriber-updates", "arguments": {}}')
    toggle = call_card(home, "tools/call", "toggle-subscriber-updates").first
    expect(toggle.get_by_role("status")).to_have_text("done")
    expect(marker).to_have_text(re.compile(r"^updated \d\d:\d\d:\d\d$"), timeout=15_000)
    expect(timeline_rows(home, "notifications/resources/updated").first).to_be_attached()
    assert_clean(home)


def test_a_panel_answer_drawn_before_a_newer_drawing_of_the_panel_stays_out(
    home: Any, everything_stdio: dict
) -> None:
    subscribe, uri = _listed_resource(home, everything_stdio)

    # A listing drawn by the server now (no subscription yet) is held on its way back to the page.
    held = hold(home, "**/list/resources", fetch=True)
    home.get_by_role("button", name="List resources").click()

    until_held(home, held, "the listing was not held")
    # Meanwhile the person subscribes: the panel is drawn again, subscribed.
    subscribe.click()
    unsubscribe = home.get_by_role("button", name=f"Unsubscribe from {uri}").first
    expect(unsubscribe).to_be_visible()
    # The older listing arrives last: it does not put the panel back as it was before the subscription.
    home.evaluate(
        """() => { window.__panelAnswer = new Promise((resolve) => document.addEventListener(
             'htmx:beforeSwap', (e) => { if (e.detail.target.id === 'panel') resolve(); })); }"""
    )
    route, response = held[0]
    route.fulfill(response=response)
    home.evaluate("() => window.__panelAnswer")
    home.unroute("**/list/resources")
    expect(unsubscribe).to_be_visible()
    assert_clean(home)


def test_clicking_a_frame_shows_its_bytes_and_a_request_can_be_edited_and_sent_again(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    _echo(home, "original")
    request = timeline_rows(home, "tools/call").filter(has_text="→").first
    request.click()
    detail = home.locator("#frame-detail")
    expect(detail.get_by_text("Raw bytes")).to_be_visible()
    expect(detail.locator("pre.json")).to_contain_text('"message": "original"')

    # The keyboard walks the rows too: ArrowDown to the next row, Enter opens it, k goes back.
    request_seq = request.get_attribute("data-seq")
    next_seq = request.locator("xpath=following-sibling::div[1]").get_attribute("data-seq")
    request.focus()
    home.keyboard.press("ArrowDown")
    home.keyboard.press("Enter")
    expect(detail.locator(".detail-head strong")).to_have_text(f"#{next_seq}")
    home.keyboard.press("k")
    home.keyboard.press("Enter")
    expect(detail.locator(".detail-head strong")).to_have_text(f"#{request_seq}")

    detail.get_by_text("Edit and send again").click()
    expect(detail.get_by_label("Replay method")).to_have_value("tools/call")
    params = detail.get_by_label("Replay params (JSON object)")
    edited = (params.input_value() or "").replace("original", "edited by hand")
    assert "progressToken" not in edited
    params.fill(edited)
    detail.get_by_role("button", name="Send again").click()
    expect(call_card(home, "tools/call", "echo").filter(has_text="Echo: edited by hand")).to_have_count(1)
    assert_clean(home)


def test_the_conformance_tab_counts_rules_and_filters_the_timeline_to_one(home: Any, bad_stdio: Any) -> None:
    connect(home, stdio=bad_stdio("violations"))  # it opens on Tools, which lists them by itself
    expect(timeline_rows(home).filter(has_text="unknown-id")).to_have_count(1)
    open_tab(home, "Conformance")
    rules = home.locator("table.report-rules")
    expect(rules.locator("tr", has_text="duplicate-response")).to_contain_text("2")
    rules.get_by_role("button", name="Show unknown-id frames in the timeline").click()
    expect(home.get_by_label("Rule broken")).to_have_value("unknown-id")
    expect(timeline_rows(home)).to_have_count(1)
    expect(timeline_rows(home).first).to_contain_text("#999")
    home.get_by_label("Rule broken").fill("")
    expect(timeline_rows(home, "initialize")).to_have_count(2)
    assert_clean(home)


def test_clicking_a_verdict_badge_filters_the_timeline_to_its_rule_without_opening_the_frame(
    home: Any, bad_stdio: Any
) -> None:
    connect(home, stdio=bad_stdio("violations"))  # it opens on Tools, which lists them by itself
    flagged = timeline_rows(home).filter(has_text="unknown-id")
    expect(flagged).to_have_count(1)
    opened: list[str] = []
    home.on("request", lambda r: opened.append(r.url) if "/frames/" in r.url else None)
    badge = flagged.locator(".verdict", has_text="unknown-id")
    badge.click()
    expect(home.get_by_label("Rule broken")).to_have_value("unknown-id")
    expect(timeline_rows(home)).to_have_count(1)
    expect(timeline_rows(home).first).to_contain_text("#999")
    # The frame's fetch would have left in the click itself, before the filtered rows came back.
    assert opened == []
    expect(home.locator("#frame-detail")).to_be_empty()
    expect(badge).to_have_role("button")
    assert_clean(home)


STATELESS_SERVER = {
    "command": sys.executable,
    "args": [str(SERVERS / "sdk_stateless.py"), "stdio"],
}


def test_a_stateless_subscription_rides_a_listen_stream_and_shows_the_update_live(home: Any) -> None:
    connect(home, stdio=STATELESS_SERVER, protocol="2026-07-28")
    expect(timeline_rows(home, "notifications/subscriptions/acknowledged").first).to_be_attached()
    open_tab(home, "Resources")
    home.get_by_role("button", name="List resources").click()
    home.get_by_role("button", name="Subscribe to info://server").click()
    expect(home.get_by_role("button", name="Unsubscribe from info://server").first).to_be_visible()
    subscriptions = home.locator(
        "section", has=home.get_by_role("heading", name=re.compile("^Subscriptions"))
    )
    expect(subscriptions.locator(".listen-status")).to_contain_text("updates of 1 resource")
    marker = subscriptions.locator("li", has_text="info://server").locator(".res-updated")
    expect(marker).to_have_text("no update yet")

    send_raw(home, "tools/call", '{"name": "touch", "arguments": {"uri": "info://server"}}')
    expect(call_card(home, "tools/call", "touch").first.get_by_role("status")).to_have_text("done")
    expect(marker).to_have_text(re.compile(r"^updated \d\d:\d\d:\d\d$"), timeout=15_000)
    home.screenshot(path=str(Path(tempfile.gettempdir()) / "mcp-inspector-stateless-listen.png"))
    assert_clean(home)


def _echo(page: Any, message: str) -> None:
    send_raw(page, "tools/call", f'{{"name": "echo", "arguments": {{"message": "{message}"}}}}')
    expect(call_card(page, "tools/call", "echo").filter(has_text=f"Echo: {message}")).to_have_count(1)


def _assert_unique_rows(page: Any) -> list[str]:
    ids = timeline_ids(page)
    assert ids, "the timeline is empty"
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"timeline rows shown twice: {duplicates}"
    return ids


def test_a_reload_mid_session_keeps_the_timeline_once_and_new_calls_still_arrive_live(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    _echo(home, "before reload one")
    _echo(home, "before reload two")
    expect(timeline_rows(home, "tools/call")).to_have_count(4)
    before = _assert_unique_rows(home)

    home.reload()
    expect(status(home)).to_have_text("ready")
    expect(timeline_rows(home, "tools/call")).to_have_count(4)
    after_reload = _assert_unique_rows(home)
    assert set(before) <= set(after_reload)

    _echo(home, "after reload")
    # The request and the response frames arrive over the live socket, after the frames already shown.
    expect(timeline_rows(home, "tools/call")).to_have_count(6)
    expect(timeline_rows(home, "tools/call").last).to_contain_text("after reload")
    ids = _assert_unique_rows(home)
    seqs = [int(i.removeprefix("f-")) for i in ids]
    assert seqs == sorted(seqs), f"timeline out of order: {ids}"
    assert_clean(home)


def test_a_flood_redraws_the_newest_rows_in_order_which_still_open_their_frame_and_page_back(
    home: Any, bad_stdio: Any
) -> None:
    # The page puts the timeline's rows in place itself (static/inspector/app.js), not htmx: a flood
    # redraws the newest page of rows again and again, and appends between.
    connect(home, stdio=bad_stdio("flood"))
    send_raw(home, "tools/call", '{"name": "t", "arguments": {"count": 3000}}')
    count = home.locator("#frame-count")
    expect(count).to_have_text(re.compile(r"^\s*30\d\d\s*$"), timeout=20_000)
    total = int(count.text_content() or "0")
    expect(timeline_rows(home).last).to_have_id(f"f-{total}")
    expect(timeline_rows(home).last).to_contain_text("tools/call")
    ids = _assert_unique_rows(home)
    seqs = [int(i.removeprefix("f-")) for i in ids]
    assert seqs == list(range(seqs[0], total + 1)), "the rows shown are not the newest, in order"
    assert len(seqs) < 1000, "a flood is shown a page at a time, not every row"
    pane = home.locator("#timeline-rows")
    bottom = "p => p.scrollTop + p.clientHeight >= p.scrollHeight - 2"
    wait_until(lambda: pane.evaluate(bottom), 10, "the timeline did not follow the newest row")

    timeline_rows(home).last.click()
    expect(home.locator("#frame-detail")).to_contain_text("flooded 3000")
    # The controls came with the rows: their button still asks the live socket for older frames.
    home.locator("#timeline-controls").get_by_role("button", name="Older").click()
    expect(home.locator("#timeline-controls")).to_contain_text("browsing older frames")
    expect(timeline_rows(home).first).not_to_have_id(ids[0])
    older = [int(i.removeprefix("f-")) for i in _assert_unique_rows(home)]
    assert older[0] < seqs[0], "Older did not show older frames"

    # The same as a flow: the pane takes the flow's attributes, and a flood's rows come as flow rows.
    home.locator("#timeline-controls").get_by_role("button", name="Back to live").click()
    home.get_by_role("button", name="Flow", exact=True).click()
    expect(pane).to_have_class(re.compile(r"\bflow\b"))
    send_raw(home, "tools/call", '{"name": "t", "arguments": {"count": 2000}}')
    expect(count).to_have_text(str(total + 2002), timeout=20_000)
    expect(timeline_rows(home).last).to_have_id(f"f-{total + 2002}")
    expect(timeline_rows(home).last).to_have_class(re.compile(r"\bflow-row\b"))
    flowed = [int(i.removeprefix("f-")) for i in _assert_unique_rows(home)]
    assert flowed == list(range(flowed[0], total + 2003)), "the flow's rows are not the newest, in order"
    home.get_by_role("button", name="Table", exact=True).click()
    expect(pane).not_to_have_class(re.compile(r"\bflow\b"))
    expect(timeline_rows(home).last).to_have_id(f"f-{total + 2002}")
    assert_clean(home)


def test_two_tabs_on_one_session_see_each_others_calls_and_pending_reviews(
    home: Any, app_context: Any, browser: Any, everything_stdio: dict
) -> None:
    session_url = connect(home, stdio=everything_stdio)
    window = second_window(browser, app_context)
    other = open_page(window, session_url)
    try:
        expect(status(other)).to_have_text("ready")
        _echo(home, "seen in the other tab")
        # The request and its response, each once; the call's card, finished, in both tabs, once each.
        expect(timeline_rows(other, "tools/call").filter(has_text="seen in the other tab")).to_have_count(2)
        for page in (home, other):
            echoed = call_card(page, "tools/call", "echo").filter(has_text="Echo: seen in the other tab")
            expect(echoed).to_have_count(1, timeout=SHORT)
        expect(calls(other).locator("article.call.running")).to_have_count(0)

        list_tools(home, until=("trigger-sampling-request",))
        call_tool_raw(home, "trigger-sampling-request", '{"prompt": "Two tabs", "maxTokens": 10}')
        for page in (home, other):
            expect(_reviews(page).filter(has_text="Two tabs")).to_have_count(1, timeout=SHORT)
            expect(page).to_have_title(re.compile(r"^\(1\) "))

        # Answered in the second tab, the request leaves both tabs and the first tab's call finishes.
        review = _reviews(other).filter(has_text="Two tabs")
        review.get_by_label("Reply (sent as the assistant's text)").fill("answered from tab two")
        review.get_by_role("button", name="Approve and send").click()
        for page in (home, other):
            expect(_reviews(page)).to_have_count(0)
            expect(page).not_to_have_title(re.compile(r"^\(\d+\) "))
        card = call_card(home, "tools/call", "trigger-sampling-request").first
        expect(card).to_contain_text("answered from tab two", timeout=SHORT)
        _assert_unique_rows(other)
        assert_clean(home, other)
    finally:
        window.close()


def test_disconnect_closes_the_session_and_ends_the_server_process(
    home: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    running_before = set(everything_children(live_app.proc.pid))
    connect(home, stdio=everything_stdio)
    started = set(everything_children(live_app.proc.pid)) - running_before
    assert len(started) == 1, f"expected one new server-everything child of the app, found {started}"
    (server_pid,) = started

    home.get_by_role("button", name="Disconnect").click()
    expect(status(home)).to_have_text("closed", timeout=SHORT)
    expect(home.get_by_role("button", name="Reconnect")).to_be_visible()
    wait_until(
        lambda: server_pid not in everything_children(live_app.proc.pid),
        timeout=10,
        message=f"server-everything (pid {server_pid}) still runs 10 s after Disconnect",
    )
    assert_clean(home)

    # Then it can be deleted from the home page, after a confirmation.
    session_path = "/" + home.url.split("/", 3)[3].split("?")[0]  # the page moved to ?tab=tools
    home.goto(live_app.url("/"))
    row = home.locator("tr", has=home.locator(f'a[href="{session_path}"]'))
    expect(row).to_have_count(1)
    home.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=re.compile("^Delete session ")).click()
    expect(row).to_have_count(0)
    assert_clean(home)
