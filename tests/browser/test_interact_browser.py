"""In Chromium: running calls finished over the live socket, the session switcher, keyboard, small screens.

A real `mcp-inspector`, Debian's Chromium and server-everything over stdio, as in test_browser.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.browser import (
    SHORT,
    LiveApp,
    assert_clean,
    call_card,
    connect,
    hold,
    list_tools,
    open_page,
    open_tab,
    open_tool,
    until_held,
    until_idle,
    wait_until,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


LONG_TOOL = "trigger-long-running-operation"


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


# Every visible control of a region, scrolled into view: the element at its centre must be itself (not
# covered, not clipped away). Returns the labels of those that are not.
CONTROLS = "a[href], button, input:not([type=hidden]), select, textarea, summary, [role=tab]"
UNREACHABLE = """(root, selector) => {
  const controls = root.querySelectorAll(selector);
  const bad = [];
  for (const control of controls) {
    if (!control.getClientRects().length || control.closest('details:not([open]) > :not(summary)')) continue;
    control.scrollIntoView({block: 'center', inline: 'center'});
    const r = control.getBoundingClientRect();
    const x = Math.min(Math.max(r.left + Math.min(r.width / 2, 8), 0), innerWidth - 1);
    const y = Math.min(Math.max(r.top + r.height / 2, 0), innerHeight - 1);
    const hit = document.elementFromPoint(x, y);
    const ok = hit && (hit === control || control.contains(hit) || hit.control === control);
    if (!ok) {
      const label = control.getAttribute('aria-label') || control.textContent || control.tagName;
      bad.push(label.trim().slice(0, 40));
    }
  }
  return bad;
}"""


@pytest.mark.parametrize("width", [1024, 800])
def test_at_narrow_widths_every_tab_opens_its_panel_and_every_control_is_reachable(
    home: Any, everything_stdio: dict, width: int
) -> None:
    connect(home, stdio=everything_stdio)
    list_tools(home, until=("echo",))  # the Tools panel with its list, search and buttons
    home.set_viewport_size({"width": width, "height": 700})
    assert home.locator(".session-head").evaluate(UNREACHABLE, CONTROLS) == []
    tabs = home.get_by_role("tablist").get_by_role("tab")
    names = [name.strip() for name in tabs.all_inner_texts()]
    assert {"Conformance", "Logging", "Roots", "Activity"} <= set(names)
    for name in names:
        tab = home.get_by_role("tab", name=name, exact=True)
        tab.click()  # Playwright clicks only what is visible, unobscured and in the viewport
        expect(tab).to_have_attribute("aria-selected", "true")
        panel = home.get_by_role("tabpanel")
        expect(panel).to_have_attribute("aria-labelledby", f"tab-{name.lower()}")
        expect(
            panel.locator(f"[data-panel='{name.lower()}'], #{name.lower()}, .panel-{name.lower()}").first
        ).to_be_visible()
        assert panel.evaluate(UNREACHABLE, CONTROLS) == [], f"{name} at {width} px"
    assert home.evaluate("() => document.documentElement.scrollWidth") <= width
    assert_clean(home)


def _focused(page: Any) -> str:
    return page.evaluate("() => document.activeElement.id || document.activeElement.textContent.trim()")


def test_enter_on_a_tab_redrawn_a_moment_ago_opens_it_in_place(home: Any, everything_stdio: dict) -> None:
    connect(home, stdio=everything_stdio)
    until_idle(home)  # the page's own move to Tools, asked after the redraw below, would keep it out
    # A panel's answer redraws the tabs; htmx wires the new ones when the swap settles (widened here).
    home.evaluate(
        """() => new Promise((resolve, reject) => {
             setTimeout(() => reject(new Error('the overview was not drawn')), 10000);
             htmx.config.defaultSettleDelay = 3000;
             document.body.addEventListener('htmx:afterSwap', (event) => {
               if (event.detail.pathInfo.requestPath.endsWith('/panel/overview')) resolve();
             });
             htmx.ajax('GET', location.pathname + 'panel/overview', {target: '#panel'});
           })"""
    )
    home.evaluate("() => { window.__samePage = true; }")
    home.locator("#tab-resources").focus()
    home.keyboard.press("Enter")
    expect(home.locator("#tab-resources")).to_have_attribute("aria-selected", "true")
    expect(home.locator(".panel-resources")).to_be_visible()
    expect(home.locator("#tab-resources")).to_be_focused()
    assert home.evaluate("() => window.__samePage === true"), "Enter followed the tab's link: a page load"


def test_arrow_keys_move_between_tabs_and_focus_stays_on_the_tab_after_a_switch(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    tabs = home.get_by_role("tablist").get_by_role("tab")
    # One tab in the Tab order: the selected one.
    assert tabs.evaluate_all("tabs => tabs.map(t => t.tabIndex)").count(0) == 1
    home.get_by_role("tab", name="Overview").focus()
    home.keyboard.press("ArrowRight")
    assert _focused(home) == "tab-tools"
    home.keyboard.press("End")
    assert _focused(home) == "tab-activity"
    home.keyboard.press("ArrowRight")  # wraps around
    assert _focused(home) == "tab-overview"
    home.keyboard.press("ArrowLeft")
    assert _focused(home) == "tab-activity"
    home.keyboard.press("Home")
    home.keyboard.press("ArrowRight")
    home.keyboard.press("ArrowRight")
    assert _focused(home) == "tab-resources"
    # A panel's answer may redraw the tabs meanwhile: the Tab stop follows the focus once it settles.
    expect(home.locator("#tab-resources")).to_have_attribute("tabindex", "0")
    # The Resources panel's first list is held on its way back, and lands after the next switch.
    held = hold(home, "**/panel/resources/list", fetch=True)
    home.keyboard.press("Enter")
    expect(home.locator("#tab-resources")).to_have_attribute("aria-selected", "true")
    expect(home.locator(".panel-resources")).to_be_visible()
    expect(home.locator("#tab-resources")).to_be_focused()  # the redrawn tab, not the top of the page

    until_held(home, held, "the first list was not held")
    # Its form leaves the page with the panel, so the document never hears of its answer: the form does.
    home.evaluate(
        """() => {
             const form = document.querySelector('form[data-list-on-open][hx-post$="/panel/resources/list"]');
             window.__listed = new Promise((resolve, reject) => {
               form.addEventListener('htmx:afterRequest', resolve, {once: true});
               setTimeout(() => reject(new Error('the held list was never answered')), 20000);
             });
           }"""
    )
    home.keyboard.press("ArrowRight")
    home.keyboard.press(" ")
    expect(home.locator("#tab-prompts")).to_have_attribute("aria-selected", "true")
    expect(home.locator("#tab-prompts")).to_be_focused()
    route, response = held[0]
    route.fulfill(response=response)
    home.evaluate("() => window.__listed.then(() => new Promise((r) => setTimeout(r, 0)))")
    home.unroute("**/panel/resources/list")
    expect(home.locator("#tab-prompts")).to_be_focused()
    expect(home.locator(".panel-prompts")).to_be_visible()
    assert tabs.evaluate_all("tabs => tabs.filter(t => t.tabIndex === 0).map(t => t.id)") == ["tab-prompts"]
    assert_clean(home)


def _watch_tools_answer(page: Any) -> None:
    """Note whether the Tools panel's next answer is let in (``_tools_answer_swapped``)."""
    page.evaluate(
        """() => {
             window.__toolsSwapped = new Promise((resolve, reject) => {
               setTimeout(() => reject(new Error('no answer to the Tools panel came')), 10000);
               document.addEventListener('htmx:beforeSwap', (event) => {
                 if (event.detail.pathInfo.requestPath.endsWith('/panel/tools')) {
                   setTimeout(() => resolve(event.detail.shouldSwap), 0);
                 }
               });
             });
           }"""
    )


