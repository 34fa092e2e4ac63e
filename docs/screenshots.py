"""Screenshots of every screen, light and dark, wide and narrow: ``python docs/screenshots.py OUTDIR``.

Starts ``mcp-inspector`` on a temporary data directory, connects server-everything over stdio (the one
the tests use, ``tests/servers/node_modules``), calls a few tools, makes a share link, then visits each
screen in Chromium at each width and theme and writes ``OUTDIR/<screen>-<width>-<theme>.png``. The
theme is picked with the top bar's switch, as a person would. Console errors and CSP violations seen
on the way are printed at the end, and make the exit status 1.

Needs Playwright (a dev dependency) and a Chromium: Debian's ``/usr/bin/chromium`` unless
``--chromium`` names another. The PNGs are for looking at, never committed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
APP_BIN = Path(sys.executable).with_name("mcp-inspector")
EVERYTHING_JS = REPO / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
WIDTHS = (1440, 800)
THEMES = ("light", "dark")
TIMEOUT_MS = 30_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def running_app(data_dir: Path) -> Iterator[tuple[str, str]]:
    """``mcp-inspector --no-browser`` on a free port; yields its base URL and its one-time login URL."""
    port, token = free_port(), secrets.token_urlsafe(16)
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE", "INSPECTOR_HOSTED")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # This checkout's code, even when the virtualenv's install points at another one.
    path = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env |= {"INSPECTOR_DATA_DIR": str(data_dir), "INSPECTOR_TOKEN": token, "PYTHONPATH": path}
    with open(data_dir / "app.log", "wb") as log:
        proc = subprocess.Popen(
            [str(APP_BIN), "--no-browser", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"mcp-inspector did not start; see {data_dir / 'app.log'}")
                time.sleep(0.1)  # a start-up poll, bounded by the deadline
            base = f"http://127.0.0.1:{port}"
            yield base, f"{base}/auth/token?token={token}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Problems:
    """Console errors, page errors and CSP violations of every page, with the page they came from."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, page: Any) -> Any:
        def on_console(message: Any) -> None:
            # The error screen is a 404 on purpose; Chromium logs the status of every such response.
            if message.type == "error" and not message.text.startswith("Failed to load resource"):
                self.seen.append(f"{page.url}: {message.text}")

        page.on("console", on_console)
        page.on("pageerror", lambda error: self.seen.append(f"{page.url}: page error: {error}"))
        return page


def settle(page: Any) -> None:
    """Wait until htmx has no request in flight and nothing swapping."""
    page.wait_for_load_state("load")
    page.wait_for_function(
        "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')",
        timeout=TIMEOUT_MS,
    )


def connect(page: Any, base: str, command: str, name: str) -> str:
    """Connect through the home page's form; return the session page's URL once it says ready."""
    page.goto(base + "/")
    form = page.locator("#connect-form")
    form.get_by_label("Transport").select_option("stdio")
    form.get_by_label("Name", exact=True).fill(name)
    form.get_by_label("Command", exact=True).fill(command)
    form.get_by_role("button", name="Connect", exact=True).click()
    page.wait_for_url(re.compile(r"/s/"), timeout=TIMEOUT_MS)
    page.locator("#session-state [role=status]", has_text="ready").wait_for(timeout=TIMEOUT_MS)
    return str(page.url).split("?")[0]


def open_tab(page: Any, name: str) -> None:
    tab = page.get_by_role("tab", name=name, exact=True)
    tab.click()
    page.wait_for_selector(f"#tab-{name.lower()}[aria-selected=true]")
    settle(page)


def list_tools(page: Any) -> None:
    open_tab(page, "Tools")
    page.locator("#tools-panel").get_by_role("button", name=re.compile(r"^List tools")).click()
    page.get_by_role("button", name="Open tool echo", exact=True).wait_for(timeout=TIMEOUT_MS)


def make_session(page: Any, base: str, command: str) -> tuple[str, str]:
    """A session with tools listed and called, a frame opened; and an ended one to compare it with."""
    older = connect(page, base, command, "everything (yesterday)")
    list_tools(page)
    page.get_by_role("button", name="Disconnect").click()
    page.locator("#session-state [role=status]", has_text="closed").wait_for(timeout=TIMEOUT_MS)
    url = connect(page, base, command, "everything")
    list_tools(page)
    page.get_by_role("button", name="Open tool echo", exact=True).click()
    echo = page.get_by_role("region", name="Call echo", exact=True)
    echo.get_by_label("message").fill("hello from the screenshot script")
    echo.get_by_role("button", name="Call echo").click()
    page.locator("#call-list article.call [role=status]", has_text="done").first.wait_for()
    page.get_by_role("button", name="Open tool get-sum", exact=True).click()
    add = page.get_by_role("region", name="Call get-sum", exact=True)
    add.get_by_label("a", exact=True).fill("19")
    add.get_by_label("b", exact=True).fill("23")
    add.get_by_role("button", name="Call get-sum").click()
    page.locator("#call-list article.call", has_text="42").first.wait_for()
    settle(page)
    return url, older


