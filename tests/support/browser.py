"""Fixtures and helpers for the browser tests: a live `mcp-inspector`, Chromium, a logged-in context.

The app runs as a real process (its own data directory and login token) and Debian's Chromium drives it
through Playwright's sync API. Every page of a context made with `new_context` (or opened with
`open_page`) records console errors, uncaught page errors, CSP violations and 4xx/5xx responses, and
tests/browser/conftest.py fails the test that saw any, unless its `provokes` marker allows it (a
pattern for each error the test causes on purpose). `assert_clean(page)` checks some pages mid-test.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import re
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.databases import migrated_data_dir
from support.processes import free_port, stop_process

CHROMIUM = Path("/usr/bin/chromium")
MCP_INSPECTOR = str(Path(sys.executable).with_name("mcp-inspector"))
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
STARTUP_TIMEOUT = 30.0
LOGIN_LINE = re.compile(r"Open this URL to log in.*: (?P<url>http://\S+/auth/token\?token=\S+)")
# A CSP violation does not always reach the console (report-only, say): say it there, with the element
# or file that caused it. Playwright injects this past the page's CSP.
CSP_LISTENER = """
document.addEventListener('securitypolicyviolation', function (e) {
  var what = e.target && e.target.outerHTML ? e.target.outerHTML.slice(0, 160) : '';
  console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI + ' '
    + (e.sourceFile || '') + ':' + e.lineNumber + ' ' + what);
});
"""

# Timeouts for Playwright's auto-waiting expect(), in milliseconds.
SHORT = 10_000
LONG = 30_000
# expect()'s own default is 5 s, which a page loses on a loaded machine (three workers on two cores).
try:
    from playwright.sync_api import expect as _expect
except ImportError:  # the browser tests skip themselves then
    pass
else:
    _expect.set_options(timeout=SHORT)


@dataclasses.dataclass
class LiveApp:
    """A running `mcp-inspector` process."""

    proc: subprocess.Popen[str]
    base_url: str
    login_url: str
    output: list[str]
    data_dir: Path

    def url(self, path: str) -> str:
        return self.base_url + path


def _read_lines(proc: subprocess.Popen[str], lines: queue.Queue[str | None], seen: list[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        lines.put(line)
    lines.put(None)


@pytest.fixture(scope="module")
def app_env() -> dict[str, str]:
    """Variables the live app gets besides the test's environment: a module overrides this fixture."""
    return {}