def _tools_answer_swapped(page: Any) -> Any:
    """What htmx decided for that answer: ``False`` when it was kept out."""
    return page.evaluate("() => window.__toolsSwapped")


def _resources_shown(page: Any) -> None:
    """The Resources tab is the one selected, its panel shown and its address pushed."""
    expect(page.locator("#tab-resources")).to_have_attribute("aria-selected", "true")
    expect(page.locator(".panel-resources")).to_be_visible()
    expect(page).to_have_url(re.compile(r"\?tab=resources$"))


def test_the_tab_picked_last_is_shown_though_an_earlier_pick_was_still_on_its_way(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    open_tab(home, "Overview")
    # The Tools panel is held on its way back; Resources is picked meanwhile.
    held = hold(home, "**/panel/tools")
    home.get_by_role("tab", name="Tools", exact=True).click()

    until_held(home, held, "the Tools panel was not asked for")
    home.get_by_role("tab", name="Resources", exact=True).click()
    _resources_shown(home)
    # The earlier pick's answer, coming last, stays out.
    _watch_tools_answer(home)
    held[0].continue_()
    assert _tools_answer_swapped(home) is False
    home.unroute("**/panel/tools")
    _resources_shown(home)
    assert_clean(home)


def test_an_earlier_picks_answer_landing_while_the_last_pick_is_on_its_way_leaves_the_last_pick_shown(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    open_tab(home, "Overview")
    # Tools is picked and held; then Resources, held too; then Tools' answer lands first.
    tools = hold(home, "**/panel/tools")
    home.get_by_role("tab", name="Tools", exact=True).click()
    until_held(home, tools, "the Tools panel was not asked for")
    resources = hold(home, "**/panel/resources")
    home.get_by_role("tab", name="Resources", exact=True).click()
    until_held(home, resources, "the Resources panel was not asked for")
    _watch_tools_answer(home)
    tools[0].continue_()
    # Drawn, it would redraw the tabs under the Resources tab whose answer is still on its way.
    assert _tools_answer_swapped(home) is False
    resources[0].continue_()
    _resources_shown(home)
    home.unroute("**/panel/tools")
    home.unroute("**/panel/resources")
    assert_clean(home)


def test_focus_stays_on_the_button_after_listing_and_opening_a_tool(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    open_tab(home, "Tools")
    listing = home.locator("#tools-panel").get_by_role("button", name="List tools")
    listing.focus()
    home.keyboard.press("Enter")
    again = home.get_by_role("button", name="List tools again")
    expect(again).to_be_visible()
    expect(again).to_be_focused()  # the panel was redrawn; focus is on the button that replaced it
    list_tools(home, until=(LONG_TOOL, "echo"))
    opener = home.get_by_role("button", name="Open tool echo", exact=True)
    opener.focus()
    features = home.locator(".features")
    before = features.evaluate("pane => pane.scrollTop")
    home.keyboard.press("Enter")
    expect(home.get_by_role("region", name="Call echo", exact=True)).to_be_visible()
    expect(opener).to_be_focused()
    assert features.evaluate("pane => pane.scrollTop") >= before
    assert_clean(home)


def test_escape_closes_the_frame_detail_and_returns_focus_to_its_row(
    home: Any, everything_stdio: dict
) -> None:
    connect(home, stdio=everything_stdio)
    row = home.locator("#timeline-rows > .frame").nth(3)
    row_id = row.get_attribute("id")
    row.focus()
    home.keyboard.press("Enter")
    detail = home.locator("#frame-detail")
    expect(detail.locator(".detail-head")).to_be_visible()
    detail.get_by_role("button", name="Close").focus()  # focus moved into the detail
    home.keyboard.press("Escape")
    expect(detail.locator(".detail-head")).to_have_count(0)
    expect(home.locator(f"#{row_id}")).to_be_focused()

    other = home.locator("#timeline-rows > .frame").nth(5)
    other.click()
    expect(detail.locator(".detail-head")).to_be_visible()
    detail.get_by_role("button", name="Close").click()
    expect(detail.locator(".detail-head")).to_have_count(0)
    expect(home.locator(f"#{other.get_attribute('id')}")).to_be_focused()
    assert_clean(home)


def test_the_session_switcher_lists_the_teams_sessions_by_keyboard_and_follows_their_state(
    home: Any, app_context: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    other_url = connect(home, stdio=everything_stdio)
    home.goto(live_app.url("/"))
    here_url = connect(home, stdio=everything_stdio)
    switcher = home.locator("#session-switcher")
    summary = switcher.locator("summary")
    summary.focus()
    home.keyboard.press("Enter")
    menu = home.get_by_role("navigation", name="Sessions of this team")
    here_path, other_path = (
        url.split("://", 1)[1].split("/", 1)[1].split("?")[0] for url in (here_url, other_url)
    )
    current = menu.locator("a[aria-current=page]")
    expect(current).to_have_count(1)
    expect(current).to_have_attribute("href", f"/{here_path}")
    other = menu.locator(f"a[href='/{other_path}']")
    expect(other.locator(".switcher-state")).to_have_text("live")
    home.keyboard.press("ArrowDown")
    expect(menu.locator("a").first).to_be_focused()
    home.keyboard.press("ArrowDown")
    expect(menu.locator("a").nth(1)).to_be_focused()

    # The other session ends in another window: the open switcher shows it, with no reload.
    elsewhere = open_page(app_context, other_url)
    elsewhere.get_by_role("button", name="Disconnect").click()
    expect(elsewhere.locator("#session-state").get_by_role("status")).to_have_text("closed", timeout=SHORT)
    elsewhere.close()
    expect(other.locator(".switcher-state")).to_have_text("ended", timeout=SHORT)

    home.keyboard.press("Escape")
    expect(switcher).not_to_have_attribute("open", "")
    expect(summary).to_be_focused()
    summary.focus()
    home.keyboard.press("Enter")
    # A refresh of the list that lands between the press and the release does not take the click away.
    link = menu.locator(f"a[href='/{other_path}']")
    expect(link.locator(".switcher-state")).to_have_text("ended")
    expect(menu).not_to_have_class(re.compile(r"\bhtmx-request\b"))  # the list's load on opening is in
    # The list refreshes itself now and then: a link being redrawn has no box for a moment.
    boxes: list[Any] = []
    wait_until(
        lambda: boxes.append(link.bounding_box()) or boxes[-1] is not None, SHORT / 1000, "no link box"
    )
    box = boxes[-1]
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    home.mouse.move(x, y)
    home.mouse.down()
    handle = home.evaluate_handle("([x, y]) => document.elementFromPoint(x, y).closest('a')", [x, y])
    home.evaluate(
        """() => new Promise((resolve) => {
          const list = document.querySelector('.switcher-list');
          list.addEventListener('htmx:afterRequest', () => setTimeout(resolve, 0), {once: true});
          htmx.trigger(list, 'refresh');
        })"""
    )
    assert handle.evaluate("a => a.isConnected")
    home.mouse.up()
    home.wait_for_url(f"**/{other_path}")
    expect(home.locator("#session-state").get_by_role("status")).to_have_text("closed")
    assert_clean(home)
