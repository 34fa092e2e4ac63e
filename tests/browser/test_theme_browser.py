"""The theme switch and the layout at narrow widths, in Chromium; and the check every browser test gets.

A real `mcp-inspector` with server-everything over stdio (one session for the module, shared by a link
anyone may open). The theme is chosen against the OS preference (Chromium emulates the other one), so a
page that ignored the choice would show it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from support import browser as support
from support.browser import SEEN, LiveApp, connect, list_tools, new_context, open_page, open_tool, unallowed

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMED = re.compile(r"\d (ms|s)$")  # a latency, as the timeline writes it
BACKGROUND = {"light": "rgb(255, 255, 255)", "dark": "rgb(21, 24, 29)"}
OTHER = {"light": "dark", "dark": "light"}
# What data-theme is when <body> first appears: nothing is painted before there is a body.
THEME_AT_BODY = """
new MutationObserver(function (records, observer) {
  if (document.body) {
    window.themeAtBody = document.documentElement.dataset.theme || null;
    observer.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""


@pytest.fixture(scope="module")
def shared_session(app_context: Any, live_app: LiveApp, everything_stdio: dict) -> Iterator[tuple[str, str]]:
    """A live session's page URL and a link to it anyone may open."""
    page = open_page(app_context, live_app.url("/"))
    url = connect(page, stdio=everything_stdio)
    page.locator("#share-menu > summary").click()
    page.get_by_label("Who may open it").select_option("anyone")
    page.get_by_role("button", name="Make the link").click()
    share = page.locator("#share-url").input_value()
    page.close()
    yield url, share


def _shows(page: Any, theme: str) -> None:
    """The page was themed before its first paint, shows the choice in its switch, and is painted so."""
    assert page.evaluate("window.themeAtBody") == theme, page.url
    expect(page.locator("html")).to_have_attribute("data-theme", theme)
    expect(page.get_by_label("Theme", exact=True)).to_have_value(theme)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == BACKGROUND[theme], page.url


# A page that is not there, visited on purpose: a 404 page with the switch like any other.
@pytest.mark.provokes(r"HTTP 404 GET \S+/s/00000000-0000-0000-0000-000000000000/$")
@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("width", [1440, 800])
def test_the_chosen_theme_is_kept_on_every_page_and_set_before_the_first_paint(
    browser: Any, app_context: Any, live_app: LiveApp, shared_session: tuple[str, str], width: int, theme: str
) -> None:
    session, share = shared_session
    state = app_context.storage_state()
    context = new_context(browser, viewport={"width": width, "height": 900}, storage_state=state)
    context.set_default_timeout(support.SHORT)
    context.add_init_script(THEME_AT_BODY)
    page = context.new_page()
    page.emulate_media(color_scheme=OTHER[theme])
    page.goto(live_app.url("/"))
    page.get_by_label("Theme", exact=True).select_option(theme)
    expect(page.locator("html")).to_have_attribute("data-theme", theme)
    for path in ("/", session, "/search?q=tools", "/compare", "/account", "/team"):
        page.goto(path if path.startswith("http") else live_app.url(path))
        _shows(page, theme)
    page.goto(live_app.url("/s/00000000-0000-0000-0000-000000000000/"))
    _shows(page, theme)
    context.close()

    # Someone with no account: the login page and the shared view keep their own choice.
    visitor = new_context(browser, viewport={"width": width, "height": 900})
    visitor.set_default_timeout(support.SHORT)
    visitor.add_init_script(THEME_AT_BODY)
    page = visitor.new_page()
    page.emulate_media(color_scheme=OTHER[theme])
    page.goto(live_app.url("/auth/login"))
    page.get_by_label("Theme", exact=True).select_option(theme)
    for url in (live_app.url("/auth/login"), share):
        page.goto(url)
        _shows(page, theme)
    visitor.close()


def test_system_follows_the_os_preference_as_it_changes(app_context: Any, live_app: LiveApp) -> None:
    page = open_page(app_context, live_app.url("/search"))
    page.get_by_label("Theme", exact=True).select_option("system")
    expect(page.locator("html")).to_have_attribute("data-theme", "system")
    for scheme in ("dark", "light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert page.evaluate("getComputedStyle(document.body).backgroundColor") == BACKGROUND[scheme]
    page.close()


def test_the_switch_shows_the_choice_in_the_session_page_connect_puts_in_place(
    app_context: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    page = open_page(app_context, live_app.url("/"))
    page.get_by_label("Theme", exact=True).select_option("dark")
    connect(page, stdio=everything_stdio)  # htmx swaps the session page's body in: no new document
    expect(page.get_by_label("Theme", exact=True)).to_have_value("dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    page.get_by_label("Theme", exact=True).select_option("system")
    page.close()


# --- the session page and the home page at 800 px ---------------------------------------------------------


def _head_lines(page: Any) -> float:
    """How far apart the tops of the session header's items are (0 when they sit on one line)."""
    return float(
        page.locator(".session-head").evaluate(
            """head => {
              const tops = [...head.children].filter(c => c.getClientRects().length)
                .map(c => c.getBoundingClientRect()).map(r => r.top + r.height / 2);
              return Math.max(...tops) - Math.min(...tops);
            }"""
        )
    )


def test_at_800px_share_opens_over_the_page_and_keeps_the_anyone_audience_after_making_a_link(
    app_context: Any, shared_session: tuple[str, str]
) -> None:
    session, _ = shared_session
    page = open_page(app_context, session)
    page.set_viewport_size({"width": 800, "height": 900})
    head = page.locator(".session-head")
    presence = page.locator("#presence")
    expect(presence.locator(".watcher")).to_have_count(1)
    before, chip = head.bounding_box(), presence.bounding_box()
    assert _head_lines(page) < 12  # one line

    page.locator("#share-menu > summary").click()
    form = page.locator("#share-form")
    expect(form).to_be_visible()
    assert head.bounding_box() == before and presence.bounding_box() == chip
    assert _head_lines(page) < 12
    panel = page.locator("#share-panel").bounding_box()
    assert panel is not None and panel["x"] >= 0 and panel["x"] + panel["width"] <= 800

    audience = page.get_by_label("Who may open it")
    audience.select_option("anyone")
    page.get_by_role("button", name="Make the link").click()
    expect(page.locator("#share-url")).to_have_value(re.compile("/shared/"))
    expect(page.get_by_label("Who may open it")).to_have_value("anyone")
    page.close()


# Every cell of every timeline row: inside its row, on one line, and either whole or (a name, a preview)
# ending in an ellipsis, a name with its whole text in its tooltip. Returns what is not.
CELLS = """rows => {
  const bad = [];
  for (const row of rows) {
    const right = row.getBoundingClientRect().right;
    for (const cell of row.children) {
      if (!cell.getClientRects().length) continue;
      const name = `${cell.className} of ${row.id} (${cell.textContent.trim()})`;
      if (cell.getBoundingClientRect().right > right + 0.5) bad.push(`${name}: outside its row`);
      const text = document.createRange();
      text.selectNodeContents(cell);
      const tops = new Set([...text.getClientRects()].map(r => Math.round(r.top)));
      if (tops.size > 1) bad.push(`${name}: on ${tops.size} lines`);
      if (cell.scrollWidth > cell.clientWidth + 1) {
        const ellipsis = getComputedStyle(cell).textOverflow === 'ellipsis';
        const truncates = cell.matches('.what, .preview') && ellipsis;
        if (!truncates) bad.push(`${name}: cut off`);
        else if (cell.matches('.what') && cell.title !== cell.textContent) bad.push(`${name}: no tooltip`);
      }
    }
  }
  return bad;
}"""


def test_at_800px_no_timeline_cell_overflows_its_column_and_a_long_name_ends_in_an_ellipsis(
    app_context: Any, shared_session: tuple[str, str]
) -> None:
    session, _ = shared_session
    page = open_page(app_context, session)
    page.set_viewport_size({"width": 800, "height": 900})
    rows = page.locator("#timeline-rows > .frame")
    expect(rows.filter(has=page.locator(".lat", has_text=TIMED)).first).to_be_visible()
    assert rows.evaluate_all(CELLS) == []
    pane = page.locator("#timeline-rows")
    assert pane.evaluate("p => p.scrollWidth <= p.clientWidth")
    long_name = page.locator(".frame .what[title='notifications/tools/list_changed']").first
    assert long_name.evaluate("c => c.scrollWidth > c.clientWidth")  # the case the ellipsis is for
    # Each column still says what it holds: latency and size in full.
    answer = rows.filter(has=page.locator(".lat", has_text=TIMED)).first
    assert re.fullmatch(r"[\d.]+ (ms|s)", answer.locator(".lat").inner_text())
    assert re.fullmatch(r"[\d.]+\s(bytes|KB|MB)", answer.locator(".size").inner_text())
    page.close()


def test_at_800px_the_home_pages_sessions_fit_and_a_protocol_revision_stays_on_one_line(
    app_context: Any, live_app: LiveApp, shared_session: tuple[str, str]
) -> None:
    page = open_page(app_context, live_app.url("/"))
    page.set_viewport_size({"width": 800, "height": 900})
    listing = page.locator("#home-sessions")
    revision = listing.locator("td", has_text=re.compile(r"^\d{4}-\d{2}-\d{2}$")).first
    expect(revision).to_be_visible()
    assert listing.evaluate("l => l.scrollWidth <= l.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    lines = revision.evaluate(
        "c => { const r = document.createRange(); r.selectNodeContents(c); return r.getClientRects().length }"
    )
    assert lines == 1
    page.close()


# --- the check every browser test gets (tests/browser/conftest.py) ----------------------------------------


def test_a_text_area_a_person_resized_breaks_no_csp_rule_when_htmx_swaps_its_form(
    app_context: Any, shared_session: tuple[str, str]
) -> None:
    session, _ = shared_session
    page = open_page(app_context, session + "?tab=tools")
    list_tools(page, until=("echo", "get-sum"))
    arguments = open_tool(page, "echo").get_by_label("Arguments (JSON object)")
    arguments.evaluate("area => { area.style.height = '12rem'; }")  # what dragging its corner does
    open_tool(page, "get-sum")  # a new form in its place, with a text area of the same id
    expect(page.get_by_label("Arguments (JSON object)")).not_to_have_attribute("style", re.compile("."))
    page.close()  # the conftest fails the test on the violation htmx's settling would cause


# The two problems this test causes on purpose, to see them recorded.
ON_PURPOSE = [r"console error: on purpose", r"CSP violation: style-src"]


@pytest.mark.provokes(*ON_PURPOSE, r"Content Security Policy")
def test_a_console_error_and_a_csp_violation_are_recorded_and_fail_a_test_that_does_not_allow_them(
    home: Any,
) -> None:
    start = len(SEEN)
    home.evaluate("console.error('on purpose')")
    # An inline style, refused; resolved once the violation's listeners (the recorder's first) have run.
    home.evaluate(
        """() => new Promise(resolve => {
          document.addEventListener('securitypolicyviolation', () => setTimeout(resolve), {once: true});
          document.body.setAttribute('style', 'color: red');
        })"""
    )
    seen = SEEN[start:]
    assert len(unallowed(seen, [])) >= 2  # a test with no marker fails on them
    assert unallowed(seen, [*ON_PURPOSE, r"Content Security Policy"]) == []