def make_share(page: Any, session_url: str) -> str:
    """An "anyone with the link" share of the session; its URL."""
    page.goto(session_url)
    page.locator("#share-menu > summary").click()
    page.locator("#share-form").wait_for()
    audience = page.get_by_label("Who may open it")
    if audience.locator("option[value=anyone]").count():
        audience.select_option("anyone")
    page.get_by_role("button", name="Make the link").click()
    return str(page.locator("#share-url").input_value(timeout=TIMEOUT_MS))


def pick_theme(page: Any, theme: str) -> None:
    """Choose the theme with the top bar's switch (remembered in the browser for the next pages)."""
    page.get_by_label("Theme", exact=True).select_option(theme)
    page.wait_for_function(f"() => document.documentElement.dataset.theme === {theme!r}")


def shoot(page: Any, out: Path, name: str, width: int, theme: str) -> None:
    settle(page)
    path = out / f"{name}-{width}-{theme}.png"
    page.screenshot(path=str(path), full_page=True, animations="disabled")
    print(path)


def public_id(session_url: str) -> str:
    return session_url.rstrip("/").rsplit("/", 1)[1]


def screens(base: str, session: str, older: str, share: str) -> list[tuple[str, Callable[[Any], None]]]:
    """Each screen: its name, and how to bring it up in a page."""

    def go(path: str, ready: str = "main") -> Callable[[Any], None]:
        def visit(page: Any) -> None:
            page.goto(path if path.startswith("http") else base + path)
            page.wait_for_selector(ready)

        return visit

    def tab(name: str) -> Callable[[Any], None]:
        def visit(page: Any) -> None:
            page.goto(session)
            page.wait_for_selector("#timeline-rows .frame")
            open_tab(page, name)

        return visit

    def share_dialog(page: Any) -> None:
        page.goto(session)
        page.locator("#share-menu > summary").click()
        page.wait_for_selector("#share-form")

    def frame(page: Any) -> None:
        page.goto(session)
        page.locator("#timeline-rows .frame").nth(1).click()
        page.wait_for_selector("#frame-detail > *")

    def flow(page: Any) -> None:
        page.goto(session)
        page.get_by_role("button", name="Flow", exact=True).click()
        page.wait_for_selector("#timeline-rows.flow .flow-row")

    tabs = [
        "Overview",
        "Tools",
        "Resources",
        "Prompts",
        "Tasks",
        "Logging",
        "Roots",
        "Playground",
        "Conformance",
        "Activity",
    ]
    found: list[tuple[str, Callable[[Any], None]]] = [("home", go("/", "#home-sessions"))]
    found += [(f"session-{name.lower()}", tab(name)) for name in tabs]
    found += [
        ("session-share", share_dialog),
        ("session-frame", frame),
        ("session-flow", flow),
        ("search", go("/search?q=echo", "main")),
        ("compare", go(f"/compare?a={public_id(older)}&b={public_id(session)}")),
        ("shared", go(share, "#timeline-rows")),
        ("error", go(f"/s/{uuid.uuid4()}/", "main [role=alert]")),  # a session that is not there
    ]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium to drive")
    parser.add_argument("--node", default=shutil.which("node") or "node", help="Node for server-everything")
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)), help="widths, comma-separated")
    args = parser.parse_args()
    if not EVERYTHING_JS.exists():
        sys.exit(f"server-everything is not installed: npm ci in {EVERYTHING_JS.parents[3]}")
    from playwright.sync_api import sync_playwright

    args.outdir.mkdir(parents=True, exist_ok=True)
    command = f"{args.node} {EVERYTHING_JS}"
    problems = Problems()
    with (
        tempfile.TemporaryDirectory(prefix="inspector-screenshots-") as data,
        running_app(Path(data)) as (base, login),
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=args.chromium, args=["--headless=new", "--no-sandbox"])
        setup = browser.new_context(viewport={"width": 1440, "height": 900})
        setup.set_default_timeout(TIMEOUT_MS)
        page = problems.watch(setup.new_page())
        page.goto(login)
        page.wait_for_url(base + "/")
        session, older = make_session(page, base, command)
        share = make_share(page, session)
        state = setup.storage_state()
        optional = [("account", "/account"), ("team", "/team")]
        extra = [(name, path) for name, path in optional if page.goto(base + path).ok]
        setup.close()

        for theme in THEMES:
            for width in [int(w) for w in args.widths.split(",")]:
                context = browser.new_context(viewport={"width": width, "height": 900}, storage_state=state)
                context.set_default_timeout(TIMEOUT_MS)
                page = problems.watch(context.new_page())
                page.goto(base + "/")
                pick_theme(page, theme)
                for name, visit in screens(base, session, older, share):
                    visit(page)
                    shoot(page, args.outdir, name, width, theme)
                for name, path in extra:
                    page.goto(base + path)
                    shoot(page, args.outdir, name, width, theme)
                context.close()
                # Logged out: the login page, in a context of its own with the same theme chosen.
                anonymous = browser.new_context(viewport={"width": width, "height": 900})
                page = problems.watch(anonymous.new_page())
                page.goto(base + "/auth/login")
                pick_theme(page, theme)
                shoot(page, args.outdir, "login", width, theme)
                anonymous.close()
        browser.close()
    if problems.seen:
        print("\nproblems in the browser:", *problems.seen, sep="\n", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
