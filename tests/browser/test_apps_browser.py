"""MCP Apps in Chromium: a tool's view rendered in an opaque-origin frame, and the page as its host.

A real `mcp-inspector`, Debian's Chromium and our App server (tests/servers/apps_server.py, the Python
SDK) whose view speaks the view side of the protocol in its own inline script.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import pytest
from support.browser import (
    LONG,
    assert_clean,
    call_card,
    connect,
    list_tools,
    open_tab,
    open_tool,
    timeline_rows,
    wait_until,
)

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SERVERS = Path(__file__).parents[1] / "servers"
APPS_SERVER = SERVERS / "apps_server.py"
# ext-apps' own example servers from npm, 2.0.3 (each view is one HTML file: they run offline).
NPM = SERVERS / "node_modules/@modelcontextprotocol"
VANILLA_JS = NPM / "server-basic-vanillajs/dist/index.js"
SHOTS = Path("/tmp/mcp-inspector-apps")


@pytest.fixture(scope="module")
def apps_stdio() -> dict:
    return {"command": sys.executable, "args": [str(APPS_SERVER), "stdio"]}


def _log(view: Any) -> Any:
    return view.locator(".app-log-list")


def test_a_view_renders_its_call_and_calls_tools_through_the_session(home: Any, apps_stdio: dict) -> None:
    connect(home, stdio=apps_stdio)
    list_tools(home, until=("show_weather", "legacy_weather", "plain"))
    # Both spellings of the view's link are marked; a tool without one is not.
    for name in ("show_weather", "legacy_weather"):
        row = home.locator("li.tool-row").filter(has=home.get_by_role("button", name=f"Open tool {name}"))
        expect(row.locator(".app-badge")).to_have_text("view")
    plain = home.locator("li.tool-row").filter(has=home.get_by_role("button", name="Open tool plain"))
    expect(plain.locator(".app-badge")).to_have_count(0)
    expect(home.get_by_role("tab", name="Apps", exact=True)).to_be_visible()  # the listing had views

    form = open_tool(home, "show_weather")
    form.get_by_label("city").fill("Oslo")
    form.get_by_role("button", name="Call show_weather").click()
    expect(call_card(home, "tools/call", "show_weather").first).to_contain_text("Oslo: 4")

    view = home.get_by_role("region", name="View of show_weather").first
    frame_element = view.locator("iframe.app-frame")
    expect(frame_element).to_have_attribute("sandbox", "allow-scripts")
    inside = view.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text("Oslo: 4", timeout=LONG)
    expect(inside.locator("#input")).to_have_text('{"city":"Oslo"}')
    expect(inside.locator("#isolation")).to_have_text("parent unreachable")
    expect(inside.locator("#log")).to_contain_text("initialized with 2026-01-26 theme light mode inline")
    expect(frame_element).to_have_attribute("height", "420")  # size-changed, clamped
    # The view's document carries its own policy: opaque (sandbox) even opened alone, nothing of ours.
    document = home.request.get(urljoin(home.url, frame_element.get_attribute("src") or ""))
    policy = document.headers["content-security-policy"]
    assert "sandbox allow-scripts" in policy and "connect-src 'none'" in policy
    assert "'self'" not in policy.replace("frame-ancestors 'self'", "")
    # Our page's own policy is as strict as ever: no inline script or style.
    page_policy = home.request.get(home.url).headers["content-security-policy"]
    assert "script-src 'self';" in page_policy and "style-src 'self';" in page_policy
    # The host held its notifications until the view said it was initialized, then sent input, result.
    log = _log(view)
    expect(log).to_contain_text("ui/notifications/tool-result")
    methods = [m.strip() for m in log.locator(".app-log-method").all_inner_texts()]
    assert methods.index("ui/initialize") < methods.index("ui/notifications/initialized")
    assert methods.index("ui/notifications/initialized") < methods.index("ui/notifications/tool-input")
    assert methods.index("ui/notifications/tool-input") < methods.index("ui/notifications/tool-result")
    # The view's resources/read went through the session.
    expect(timeline_rows(home, "resources/read").first).to_be_visible()

    # A control in the view calls an app-only tool: through the session, onto the timeline.
    inside.get_by_role("button", name="Refresh").click()
    expect(inside.locator("#refreshed")).to_have_text("refreshed Oslo: 5 °C")
    expect(timeline_rows(home, "tools/call").filter(has_text="refresh_weather").first).to_be_visible()
    expect(log).to_contain_text(re.compile(r"tools/call #\d+ on the timeline"))

    # Each view↔host message is a frame of its own on the timeline; the view's tools/call message
    # comes before the request it caused.
    messages = home.locator("#timeline-rows > .frame").filter(has_text=re.compile("view → host|host → view"))
    expect(messages.filter(has_text="view → host ui/initialize")).to_have_count(1)
    expect(messages.filter(has_text="host → view ui/notifications/tool-result")).to_have_count(1)
    asked = messages.filter(has_text="view → host tools/call").first
    sent = timeline_rows(home, "tools/call").filter(has_text="refresh_weather").first
    assert int(asked.get_attribute("data-seq") or 0) < int(sent.get_attribute("data-seq") or 0)

    # A model-only tool is refused to the view, never reaches the server, and the refusal is flagged.
    inside.get_by_role("button", name="Try the model-only tool").click()
    expect(inside.locator("#refused")).to_contain_text(
        "refused: tool 'model_only_secret' is not visible to apps"
    )
    expect(timeline_rows(home, "tools/call").filter(has_text="model_only_secret")).to_have_count(0)
    flagged = messages.filter(has=home.locator("button.verdict", has_text="apps-tool-not-visible"))
    expect(flagged).to_have_count(1)

    # What a model would receive is shown, not sent anywhere.
    inside.get_by_role("button", name="Tell the model").click()
    model = view.get_by_role("region", name="What a model would receive")
    expect(model).to_contain_text("What should I wear in Oslo?")
    expect(model).to_contain_text('"shown": true')

    # A link opens only if the person agrees: the host is shown; refused here.
    inside.get_by_role("button", name="Open the forecast").click()
    ask = view.locator(".app-ask")
    expect(ask).to_contain_text("forecast.example.com")
    ask.get_by_role("button", name="Refuse").click()
    expect(inside.locator("#log")).to_contain_text('open-link answered {"isError":true}')

    SHOTS.mkdir(exist_ok=True)
    home.screenshot(path=str(SHOTS / "apps-tools-tab.png"), full_page=True)

    # The flow view draws the view↔host frames among the others.
    home.get_by_role("button", name="Flow", exact=True).click()
    expect(
        home.locator("#timeline-rows.flow > .flow-row").filter(has_text="ui/initialize").first
    ).to_be_visible()
    home.get_by_role("button", name="Table", exact=True).click()
    expect(home.locator("#timeline-rows.flow")).to_have_count(0)

    # Teardown before the frame goes: asked, answered, then the frame is removed.
    view.get_by_role("button", name="Close view").click()
    expect(frame_element).to_have_count(0)
    expect(log).to_contain_text("ui/resource-teardown")
    assert_clean(home)


def test_the_permissions_a_view_asks_for_are_granted_only_if_the_person_allows(
    home: Any, apps_stdio: dict
) -> None:
    connect(home, stdio=apps_stdio)
    list_tools(home, until=("weather_clip",))
    for answer, policy in (("Allow", "camera; clipboard-write"), ("Render without", None)):
        form = open_tool(home, "weather_clip")
        form.get_by_label("city").fill("Cairo")
        form.get_by_role("button", name="Call weather_clip").click()
        view = home.get_by_role("region", name="View of weather_clip").first
        ask = view.locator(".app-ask")
        # The view is read through the session first (resources/read), then the person is asked.
        expect(ask).to_contain_text("The view asks for the camera, writing to the clipboard", timeout=LONG)
        expect(view.locator("iframe.app-frame")).to_have_count(0)  # no frame before the person answers
        ask.get_by_role("button", name=answer).click()
        frame = view.locator("iframe.app-frame")
        expect(view.frame_locator("iframe.app-frame").locator("#result")).to_have_text(
            "Cairo: 31 °C", timeout=LONG
        )
        if policy is None:
            expect(frame).not_to_have_attribute("allow", re.compile(".*"))
        else:
            expect(frame).to_have_attribute("allow", policy)
        # What the view was told it has, in the host's answer to its ui/initialize.
        granted = "camera,clipboardWrite" if policy else "none"
        expect(view.frame_locator("iframe.app-frame").locator("#log")).to_contain_text(
            f"permissions granted: {granted}"
        )
        view.get_by_role("button", name="Close view").click()
    assert_clean(home)


def test_the_apps_tab_lists_the_views_and_renders_one_when_called(home: Any, apps_stdio: dict) -> None:
    connect(home, stdio=apps_stdio)
    list_tools(home, until=("show_weather",))
    open_tab(home, "Apps")
    panel = home.locator("#apps-panel")
    expect(panel.get_by_role("button", name=re.compile(r"^Open app "))).to_have_count(3)
    panel.get_by_role("button", name="Open app legacy_weather").click()
    form = home.get_by_role("region", name="Call legacy_weather", exact=True)
    form.get_by_label("city").fill("Lisbon")
    form.get_by_role("button", name="Call legacy_weather").click()
    stage = home.locator("#app-stage")
    inside = stage.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_have_text("Lisbon: 19 °C", timeout=LONG)
    home.screenshot(path=str(SHOTS / "apps-tab.png"), full_page=True)
    # Our dark theme reaches the view as a host context change.
    home.get_by_label("Theme", exact=True).select_option("dark")
    expect(stage.locator(".app-log-list")).to_contain_text("ui/notifications/host-context-changed")
    expect(inside.locator("body")).to_have_attribute("data-theme", "dark")
    home.screenshot(path=str(SHOTS / "apps-tab-dark.png"), full_page=True)
    home.get_by_label("Theme", exact=True).select_option("system")
    assert_clean(home)


# The view's bundle (zod) probes whether eval works; the view's CSP, as the spec has it, refuses eval.
@pytest.mark.provokes(r"CSP violation: script-src eval \S+/apps/frame/\d+")
def test_the_basic_vanillajs_app_server_from_npm_renders_and_calls_its_tool_through_the_session(
    home: Any,
) -> None:
    node = shutil.which("node")
    if node is None or not VANILLA_JS.is_file():
        pytest.fail(
            f"needs node and {VANILLA_JS}: run `npm install --no-audit --no-fund --prefix tests/servers`"
        )
    connect(home, stdio={"command": node, "args": [str(VANILLA_JS), "--stdio"]})
    list_tools(home, until=("get-time",))
    open_tool(home, "get-time").get_by_role("button", name="Call get-time").click()
    view = home.get_by_role("region", name="View of get-time").first
    inside = view.frame_locator("iframe.app-frame")
    answer = call_card(home, "tools/call", "get-time").first.locator("pre").first
    expect(answer).to_contain_text(re.compile(r"\d{4}-\d\d-\d\dT"))
    time_shown = re.search(r"\d{4}-\d\d-\d\dT[\d:.]+Z", answer.inner_text())
    assert time_shown is not None
    # The SDK's App got the tool result the host delivered after its initialized notification.
    expect(inside.locator("body")).to_contain_text(time_shown[0], timeout=LONG)
    log = _log(view)
    # Chromium renders an off-screen cross-origin frame lazily: its ResizeObserver waits until it shows.
    view.locator("iframe.app-frame").scroll_into_view_if_needed()
    expect(log).to_contain_text("ui/notifications/size-changed")
    inside.get_by_role("button", name="Get Server Time").click()
    expect(log).to_contain_text(re.compile(r"tools/call #\d+ on the timeline"))
    expect(timeline_rows(home, "tools/call")).to_have_count(4)  # the form's call and the view's, each way
    expect(inside.locator("body")).not_to_contain_text(time_shown[0])
    inside.get_by_role("button", name="Send Message").click()
    model = view.get_by_role("region", name="What a model would receive")
    expect(model).to_contain_text("This is message text.", timeout=LONG)
    inside.get_by_role("button", name="Open Link").click()
    expect(view.locator(".app-ask")).to_contain_text("modelcontextprotocol.io")
    SHOTS.mkdir(exist_ok=True)
    home.screenshot(path=str(SHOTS / "basic-vanillajs.png"), full_page=True)
    view.locator(".app-ask").get_by_role("button", name="Refuse").click()
    expect(view.locator(".app-ask")).to_have_count(0)


def test_the_connect_forms_mcp_apps_switch_declares_the_extension_or_not(home: Any, apps_stdio: dict) -> None:
    form = home.locator("#connect-form")
    form.get_by_label("Transport").select_option("stdio")
    form.get_by_label("Command", exact=True).fill(" ".join([apps_stdio["command"], *apps_stdio["args"]]))
    form.get_by_text("Protocol, capabilities, roots and timeouts").click()
    switch = form.get_by_label("MCP Apps (io.modelcontextprotocol/ui)")
    expect(switch).to_be_checked()  # on by default
    SHOTS.mkdir(exist_ok=True)
    form.screenshot(path=str(SHOTS / "connect-form.png"))
    switch.uncheck()
    form.get_by_role("button", name="Connect", exact=True).click()
    home.wait_for_url(re.compile(r"/s/"), timeout=LONG)
    open_tab(home, "Overview")
    client_caps = home.locator("details.cap-raw pre.json").first
    home.locator("details.cap-raw").get_by_text("Raw JSON", exact=True).click()
    expect(client_caps).to_contain_text('"sampling"', timeout=LONG)
    expect(client_caps).not_to_contain_text("io.modelcontextprotocol/ui")


def test_the_extension_is_declared_by_default(home: Any, apps_stdio: dict) -> None:
    connect(home, stdio=apps_stdio)
    open_tab(home, "Overview")
    home.locator("details.cap-raw").get_by_text("Raw JSON", exact=True).click()
    client_caps = home.locator("details.cap-raw pre.json").first
    expect(client_caps).to_contain_text('"io.modelcontextprotocol/ui"')
    expect(client_caps).to_contain_text('"text/html;profile=mcp-app"')


def _npm_server(package: str) -> dict:
    node, script = shutil.which("node"), NPM / package / "dist/index.js"
    if node is None or not script.is_file():
        pytest.fail(f"needs node and {script}: run `npm install --no-audit --no-fund --prefix tests/servers`")
    return {"command": node, "args": [str(script), "--stdio"]}


# package, the tool with a view, what its view shows of the result, and what the view then calls by
# itself or when a control is pressed (the control's name; None: nothing to press).
NPM_APPS = [
    ("server-basic-react", "get-time", re.compile(r"\d{4}-\d\d-\d\dT"), "get-time", "Get Server Time"),
    ("server-system-monitor", "get-system-info", re.compile("System Info", re.I), "poll-system-stats", None),
    ("server-budget-allocator", "get-budget-data", re.compile(r"Allocated: \$100,000"), None, None),
]


# The views' bundles (zod) probe whether eval works; the view's CSP, as the spec has it, refuses eval.
@pytest.mark.provokes(r"CSP violation: script-src eval \S+/apps/frame/\d+")
@pytest.mark.parametrize(
    ("package", "tool", "shown", "calls", "control"), NPM_APPS, ids=[a[0] for a in NPM_APPS]
)
def test_ext_apps_servers_from_npm_render_their_result_and_call_tools_through_the_session(
    home: Any, package: str, tool: str, shown: re.Pattern[str], calls: str | None, control: str | None
) -> None:
    connect(home, stdio=_npm_server(package))
    list_tools(home, until=(tool,))
    open_tool(home, tool).get_by_role("button", name=f"Call {tool}").click()
    view = home.get_by_role("region", name=f"View of {tool}").first
    view.locator("iframe.app-frame").scroll_into_view_if_needed()
    inside = view.frame_locator("iframe.app-frame")
    expect(inside.locator("body")).to_contain_text(shown, timeout=LONG)
    messages = home.locator("#timeline-rows > .frame").filter(has_text=re.compile("view → host|host → view"))
    delivered = messages.filter(has_text="host → view ui/notifications/tool-result")
    expect(delivered).to_have_count(1)
    # Cards pushed above it move the view: Chromium throttles an off-screen cross-origin frame.
    view.locator("iframe.app-frame").scroll_into_view_if_needed()
    if control is not None:
        inside.get_by_role("button", name=control).click()
    if calls is not None:
        # The view's tools/call message, then the request it caused: both after the result it was given.
        after = int(delivered.get_attribute("data-seq") or 0)
        requests = home.locator("#timeline-rows > .frame.dir-out").filter(has_text=f'"name":"{calls}"')

        def seqs(rows: Any) -> list[int]:
            return [
                int(seq)
                for seq in rows.evaluate_all("rows => rows.map(r => r.dataset.seq)")
                if int(seq) > after
            ]

        wait_until(lambda: bool(seqs(requests)), LONG / 1000, f"no tools/call {calls} from the view")
        asked = seqs(messages.filter(has_text="view → host tools/call"))
        assert asked and min(asked) < min(seqs(requests))
    SHOTS.mkdir(exist_ok=True)
    home.screenshot(path=str(SHOTS / f"{package}.png"), full_page=True)


# Ticks every 10 ms on the page; the longest gap between two is the longest a person's input waited.
WATCH_TICKS = """() => {
  window.inspectorTicks = [];
  let last = performance.now();
  window.inspectorTicker = setInterval(() => {
    const now = performance.now();
    window.inspectorTicks.push(now - last);
    last = now;
  }, 10);
}"""


# Each key the person presses: how long until its handler ran, and until the next frame was drawn; and
# every task that held the page's thread over 50 ms.
WATCH_INPUT = """() => {
  window.inspectorInput = {keys: [], long: []};
  document.addEventListener("keydown", (event) => {
    const taken = event.timeStamp, handled = performance.now();
    const shown = () => window.inspectorInput.keys.push([handled - taken, performance.now() - taken]);
    requestAnimationFrame(shown);
  }, true);
  new PerformanceObserver((list) => {
    list.getEntries().forEach((entry) => window.inspectorInput.long.push(entry.duration));
  }).observe({entryTypes: ["longtask"]});
}"""


def test_a_view_that_floods_the_host_leaves_the_page_answering_and_is_flagged(
    home: Any, apps_stdio: dict
) -> None:
    connect(home, stdio=apps_stdio)
    list_tools(home, until=("show_weather",))
    form = open_tool(home, "show_weather")
    form.get_by_label("city").fill("Cairo")
    form.get_by_role("button", name="Call show_weather").click()
    view = home.get_by_role("region", name="View of show_weather").first
    inside = view.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text("Cairo: 31", timeout=LONG)
    # A view that keeps its own thread busy for 1.5 s: the page goes on (the sandboxed frame runs in
    # a process of its own in Chromium).
    frame = next(f for f in home.frames if "/apps/frame/" in f.url)
    home.evaluate(WATCH_TICKS)
    frame.evaluate("() => { setTimeout(() => { const t = Date.now(); while (Date.now() - t < 1500) {} }); }")
    wait_until(lambda: len(home.evaluate("() => window.inspectorTicks")) > 200, LONG / 1000, "no ticks")
    busy = home.evaluate("() => { clearInterval(window.inspectorTicker); return window.inspectorTicks; }")
    print(f"the page's longest pause while the view was busy: {max(busy):.0f} ms")
    assert max(busy) < 500, sorted(busy)[-5:]

    # The view floods the host (10,000 messages a second) while a person types: each key is timed
    # from the moment the browser took it to the frame that shows its effect.
    home.evaluate(WATCH_INPUT)
    home.get_by_role("tab", name="Overview", exact=True).focus()
    inside.get_by_role("button", name="Flood the host").click()
    home.get_by_role("tab", name="Overview", exact=True).focus()
    started = time.monotonic()
    while time.monotonic() - started < 4:  # the flood lasts three seconds
        home.keyboard.press("Shift")
    probe = home.evaluate("() => window.inspectorInput")
    # Past its share of a second the view's messages are counted, not read; past the stopping point
    # its frame is removed, and the host says so.
    expect(view).to_have_attribute("data-state", "stopped")
    expect(view.locator(".app-view-state")).to_contain_text(re.compile(r"stopped: .*\(\d+ ignored"))
    expect(view.locator("iframe.app-frame")).to_have_count(0)
    keys = [k[1] for k in probe["keys"]]
    print(
        f"during the flood: {len(keys)} keys, the slowest shown after {max(keys):.0f} ms; "
        f"long tasks {sorted(probe['long'])[-5:]} ms"
    )
    assert len(keys) > 20
    # The page answers: nineteen keys in twenty within a frame or so, and none held as long as a frozen
    # page would (a loaded machine delays the odd frame whatever the page does).
    assert sorted(keys)[len(keys) * 19 // 20] < 100, sorted(keys)[-5:]
    assert max(keys) < 500, sorted(keys)[-5:]
    # The messages it read are on the timeline, and one frame says how many were not.
    home.get_by_label("Rule broken").fill("apps-flood")
    flood = home.locator("#timeline-rows > .frame").filter(has_text="apps-flood")
    expect(flood.first).to_be_visible(timeout=LONG)
    expect(flood.first).to_contain_text("not recorded")
    assert int(view.locator(".app-log-count").inner_text()) < 2000  # of 30,000 and their answers
    home.get_by_role("tab", name="Overview", exact=True).click()  # the page still answers a person
    expect(home.get_by_role("tab", name="Overview", exact=True)).to_have_attribute("aria-selected", "true")
    assert_clean(home)
