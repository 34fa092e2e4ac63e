"""Two people in two browsers watch one live session: presence, who answered, notes, without reloading.

A real `mcp-inspector` (the local mode), Chromium through Playwright and server-everything over stdio.
The local person signs in with the token URL; bob is added to their team and signed in by a process of
his own against the app's data directory, his session cookie set on a second browser context.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from typing import Any

import pytest
from support.browser import (
    SHORT,
    assert_clean,
    call_tool_raw,
    connect,
    list_tools,
    new_context,
    open_page,
    timeline_rows,
)
from support.paths import REPO

from sessions.teams.models import Role

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The module-scoped fixtures: a live app, Chromium, the local person's logged-in context.


# Run in a process of its own against the live app's data directory: add a person to the local
# person's team and sign them in, printing their session cookie.
SIGN_IN = """
import django
django.setup()
from django.contrib.auth.models import User
from django.test import Client
from sessions.teams.models import Membership, Team
name, role = {name!r}, {role!r}
team = Team.objects.get(personal=True)
user = User.objects.create_user(name)
Membership.objects.create(team=team, user=user, role=role)
client = Client()
client.force_login(user)
print(client.cookies["mcp_inspector_session"].value)
"""


def _signed_in_context(browser: Any, live_app: Any, name: str, role: str) -> Any:
    """A browser context signed in as a new member of the local person's team."""
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {
        "INSPECTOR_DATA_DIR": str(live_app.data_dir),
        "DJANGO_SETTINGS_MODULE": "inspector.settings",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-c", SIGN_IN.format(name=name, role=str(role))],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    context = new_context(browser, viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(SHORT)
    cookie = {"name": "mcp_inspector_session", "value": done.stdout.strip(), "url": live_app.base_url}
    context.add_cookies([cookie])
    return context


def test_two_people_watch_one_session_and_see_each_others_answers_and_notes_without_reloading(
    live_app: Any, browser: Any, app_context: Any, everything_stdio: dict
) -> None:
    alice = open_page(app_context, live_app.url("/"))
    me = alice.locator(".topbar .user").inner_text().strip()
    url = connect(alice, stdio=everything_stdio)
    bob_context = _signed_in_context(browser, live_app, "bob", Role.OPERATOR)
    try:
        bob = open_page(bob_context, url)
        # Both see both of them watching.
        for page in (alice, bob):
            watching = page.locator("#presence .watcher-name")
            expect(watching).to_have_text(sorted([me, "bob"], key=str.lower), timeout=SHORT)

        # bob answers the sampling card alice's call raised; alice's page says who answered.
        list_tools(bob, until=("trigger-sampling-request",))
        call_tool_raw(bob, "trigger-sampling-request", '{"prompt": "Tea or coffee?", "maxTokens": 20}')
        card = bob.locator("#reviews article.review").filter(has_text="a reply from your model")
        expect(card).to_have_count(1, timeout=SHORT)
        expect(alice.locator("#reviews article.review").filter(has_text="Tea or coffee?")).to_have_count(1)
        card.get_by_label("Reply (sent as the assistant's text)").fill("Tea, says bob")
        card.get_by_role("button", name="Approve and send").click()
        ended = alice.locator("#reviews article.review-ended")
        expect(ended).to_contain_text("Answered by bob", timeout=SHORT)
        expect(ended).to_be_visible()
        answer = timeline_rows(alice, "sampling/createMessage").filter(has_text="answered by bob")
        expect(answer).to_have_count(1, timeout=SHORT)

        # bob pins a note on the request frame of that call; it appears on alice's timeline and thread.
        request = timeline_rows(bob, "tools/call").filter(has=bob.locator(".dir", has_text="→")).last
        seq = request.get_attribute("data-seq")
        alice.locator(f"#f-{seq}").click()
        expect(alice.locator(f"#frame-notes-{seq}")).to_be_visible()
        request.click()
        bob.get_by_label(f"Pin a note on frame {seq}").fill("frame check: <b>progress</b> after cancel")
        bob.get_by_role("button", name="Pin note").click()
        expect(bob.locator(f"#thread-list-{seq} .note-text")).to_have_text(
            "frame check: <b>progress</b> after cancel"
        )
        expect(alice.locator(f"#notes-{seq}")).to_have_text("✎1", timeout=SHORT)
        note = alice.locator(f"#thread-list-{seq} .note-item")
        expect(note).to_contain_text("frame check: <b>progress</b> after cancel")
        expect(note.locator(".note-author")).to_have_text("bob")
        # alice replies in the thread; bob sees the reply; the detail says who sent the request.
        note.locator("xpath=..").get_by_role("button", name="Reply").click()
        alice.get_by_label("Reply to bob").fill("seen, thanks")
        alice.get_by_role("button", name="Pin note").click()
        expect(bob.locator(f"#thread-list-{seq} .note-item.reply")).to_contain_text("seen, thanks")
        expect(alice.locator(f"#frame-notes-{seq} .sent-by")).to_contain_text("Sent by bob")

        # A link to the note opens the frame with the note.
        href = note.first.locator(".note-link").get_attribute("href")
        assert href and re.search(rf"\?frame={seq}#note-\d+$", href)
        bob.goto(live_app.url(href))
        expect(bob.locator(f"#frame-notes-{seq} .note-item:target")).to_have_count(1)

        bob.close()
        expect(alice.locator("#presence .watcher-name")).to_have_text([me], timeout=SHORT)
        assert_clean(alice)
    finally:
        bob_context.close()
        alice.close()
