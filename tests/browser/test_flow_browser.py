"""The message flow in Chromium: server-everything asks the client in the middle of a tool call."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from support.browser import (
    SHORT,
    LiveApp,
    assert_clean,
    call_card,
    call_tool_raw,
    connect,
    list_tools,
    open_page,
    open_tool,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = os.environ.get("INSPECTOR_SCREENSHOTS", "/tmp")


def _flow_row(page: Any, shape: str, method: str) -> Any:
    rows = page.locator(f"#timeline-rows.flow > .flow-row.shape-{shape}")
    return rows.filter(has=page.locator(".label .what", has_text=method)).last


def test_a_sampling_request_sits_inside_the_tool_call_that_caused_it_and_hover_shows_its_pair(
    app_context: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    page = open_page(app_context, live_app.url("/"))
    connect(page, stdio=everything_stdio)
    list_tools(page, until=("trigger-sampling-request",))

    page.get_by_role("button", name="Flow", exact=True).click()
    expect(page.locator("#timeline-rows.flow > .flow-row").first).to_be_visible()
    expect(page.get_by_role("button", name="Flow", exact=True)).to_have_attribute("aria-pressed", "true")
    expect(page.locator(".flow-lanes")).to_contain_text("Server")
    assert page.evaluate("localStorage.getItem('inspector.timelineView')") == "flow"

    # Followed live: the call, the server's request in the middle of it, the person's answer, the result.
    call_tool_raw(page, "trigger-sampling-request", '{"prompt": "Name a colour", "maxTokens": 20}')
    review = page.locator("#reviews article.review").filter(has_text="a reply from your model")
    expect(review).to_have_count(1, timeout=SHORT)
    review.get_by_label("Reply (sent as the assistant's text)").fill("Vermilion")
    review.get_by_role("button", name="Approve and send").click()
    expect(
        call_card(page, "tools/call", "trigger-sampling-request").first.get_by_role("status")
    ).to_have_text("done")

    call = _flow_row(page, "request", "tools/call")
    sampling = _flow_row(page, "request", "sampling/createMessage")
    answer = _flow_row(page, "response", "sampling/createMessage")
    result = _flow_row(page, "response", "tools/call")
    expect(result).to_be_visible()
    seq = call.get_attribute("data-seq")
    for inside in (sampling, answer):
        expect(inside).to_have_attribute("data-group", seq)
        expect(inside).to_have_attribute("data-parent", seq)
        expect(inside).to_have_class(lambda_re("depth-1"))
    expect(result).to_have_attribute("data-pair", seq)
    expect(call).to_have_class(lambda_re("depth-0"))
    # Indented: the nested request's label starts right of the call's.
    assert sampling.locator(".label").bounding_box()["x"] > call.locator(".label").bounding_box()["x"] + 10

    # Hover a request: its response lights up as its pair (and the other way round); focus does too.
    sampling.hover()
    expect(answer).to_have_class(lambda_re("flow-paired"))
    expect(result).not_to_have_class(lambda_re("flow-paired"))
    result.hover()
    expect(call).to_have_class(lambda_re("flow-paired"))
    expect(sampling).to_have_class(lambda_re("flow-grouped"))
    answer.focus()
    expect(sampling).to_have_class(lambda_re("flow-paired"))

    page.screenshot(path=f"{SHOTS}/flow-light.png")
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=f"{SHOTS}/flow-dark.png")
    page.emulate_media(color_scheme="light")

    # A click opens the frame detail, as a table row does.
    sampling.click()
    expect(page.locator("#frame-detail")).to_contain_text("sampling/createMessage")

    # Remembered: the page opens in the flow again; Table switches back.
    page.reload()
    expect(page.locator("#timeline-rows.flow > .flow-row.shape-request").first).to_be_visible()
    expect(page.get_by_role("button", name="Flow", exact=True)).to_have_attribute("aria-pressed", "true")
    page.get_by_role("button", name="Table", exact=True).click()
    expect(page.locator("#timeline-rows:not(.flow) > .frame").first).to_be_visible()
    expect(page.locator(".flow-lanes")).to_be_hidden()
    assert page.evaluate("localStorage.getItem('inspector.timelineView')") == "table"
    assert_clean(page)
    page.close()


def test_over_http_an_elicitation_is_nested_by_the_stream_that_carried_it(
    app_context: Any, live_app: LiveApp, everything_http: str
) -> None:
    page = open_page(app_context, live_app.url("/"))
    page.evaluate("localStorage.setItem('inspector.timelineView', 'flow')")
    connect(page, url=everything_http)
    # The choice made on another page: this one opens as a flow at once.
    expect(page.locator("#timeline-rows.flow > .flow-row").first).to_be_visible()
    list_tools(page, until=("trigger-elicitation-request",))
    open_tool(page, "trigger-elicitation-request").get_by_role(
        "button", name="Call trigger-elicitation-request"
    ).click()
    review = page.locator("#reviews article.review").filter(has_text="for information")
    expect(review).to_have_count(1, timeout=SHORT)
    review.get_by_role("textbox", name="String", exact=True).fill("Ada Lovelace")
    review.get_by_role("button", name="Accept").click()
    card = call_card(page, "tools/call", "trigger-elicitation-request").first
    expect(card.get_by_role("status")).to_have_text("done")

    call = _flow_row(page, "request", "tools/call")
    elicit = _flow_row(page, "request", "elicitation/create")
    expect(_flow_row(page, "response", "tools/call")).to_be_visible()
    expect(elicit).to_have_attribute("data-parent", call.get_attribute("data-seq"))
    expect(elicit).to_have_attribute("title", re.compile("HTTP stream"))
    # The HTTP exchanges have their lane; hovering a reply's head lights the request it answers.
    posts = page.locator("#timeline-rows.flow > .flow-row.lane-http")
    expect(posts.first.locator(".cell-http .chip")).to_be_visible()
    post = page.locator("#timeline-rows.flow > .flow-row.lane-http:not([data-pair=''])").last
    post.hover()
    expect(page.locator(f"#f-{post.get_attribute('data-pair')}")).to_have_class(lambda_re("flow-paired"))
    page.screenshot(path=f"{SHOTS}/flow-http-light.png")
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=f"{SHOTS}/flow-http-dark.png")
    # On a small screen every lane is still inside the timeline pane, side by side, in order.
    page.set_viewport_size({"width": 1024, "height": 800})
    pane = page.locator("#timeline-rows").bounding_box()
    cells = [
        elicit.locator(f".{name}").bounding_box()
        for name in ("cell-http", "client", "msg", "server", "cell-side")
    ]
    assert all(a["x"] + a["width"] <= b["x"] + 1 for a, b in zip(cells, cells[1:], strict=False))
    assert cells[-1]["x"] + cells[-1]["width"] <= pane["x"] + pane["width"]
    page.screenshot(path=f"{SHOTS}/flow-http-1024-dark.png")
    assert_clean(page)
    page.close()


def lambda_re(name: str) -> Any:
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")
