"""End to end in Chromium, the hosted mode: an admin invites, a new person makes an account, logs in, sees
the team, switches teams and logs out.

A real `mcp-inspector` process with INSPECTOR_HOSTED on, its first admin made by `manage.py create_admin`
(as the README says), and two browser contexts (the admin's and the invited person's), with no shared
cookies. Every page fails the test on a console error, a page error or a CSP violation.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from support import browser as browser_support
from support.browser import (
    CHROMIUM,
    MCP_INSPECTOR,
    SHORT,
    STARTUP_TIMEOUT,
    LiveApp,
    assert_clean,
    new_context,
    open_page,
)
from support.paths import REPO
from support.processes import free_port, stop_process

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

READY_LINE = re.compile(r"Log in with your account.*: (?P<url>http://\S+/auth/login)")
ALICE_PASSWORD = "plover-kettle-49"
BOB_PASSWORD = "quartz-lantern-82"

browser = browser_support.browser


@pytest.fixture(scope="module")
def live_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApp]:
    """`mcp-inspector` in the hosted mode on a fresh data directory, alice admin of Alpha and Beta."""
    if not CHROMIUM.exists():
        pytest.fail("needs Debian's chromium at /usr/bin/chromium: run tests/run, which installs it")
    port = free_port()
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    data_dir = tmp_path_factory.mktemp("hosted-data")
    env |= {
        "INSPECTOR_DATA_DIR": str(data_dir),
        "INSPECTOR_HOSTED": "true",
        "INSPECTOR_SECRET_KEYS": Fernet.generate_key().decode(),
        "PYTHONUNBUFFERED": "1",
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

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(
                    f"mcp-inspector did not say it is ready within {STARTUP_TIMEOUT}s:\n{''.join(seen)}"
                )
            if line is None:
                pytest.fail(f"mcp-inspector exited before it was ready:\n{''.join(seen)}")
            match = READY_LINE.search(line)
            if match:
                break
        assert "token=" not in "".join(seen), "the hosted mode prints no token URL"
        # The first admin, as the README says; the same account made admin of a second team.
        for team in ("Alpha", "Beta"):
            subprocess.run(
                [sys.executable, str(REPO / "manage.py"), "create_admin", "alice", "--team", team],
                env={**env, "INSPECTOR_ADMIN_PASSWORD": ALICE_PASSWORD},
                check=True,
                capture_output=True,
                timeout=60,
            )
        yield LiveApp(proc, f"http://127.0.0.1:{port}", match["url"], seen, data_dir)
        proc.terminate()
        code = proc.wait(timeout=15)
        assert code == 0, f"mcp-inspector exited with {code}:\n{''.join(seen)[-4000:]}"
    finally:
        stop_process(proc)
        reader.join(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


def a_context(browser: Any) -> Any:
    context = new_context(browser, viewport={"width": 1300, "height": 900})
    context.set_default_timeout(SHORT)
    return context


def log_in(page: Any, app: LiveApp, username: str, password: str) -> None:
    page.goto(app.url("/auth/login"))
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(app.url("/"))
    expect(page.get_by_role("heading", name="Connect to an MCP server")).to_be_visible()


def make_invitation(page: Any, app: LiveApp, role: str, note: str) -> str:
    """On the team page, create an invitation link; return it."""
    page.goto(app.url("/team"))
    invitations = page.get_by_role("region", name="Invitations")
    invitations.get_by_label("Role").select_option(role)
    invitations.get_by_label("Who it is for").fill(note)
    invitations.get_by_role("button", name="Create invitation link").click()
    link = page.get_by_label("Invitation link")
    expect(link).to_have_value(re.compile(r"/auth/invite\?token="))
    return str(link.input_value())


def switch_team(page: Any, app: LiveApp, team: str) -> None:
    option = page.locator("#team-switch option", has_text=re.compile(rf"^{team} \("))
    page.get_by_label("Current team").select_option(option.get_attribute("value"))
    page.get_by_role("button", name="Switch team").click()
    page.wait_for_url(app.url("/"))
    page.goto(app.url("/team"))
    expect(page.get_by_role("heading", name=re.compile(f"^Team {team}"))).to_be_visible()


def test_an_invited_person_makes_an_account_logs_in_sees_the_team_switches_teams_and_logs_out(
    browser: Any, live_app: LiveApp
) -> None:
    admin_context, bob_context = a_context(browser), a_context(browser)
    try:
        # alice, the admin, invites bob to both her teams.
        admin = open_page(admin_context, "")
        log_in(admin, live_app, "alice", ALICE_PASSWORD)
        alpha_link = make_invitation(admin, live_app, "operator", "bob")
        expect(admin.get_by_role("heading", name=re.compile("^Team Alpha"))).to_be_visible()
        switch_team(admin, live_app, "Beta")
        beta_link = make_invitation(admin, live_app, "viewer", "bob too")

        # bob, in a browser of his own, opens the first link and makes his account.
        bob = open_page(bob_context, "")
        bob.goto(alpha_link)
        expect(bob.get_by_role("heading", name="Join Alpha")).to_be_visible()
        bob.get_by_label("Username").fill("bob")
        bob.get_by_label("Password", exact=True).fill(BOB_PASSWORD)
        bob.get_by_label("Password again").fill(BOB_PASSWORD)
        bob.get_by_role("button", name="Create account and join").click()
        bob.wait_for_url(live_app.url("/"))
        expect(bob.locator(".people")).to_contain_text("Alpha (operator)")

        # The second link: signed in, he joins with his account.
        bob.goto(beta_link)
        bob.get_by_role("button", name="Join as bob").click()
        bob.wait_for_url(live_app.url("/"))

        # He logs out, and logs in again with his password.
        bob.get_by_role("button", name="Log out").click()
        expect(bob.get_by_text("You are logged out.")).to_be_visible()
        bob.goto(live_app.url("/"))
        expect(bob).to_have_url(re.compile(r"/auth/login\?next=/$"))
        log_in(bob, live_app, "bob", BOB_PASSWORD)

        # He sees his team and its members, and switches between his two teams.
        bob.goto(live_app.url("/team"))
        members = bob.get_by_role("region", name="Members")
        expect(members).to_contain_text("alice")
        expect(members).to_contain_text("bob")
        current = bob.get_by_role("heading", level=1).inner_text()
        other = "Beta" if "Alpha" in current else "Alpha"
        switch_team(bob, live_app, other)
        expect(bob.get_by_role("region", name="Members")).to_contain_text("bob")

        # The admin sees both invitations used, by bob.
        admin.goto(live_app.url("/team"))
        expect(admin.get_by_role("region", name="Invitations")).to_contain_text("used")

        bob.get_by_role("button", name="Log out").click()
        expect(bob.get_by_text("You are logged out.")).to_be_visible()
        bob.goto(live_app.url("/team"))
        expect(bob).to_have_url(re.compile(r"/auth/login\?next=/team$"))
        assert_clean(admin, bob)
    finally:
        admin_context.close()
        bob_context.close()
