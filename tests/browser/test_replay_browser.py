"""In Chromium: Replay against… on a session page, the side-by-side view of the replay beside its
recording, its folded unchanged steps, and a change's detail.

A real `mcp-inspector` process, Debian's Chromium, and the SDK test server over stdio; the saved server
it is replayed against is the server's next build (``--next``), with planted changes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.app_shell import TEAM, app_shell
from support.browser import LONG, LiveApp, assert_clean, call_card, connect, send_raw

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_replay_against_the_next_build_opens_the_two_timelines_side_by_side(
    home: Any, live_app: LiveApp, sdk_stdio: dict
) -> None:
    args = [*sdk_stdio["args"], "--next"]
    app_shell(
        live_app,
        TEAM + "from sessions.models import ServerConfig\n"
        f"ServerConfig.objects.create(team=team, name='next build', command={sdk_stdio['command']!r},"
        f" args={args!r})\n",
    )
    connect(home, stdio=sdk_stdio)
    send_raw(home, "tools/call", json.dumps({"name": "echo", "arguments": {"text": "<b>hi</b>"}}))
    expect(call_card(home, "tools/call", "echo").first.get_by_role("status")).to_have_text(
        "done", timeout=LONG
    )
    recording = home.url

    home.locator("#session-actions summary", has_text="Export").click()
    home.get_by_role("link", name=re.compile("^Replay against…")).click()
    expect(home.get_by_role("heading", name="Replay against…")).to_be_visible()
    home.get_by_label("Replay against", exact=True).select_option(label="Saved server: next build")
    home.get_by_role("button", name="Replay", exact=True).click()
    home.wait_for_url("**/replayed")
    body = home.locator("#replay-body")
    expect(body).to_have_attribute("aria-busy", "false", timeout=LONG)
    expect(body.locator(".replay-status")).to_contain_text("replay finished")

    # The summary on top: the steps, how many changed, the changes by kind.
    summary = home.locator(".replay-summary")
    expect(summary.get_by_role("heading")).to_contain_text(" changed")
    expect(summary.locator(".replay-rules")).to_contain_text("removed")

    # An unchanged step is folded; opened, it shows both sides.
    first = home.locator("#step-0 details")
    expect(first).not_to_have_attribute("open", "")
    expect(first.locator("summary")).to_contain_text("initialize")
    expect(first.locator("summary")).to_contain_text("unchanged")
    expect(first.locator(".replay-sides")).to_be_hidden()

    # The echo step is open, each change with its rule, its path and both values (as text, escaped).
    echo = home.locator(".replay-step", has=home.locator("summary", has_text="echo"))
    expect(echo.locator("details")).to_have_attribute("open", "")
    change = echo.locator("tr.replay-change", has=home.locator("code", has_text="$.result.content[0].text"))
    expect(change.locator(".verdict")).to_have_text("value changed")
    expect(change.locator("pre.d-del")).to_have_text("<b>hi</b>")
    expect(change.locator("pre.d-add")).to_have_text("<b>hi</b>!")
    expect(echo.locator(".replay-sides h3").first).to_contain_text("Recorded")

    # Each side links to its frame in its own session.
    echo.locator(".replay-sides h3 a").first.click()
    home.wait_for_url(f"{recording.split('?')[0]}?frame=*")
    assert_clean(home)


def test_replay_against_a_new_target_shows_the_planted_changes_beside_the_recording(
    home: Any, live_app: LiveApp, planted_stdio: dict
) -> None:
    connect(home, stdio=planted_stdio)
    for tool, arguments in [
        ("hello", {}),
        ("greet", {"name": "Ada", "greeting": "hey"}),
        ("divide", {"a": 6, "b": 3}),
    ]:
        send_raw(home, "tools/call", json.dumps({"name": tool, "arguments": arguments}))
        expect(call_card(home, "tools/call", tool).first.get_by_role("status")).to_have_text(
            "done", timeout=LONG
        )

    home.locator("#session-actions summary", has_text="Export").click()
    home.get_by_role("link", name=re.compile("^Replay against…")).click()
    target = home.get_by_label("Replay against", exact=True)
    expect(home.locator(".replay-new")).to_be_hidden()  # the session's own server is the first choice
    target.select_option(label="A new target: a command or a URL")
    new = home.locator(".replay-new")
    expect(new.get_by_label("URL", exact=True)).to_be_hidden()  # stdio: a command
    new.get_by_label("Command", exact=True).fill(
        " ".join([planted_stdio["command"], *planted_stdio["args"], "--build", "B"])
    )
    # The planted changes are the answers'; a step slowed by a busy machine is not one of them.
    home.get_by_role("checkbox", name=re.compile("a step that became slower")).check()
    home.get_by_role("button", name="Replay", exact=True).click()
    home.wait_for_url("**/replayed")
    body = home.locator("#replay-body")
    expect(body).to_have_attribute("aria-busy", "false", timeout=LONG)
    expect(body.locator(".replay-status")).to_contain_text("replay finished")

    expect(home.locator(".replay-page header")).to_contain_text("against a new target, ")
    expect(home.locator(".replay-page header code")).to_have_text(re.compile(r"planted\.py stdio --build B$"))

    # The summary on top: n steps, n changed, the changes by kind.
    summary = home.locator(".replay-summary")
    expect(summary.get_by_role("heading")).to_have_text(re.compile(r"^\d+ steps, [1-9]\d* changed$"))
    rules = summary.locator(".replay-rules")
    for rule in ("removed", "added", "required changed", "value changed", "isError changed"):
        expect(rules.get_by_role("cell", name=rule, exact=True)).to_be_visible()

    # greet answered as recorded: folded, its two sides there once opened.
    greet = home.locator(".replay-step", has=home.locator("summary", has_text="greet"))
    expect(greet.locator("summary")).to_contain_text("unchanged")
    expect(greet.locator("details")).not_to_have_attribute("open", "")
    expect(greet.locator(".replay-sides")).to_be_hidden()
    greet.locator("summary").click()
    expect(greet.locator(".replay-sides pre").first).to_contain_text("hey, Ada")

    # A change's detail: its rule, its path and both values.
    hello = home.locator(".replay-step", has=home.locator("summary", has_text="hello"))
    expect(hello.locator("details")).to_have_attribute("open", "")
    change = hello.locator("tr.replay-change")
    expect(change).to_have_count(1)
    expect(change.locator(".verdict")).to_have_text("value changed")
    expect(change.locator("code.replay-path")).to_have_text("$.result.content[0].text")
    expect(change.locator("pre.d-del")).to_have_text("hello, world")
    expect(change.locator("pre.d-add")).to_have_text("hello, world!")
    divide = home.locator(".replay-step", has=home.locator("summary", has_text="divide"))
    expect(divide.locator("tr.replay-change code.replay-path")).to_have_text("$.result.isError")
    assert_clean(home)


def test_the_replay_picker_offers_the_sessions_own_server_and_the_saved_ones(
    home: Any, live_app: LiveApp, sdk_stdio: dict
) -> None:
    app_shell(live_app, TEAM + "team.servers.create(name='picked', command='python3', args=['server.py'])\n")
    connect(home, stdio=sdk_stdio)
    home.locator("#session-actions summary", has_text="Export").click()
    home.get_by_role("link", name=re.compile("^Replay against…")).click()
    options = home.get_by_label("Replay against", exact=True).locator("option").all_inner_texts()
    assert options[0].startswith("This session's own server"), options
    assert "Saved server: picked" in options, options
    assert options[-1] == "A new target: a command or a URL", options
    assert_clean(home)
