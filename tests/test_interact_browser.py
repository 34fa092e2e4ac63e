"""In Chromium: a running call finished over the live socket, the session switcher, keyboard and small screens.

A real `mcp-inspector`, Debian's Chromium and server-everything over stdio, as in test_browser.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from support import browser as browser_support
from support.browser import (
    SHORT,
    LiveApp,
    assert_clean,
    call_card,
    connect,
    list_tools,
    open_page,
    open_tab,
    open_tool,
    wait_until,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

live_app = browser_support.live_app
browser = browser_support.browser
app_context = browser_support.app_context

LONG_TOOL = "trigger-long-running-operation"


@pytest.fixture(autouse=True)
def no_runtime_outlives_its_test() -> Iterator[None]:
    """Overrides the async conftest fixture: the app runs in its own process here."""
    yield


@pytest.fixture
def home(app_context: Any, live_app: LiveApp) -> Iterator[Any]:
    page = open_page(app_context, live_app.url("/"))
    yield page
    page.close()


def _start_long_call(page: Any, duration: int, steps: int) -> Any:
    list_tools(page, until=(LONG_TOOL,))
    form = open_tool(page, LONG_TOOL)
    form.get_by_label("duration", exact=True).fill(str(duration))
    form.get_by_label("steps", exact=True).fill(str(steps))
    form.get_by_role("button", name=f"Call {LONG_TOOL}").click()
    card = call_card(page, "tools/call", LONG_TOOL).first
    expect(card.get_by_role("status")).to_have_text("running")
    return card


def test_a_running_call_gets_its_progress_and_result_pushed_and_its_cancel_button_stays_the_same_node(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    polled: list[str] = []
    home.on("request", lambda r: polled.append(r.url) if re.search(r"/calls/\d+$", r.url) else None)
    card = _start_long_call(home, duration=4, steps=4)
    cancel = card.get_by_role("button", name="Cancel")
    cancel.evaluate("button => { button.__marked = true; window.cancelButton = button; }")
    bar = card.get_by_role("progressbar")
    seen: set[str] = set()
    for step in ("1", "2", "3"):
        expect(bar).to_have_attribute("value", re.compile(rf"^{step}(\.0)?$"), timeout=SHORT)
        seen.add(step)
        # The same button element, still in the card: progress replaced only the bar and its message.
        assert cancel.evaluate("button => button.__marked === true && button === window.cancelButton")
        assert home.evaluate("() => document.body.contains(window.cancelButton)")
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("Long running operation completed")
    expect(card).not_to_have_class(re.compile(r"\brunning\b"))
    expect(card.get_by_role("button", name="Cancel")).to_have_count(0)
    assert seen == {"1", "2", "3"}
    assert polled == [], f"the running card asked for itself: {polled}"
    assert_clean(home)


SOCKET = "document.querySelector('[ws-connect]')['htmx-internal-data'].webSocket"


def test_a_call_that_ends_while_the_socket_is_down_is_finished_when_it_reconnects(
    home: Any, everything_stdio: dict
) -> None:
    session_url = connect(home, stdio=everything_stdio)
    polled: list[str] = []
    home.on("request", lambda r: polled.append(r.url) if re.search(r"/calls/\d+$", r.url) else None)
    card = _start_long_call(home, duration=2, steps=2)
    home.evaluate(f"() => {SOCKET}.socket.close()")  # closed by the page: htmx does not reconnect by itself
    export = session_url.split("?")[0] + "export"
    wait_until(
        lambda: "Long running operation completed" in home.request.get(export).text(),
        timeout=SHORT / 1000,
        message="the call never ended on the server",
    )
    expect(card.get_by_role("status")).to_have_text("running")  # nothing reached the page meanwhile
    home.evaluate(f"() => {SOCKET}.publicInterface.reconnect()")
    expect(card.get_by_role("status")).to_have_text("done", timeout=SHORT)
    expect(card).to_contain_text("Long running operation completed")
    assert polled == [], f"the running card asked for itself: {polled}"
    assert_clean(home)
