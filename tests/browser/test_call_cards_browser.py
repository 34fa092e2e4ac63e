"""In Chromium: a call the server refuses with -32042 shown as a URL elicitation, and a timeline that says
whether it follows a live session, an ended one or a recording.

A real `mcp-inspector` process, Debian's Chromium, and the SDK test server over stdio (its ``needs_login``
tool answers every call with URLElicitationRequiredError).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.app_shell import TEAM, app_shell
from support.browser import SHORT, LiveApp, assert_clean, call_card, connect, send_raw, status

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


# The user info before "@" is what a phishing link shows; the host after it is where it goes.
TRICKY = "https://accounts.example.com@login.example.net/authorize?next=%2Fhome"


def test_a_call_refused_with_32042_shows_the_url_to_open_and_calls_again_when_asked(
    home: Any, sdk_stdio: dict
) -> None:
    connect(home, stdio=sdk_stdio)
    send_raw(home, "tools/call", json.dumps({"name": "needs_login", "arguments": {"url": TRICKY}}))
    card = call_card(home, "tools/call", "needs_login").first
    needed = card.get_by_role("region", name=re.compile("needs you to open a link"))
    expect(needed).to_be_visible()
    expect(needed.locator(".review-kind")).to_have_text("URL elicitation")
    expect(needed.locator(".elicitation-message")).to_have_text("Sign in to example.com to continue.")
    expect(needed.locator(".elicitation-url")).to_have_text(TRICKY)  # in full, as text
    expect(needed.locator(".url-host")).to_have_text("login.example.net")
    expect(needed.get_by_text("login-1", exact=True)).to_be_visible()  # the elicitationId
    link = needed.get_by_role("link", name="Open login.example.net in a new tab")
    expect(link).to_have_attribute("href", TRICKY)
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(needed.get_by_text("Once you are done there, call again.")).to_be_visible()
    # The raw error is there, folded away, not the card's body.
    expect(needed.locator("pre.json")).to_be_hidden()
    expect(card.get_by_text("-32042", exact=False).first).to_be_visible()
    assert len(home.context.pages) == 1, "nothing opens before the person clicks"
    needed.get_by_role("button", name="Call needs_login again").click()
    expect(call_card(home, "tools/call", "needs_login")).to_have_count(2)
    expect(call_card(home, "tools/call", "needs_login").first.locator(".url-host")).to_have_text(
        "login.example.net"
    )
    # Reloaded, the page renders the card the same from the timeline.
    home.reload()
    expect(call_card(home, "tools/call", "needs_login").first.locator(".url-host")).to_have_text(
        "login.example.net"
    )
    assert_clean(home)


def test_only_a_live_session_says_following_live(home: Any, live_app: LiveApp, sdk_stdio: dict) -> None:
    connect(home, stdio=sdk_stdio)
    controls = home.locator("#timeline-controls")
    expect(controls).to_contain_text("following live")
    home.get_by_role("button", name="Disconnect").click()
    expect(status(home)).to_have_text("closed", timeout=SHORT)
    expect(controls).to_contain_text(re.compile(r"ended \d\d:\d\d"))
    expect(controls).not_to_contain_text("following live")
    expect(controls.locator(".live-dot")).to_have_count(0)
    home.reload()
    expect(controls).to_contain_text(re.compile(r"ended \d\d:\d\d"))
    expect(controls).not_to_contain_text("following live")

    recording = app_shell(
        live_app,
        TEAM + "from sessions.models import McpSession\n"
        "s = McpSession.objects.create(team=team, name='old.jsonl', status='closed',"
        " config={'imported_from': 'old.jsonl'})\nprint(s.public_id)",
    ).strip()
    home.goto(live_app.url(f"/s/{recording}/"))
    expect(controls).to_contain_text("recording")
    expect(controls).not_to_contain_text("following live")
    expect(controls.locator(".live-dot")).to_have_count(0)
    assert_clean(home)