@pytest.fixture(scope="module")
def live_app(tmp_path_factory: pytest.TempPathFactory, app_env: dict[str, str]) -> Iterator[LiveApp]:
    """`mcp-inspector --no-browser` on a free port, with a fresh data directory and a random login token."""
    if not CHROMIUM.exists():
        pytest.fail("needs Debian's chromium at /usr/bin/chromium: run tests/run, which installs it")
    port = free_port()
    token = secrets.token_urlsafe(24)
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    data_dir = migrated_data_dir(tmp_path_factory.mktemp("inspector-data"))
    env |= {
        "INSPECTOR_DATA_DIR": str(data_dir),
        "INSPECTOR_TOKEN": token,
        "PYTHONUNBUFFERED": "1",
        **app_env,
    }
    proc = subprocess.Popen(
        [MCP_INSPECTOR, "--no-browser", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []
    reader = threading.Thread(target=_read_lines, args=(proc, lines, seen), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"mcp-inspector printed no login URL within {STARTUP_TIMEOUT}s:\n{''.join(seen)}")
            if line is None:
                pytest.fail(f"mcp-inspector exited before printing its login URL:\n{''.join(seen)}")
            match = LOGIN_LINE.search(line)
            if match:
                break
        assert token in match["url"]
        yield LiveApp(proc, f"http://127.0.0.1:{port}", match["url"], seen, data_dir)
        proc.terminate()
        code = proc.wait(timeout=15)
        assert code == 0, f"mcp-inspector exited with {code}:\n{''.join(seen)[-4000:]}"
    finally:
        stop_process(proc)
        reader.join(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.fixture(scope="module")
def browser(live_app: LiveApp) -> Iterator[Any]:
    """Headless Debian Chromium (never a downloaded one)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def app_context(browser: Any, live_app: LiveApp) -> Iterator[Any]:
    """A browser context logged in to the live app (the one-time token URL, as a person would open it)."""
    from playwright.sync_api import expect

    context = new_context(browser, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(SHORT)
    page = context.new_page()
    page.goto(live_app.login_url)
    page.wait_for_url(live_app.url("/"), timeout=SHORT)
    expect(page.get_by_role("heading", name="Connect to an MCP server")).to_be_visible()
    page.close()
    yield context
    context.close()


def second_window(browser: Any, context: Any) -> Any:
    """Another window logged in as the same user (same cookies).

    A second page in the same context would be a background tab: Chromium throttles its animation frames,
    which Playwright's actionability checks wait on, so each click there takes seconds. Separate windows
    stay visible.
    """
    state = context.storage_state()
    other = new_context(browser, viewport={"width": 1400, "height": 1000}, storage_state=state)
    other.set_default_timeout(SHORT)
    return other


# --- per-page problem recording -----------------------------------------------------------------------------

_PROBLEMS: dict[int, list[str]] = {}
_WATCHED: list[Any] = []  # held, so no page watched is collected and its id given to another
# Every problem of every watched page, in order: the conftest fails the test during which they came.
SEEN: list[str] = []


@pytest.fixture
def home(app_context: Any, live_app: LiveApp) -> Iterator[Any]:
    """A fresh page on "/", closed after the test."""
    page = open_page(app_context, live_app.url("/"))
    yield page
    page.close()


def new_context(browser: Any, **options: Any) -> Any:
    """A browser context whose every page is watched for problems."""
    context = browser.new_context(**options)
    context.add_init_script(CSP_LISTENER)
    context.on("page", watch)
    return context


def watch(page: Any) -> Any:
    """Record `page`'s console errors, page errors, CSP violations and 4xx/5xx responses (once)."""
    if id(page) in _PROBLEMS:
        return page
    problems: list[str] = []
    _PROBLEMS[id(page)] = problems
    _WATCHED.append(page)

    def seen(problem: str) -> None:
        problems.append(problem)
        SEEN.append(f"{page.url}: {problem}")

    def on_console(message: Any) -> None:
        text = message.text
        if text.startswith("Failed to load resource"):
            return  # recorded with its URL by on_response
        if message.type == "error" or "Content Security Policy" in text:
            seen(f"console {message.type}: {text}")

    def on_response(response: Any) -> None:
        # Chromium asks for /favicon.ico by itself for a page with no icon link (a raw frame, a file).
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            seen(f"HTTP {response.status} {response.request.method} {response.url}")

    page.on("console", on_console)
    page.on("response", on_response)
    page.on("pageerror", lambda error: seen(f"page error: {error}"))
    return page


def open_page(context: Any, path: str = "/", base_url: str = "") -> Any:
    """A new page in `context` that records console errors, page errors and CSP violations."""
    page = context.new_page()
    if id(page) not in _PROBLEMS:  # a context not made by new_context
        page.add_init_script(CSP_LISTENER)
        watch(page)
    if path:
        page.goto(base_url + path)
    return page


def unallowed(problems: list[str], patterns: list[str]) -> list[str]:
    """The problems none of `patterns` (regular expressions, searched) allows."""
    allowed = [re.compile(pattern) for pattern in patterns]
    return [problem for problem in problems if not any(pattern.search(problem) for pattern in allowed)]


def problems_of(page: Any) -> list[str]:
    return list(_PROBLEMS.get(id(page), []))


def assert_clean(*pages: Any) -> None:
    """Fail if any of `pages` logged a console error, a page error or a CSP violation."""
    found = [f"{page.url}: {problem}" for page in pages for problem in problems_of(page)]
    assert not found, "problems in the browser:\n" + "\n".join(found)


# --- driving the app ----------------------------------------------------------------------------------------


def status(page: Any) -> Any:
    """The session's status badge."""
    return page.locator("#session-state").get_by_role("status")


def connect(
    page: Any,
    *,
    stdio: dict | None = None,
    url: str | None = None,
    roots: str | None = None,
    review_roots: bool = False,
    protocol: str | None = None,
    timeout: float = LONG,
) -> str:
    """Fill the connect form on "/" and wait for the session page to read "ready"; return the page URL."""
    from playwright.sync_api import expect

    form = page.locator("#connect-form")
    if stdio is not None:
        form.get_by_label("Transport").select_option("stdio")
        form.get_by_label("Command", exact=True).fill(" ".join([stdio["command"], *stdio["args"]]))
    else:
        assert url is not None
        form.get_by_label("Transport").select_option(label="Streamable HTTP")
        form.get_by_label("URL", exact=True).fill(url)
    if roots is not None or review_roots or protocol is not None:
        form.get_by_text("Protocol, capabilities, roots and timeouts").click()
        if protocol is not None:
            form.get_by_label("Protocol version").select_option(protocol)
        if review_roots:
            form.get_by_label("ask me before answering roots/list").check()
        if roots is not None:
            form.get_by_label("Roots", exact=True).fill(roots)
    form.get_by_role("button", name="Connect", exact=True).click()
    page.wait_for_url(re.compile(r"/s/"), timeout=timeout)
    try:
        expect(status(page)).to_have_text("ready", timeout=timeout)
    except AssertionError as error:
        shot = f"/tmp/mcp-inspector-connect-{os.getpid()}-{time.monotonic_ns()}.png"
        page.screenshot(path=shot, full_page=True)
        timeline = page.locator("#timeline-rows").inner_text()
        raise AssertionError(f"{error}\nscreenshot: {shot}\ntimeline:\n{timeline}") from None
    return page.url


def until_idle(page: Any) -> None:
    """Until no request is on its way, swapping or settling (the page's own move to Tools on readiness,
    a first list sent as a tab opened): an answer still coming would replace what the test does next."""
    from playwright.sync_api import expect

    expect(page.locator(".htmx-swapping, .htmx-settling, .htmx-request")).to_have_count(0, timeout=LONG)


def open_tab(page: Any, name: str) -> None:
    from playwright.sync_api import expect

    until_idle(page)
    tab = page.get_by_role("tab", name=name, exact=True)
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true", timeout=LONG)
    # htmx processes a swapped panel as it settles: a form pressed before then submits as plain HTML.
    until_idle(page)


def list_tools(page: Any, *, until: tuple[str, ...] = (), timeout: float = LONG) -> None:
    """Tools tab, List tools; again until all of `until` are shown (server-everything adds some late)."""
    from playwright.sync_api import expect

    open_tab(page, "Tools")
    deadline = time.monotonic() + timeout / 1000
    while True:
        button = page.locator("#tools-panel").get_by_role("button", name=re.compile(r"^List tools"))
        with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/tools/list")):
            button.click()
        expect(page.get_by_role("button", name="List tools again")).to_be_visible()
        try:
            for name in until:
                tool = page.get_by_role("button", name=f"Open tool {name}", exact=True)
                expect(tool).to_be_visible(timeout=1000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def open_tool(page: Any, name: str) -> Any:
    """Open the call form of tool `name`; return the form's section."""
    from playwright.sync_api import expect

    # The form shown now is marked: a form of the same tool already open must not be taken for the new one,
    # whose arrival would otherwise replace it under the caller's next click.
    page.evaluate("() => { const f = document.getElementById('tool-form'); if (f) f.dataset.replaced = ''; }")
    page.get_by_role("button", name=f"Open tool {name}", exact=True).click()
    expect(page.locator("#tool-form:not([data-replaced])")).to_be_attached()
    section = page.get_by_role("region", name=f"Call {name}", exact=True)
    expect(section).to_be_visible()
    return section


def call_tool_raw(page: Any, name: str, arguments: str) -> None:
    """Open tool `name` and call it with raw JSON `arguments`."""
    section = open_tool(page, name)
    section.get_by_text("Raw JSON arguments").click()
    section.get_by_label("Arguments (JSON object)").fill(arguments)
    section.get_by_role("button", name="Call with raw JSON").click()


def send_raw(page: Any, method: str, params: str = "") -> None:
    """The "Send any request (raw JSON)" form."""
    details = page.locator("details.raw-request")
    if details.get_attribute("open") is None:
        page.get_by_text("Send any request (raw JSON)").click()
    page.get_by_label("Request method").fill(method)
    page.get_by_label("Params (JSON object)").fill(params)
    page.get_by_role("button", name="Send request").click()


def calls(page: Any) -> Any:
    return page.locator("#call-list")


def call_card(page: Any, method: str, tool: str | None = None) -> Any:
    """Call cards of `method` (optionally of tool `tool`), newest first."""
    cards = calls(page).locator("article.call").filter(has=page.locator("strong.method", has_text=method))
    if tool is not None:
        cards = cards.filter(has=page.locator("header code", has_text=re.compile(f"^{re.escape(tool)}$")))
    return cards


def timeline_rows(page: Any, method: str | None = None) -> Any:
    rows = page.locator("#timeline-rows > .frame")
    if method is not None:
        rows = rows.filter(has=page.locator(".what", has_text=re.compile(f"^{re.escape(method)}$")))
    return rows


def timeline_ids(page: Any) -> list[str]:
    return page.locator("#timeline-rows > .frame").evaluate_all("rows => rows.map(r => r.id)")


def everything_children(app_pid: int) -> list[int]:
    """Pids of server-everything processes (dist/index.js) whose parent is `app_pid`, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after the last ")".
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == app_pid and any(arg.endswith(b"server-everything/dist/index.js") for arg in cmdline):
            found.append(int(entry.name))
    return found


def wait_until(check: Callable[[], bool], timeout: float, message: str) -> None:
    """Poll `check` (every 0.1 s, a bounded wait, not a sleep for synchronisation) until true or fail."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(message)
        time.sleep(0.1)


def hold(page: Any, pattern: str, *, fetch: bool = False) -> list[Any]:
    """Hold the page's requests to ``pattern`` on their way: the list fills with their routes (with their
    answers, fetched, when ``fetch``) for the test to let go."""
    held: list[Any] = []
    page.route(pattern, lambda route: held.append((route, route.fetch()) if fetch else route))
    return held


def until_held(page: Any, held: list[Any], message: str) -> None:
    """Wait until ``hold``'s list has a request."""

    def fetched() -> bool:
        page.evaluate("1")  # Playwright runs a route's handler while the page is asked something
        return bool(held)

    wait_until(fetched, SHORT / 1000, message)
