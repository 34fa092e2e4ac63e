"""In Chromium: saved servers edited, the home page's sessions paged, sessions of one server told apart.

A real `mcp-inspector` process and Debian's Chromium; the sessions and saved servers these pages list
are made in the app's own database (support.app_shell), as many as the pages need.
"""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

import pytest
from support.app_shell import TEAM, app_shell
from support.browser import LiveApp, assert_clean, status

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_saved_server_is_edited_and_its_secrets_are_kept_without_being_shown(
    home: Any, live_app: LiveApp
) -> None:
    app_shell(
        live_app,
        TEAM + "from sessions.models import ServerConfig\n"
        "ServerConfig.objects.create(team=team, name='remote', transport='http',"
        " url='https://mcp.example.com/mcp', bearer_token='sekrit-bearer',"
        " headers={'Authorization': 'Bearer sekrit-header', 'X-Trace': 'on'})\n",
    )
    home.reload()
    home.get_by_role("link", name="Edit remote").click()
    expect(home.get_by_role("heading", name="Edit the saved server remote")).to_be_visible()
    form = home.locator("#server-form")
    expect(form.get_by_label("URL", exact=True)).to_have_value("https://mcp.example.com/mcp")
    expect(form.get_by_label("Headers", exact=True)).to_have_value("X-Trace: on")
    expect(form.get_by_label(re.compile("^Bearer token"))).to_have_value("")
    expect(form.get_by_label("Authorization", exact=True)).to_have_value("")
    assert "sekrit" not in home.content()
    form.get_by_label("URL", exact=True).fill("https://mcp.example.com/v2")
    form.get_by_role("button", name="Save changes").click()
    home.wait_for_url(live_app.url("/"))
    expect(home.locator(".servers li", has_text="remote")).to_contain_text("https://mcp.example.com/v2")
    stored = app_shell(
        live_app,
        "from sessions.models import ServerConfig; s = ServerConfig.objects.get(name='remote');"
        " print(s.bearer_token, s.headers['Authorization'])",
    )
    assert stored.split() == ["sekrit-bearer", "Bearer", "sekrit-header"]
    # Removing one secret, explicitly.
    home.get_by_role("link", name="Edit remote").click()
    home.locator("#server-form").get_by_label("Remove the stored bearer token").check()
    home.locator("#server-form").get_by_role("button", name="Save changes").click()
    home.wait_for_url(live_app.url("/"))
    code = "from sessions.models import ServerConfig; print(repr(ServerConfig.objects.get().bearer_token))"
    stored = app_shell(live_app, code)
    assert stored.strip() == "''"
    assert_clean(home)


def test_the_home_page_pages_through_older_sessions_and_back(home: Any, live_app: LiveApp) -> None:
    app_shell(
        live_app,
        TEAM + "import datetime\nfrom sessions.models import McpSession\n"
        "start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)\n"
        "for i in range(60):\n"
        "    s = McpSession.objects.create(team=team, name=f'paged {i:02}', config={}, status='closed')\n"
        "    McpSession.objects.filter(pk=s.pk).update(created=start + datetime.timedelta(minutes=i))\n",
    )
    home.reload()
    sessions = home.locator("section", has=home.get_by_role("heading", name=re.compile("^Sessions")))
    expect(sessions.get_by_role("link", name="paged 59", exact=True)).to_be_visible()
    expect(sessions.get_by_role("link", name="paged 09", exact=True)).to_have_count(0)
    sessions.get_by_role("link", name="Older sessions →").click()
    home.wait_for_url(re.compile(r"\?page=2$"))
    expect(sessions.get_by_role("link", name="paged 09", exact=True)).to_be_visible()
    expect(sessions.get_by_role("link", name="paged 00", exact=True)).to_be_visible()
    expect(sessions.get_by_role("link", name="paged 59", exact=True)).to_have_count(0)
    expect(sessions.get_by_role("link", name="Older sessions →")).to_have_count(0)
    sessions.get_by_role("link", name="← Newer sessions").click()
    expect(sessions.get_by_role("link", name="paged 59", exact=True)).to_be_visible()
    assert_clean(home)


def test_the_compare_picker_and_search_results_tell_sessions_of_one_server_apart(
    home: Any, live_app: LiveApp
) -> None:
    made = app_shell(
        live_app,
        TEAM + "import json\nfrom sessions.engine import Frame\nfrom sessions.frames import frame_row\n"
        "from sessions.models import McpSession, TimelineFrame\n"
        "info = {'name': 'everything', 'title': 'Everything Reference Server'}\n"
        "for n, status in (('a', 'closed'), ('b', 'failed')):\n"
        "    s = McpSession.objects.create(team=team, name=n, status=status, server_info=info,"
        " config={'transport': 'stdio', 'command': '/usr/bin/node', 'args': [f'/srv/{n}/index.js']})\n"
        "    body = {'jsonrpc': '2.0', 'id': 1, 'result': {'tools': []}}\n"
        "    f = Frame('message', 'in', json.dumps(body).encode(), message=body)\n"
        "    f.seq, f.method, f.rpc_id, f.rpc_kind = 1, 'tools/list', 1, 'result'\n"
        "    TimelineFrame.objects.create(session=s, **frame_row(f, 0))\n"
        "    print(s.public_id.hex[:8])\n",
    )
    first, second = made.split()
    home.goto(live_app.url("/compare"))
    options = home.locator("#compare-a option").all_inner_texts()
    ours = [o for o in options if o.startswith("Everything Reference Server")]
    assert len(ours) == 2 and len(set(ours)) == 2, options
    assert any("stdio node index.js" in o and "· closed ·" in o and first in o for o in ours), ours
    assert any("· failed ·" in o and second in o for o in ours), ours
    home.goto(live_app.url("/search?q=method:tools/list"))
    rows = home.locator("table.search-results tbody tr")
    expect(rows).to_have_count(2)
    names = rows.locator("td:first-child").all_inner_texts()
    assert len(set(names)) == 2 and all(n.startswith("Everything Reference Server · ") for n in names), names
    assert_clean(home)


def test_the_server_starts_as_the_pointer_reaches_connect_and_the_click_adopts_it(
    home: Any, live_app: LiveApp, sdk_stdio: dict, tmp_path: Any
) -> None:
    starts = tmp_path / "starts"
    script = f"printf 'x\\n' >> {shlex.quote(str(starts))}; exec \"$@\""
    form = home.locator("#connect-form")
    typed = shlex.join(["sh", "-c", script, "sh", sdk_stdio["command"], *sdk_stdio["args"]])
    form.get_by_label("Command", exact=True).fill(typed)
    form.get_by_text("Arguments, environment, working directory").click()
    # A secret by its name: the session page's Overview shows the other variables' values, and htmx
    # keeps that page in the tab's storage too.
    form.get_by_label("Environment", exact=True).fill("API_TOKEN=sekrit-value")
    form.get_by_label("Working directory", exact=True).fill(str(tmp_path))
    connect = form.get_by_role("button", name="Connect", exact=True)
    connect.hover()
    deadline = time.monotonic() + 20
    while not starts.exists():  # the server runs before anyone clicked
        assert time.monotonic() < deadline, "hovering Connect started no server"
        home.wait_for_timeout(20)
    # The person's last choices on the timeline's switches (the server renders the defaults).
    home.evaluate(
        "localStorage.setItem('inspector.timeline.time', 'abs');"
        " localStorage.setItem('inspector.timelineView', 'flow'); window.samePage = true"
    )
    connect.click()
    home.wait_for_url(re.compile(r"/s/"))
    expect(status(home)).to_have_text("ready", timeout=20_000)
    expect(home.locator("#timeline-rows")).to_contain_text("a warm start")
    assert starts.read_text() == "x\n"  # the click started no second one
    # The session page came in place of the home page's body (no new document), and its scripts
    # took it up: the timeline's switches show the person's choices.
    assert home.evaluate("window.samePage === true")
    expect(home.get_by_role("button", name="clock")).to_have_attribute("aria-pressed", "true")
    expect(home.get_by_role("button", name="Flow")).to_have_attribute("aria-pressed", "true")
    expect(home.locator("#timeline-rows")).to_have_class(re.compile(r"\bflow\b"))
    assert_clean(home)
    home.go_back()
    expect(home.locator("#connect-form")).to_be_visible()
    # Back shows the form as the person left it, but for the environment (it may hold secrets, and
    # the history is kept in the browser's storage).
    form = home.locator("#connect-form")
    expect(form.get_by_label("Command", exact=True)).to_have_value(typed)
    expect(form.get_by_label("Working directory", exact=True)).to_have_value(str(tmp_path))
    expect(form.get_by_label("Environment", exact=True)).to_have_value("")
    stored = home.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert "sekrit-value" not in stored


@pytest.mark.provokes(r"HTTP 422 POST \S+/connect$")
def test_back_after_a_form_with_errors_then_a_connect_keeps_no_secret_the_server_wrote_into_the_form(
    home: Any, live_app: LiveApp, sdk_stdio: dict
) -> None:
    form = home.locator("#connect-form")
    form.get_by_text("Arguments, environment, working directory").click()
    form.get_by_label("Environment", exact=True).fill("API_TOKEN=sekrit-value")  # a secret by its name
    form.get_by_role("button", name="Connect", exact=True).click()  # no command: the form comes back
    expect(form.get_by_role("alert")).to_contain_text("needs a command")
    expect(form.get_by_label("Environment", exact=True)).to_have_value("API_TOKEN=sekrit-value")
    # The server wrote the environment into the form's markup, which htmx's history would keep.
    assert "sekrit-value" in form.evaluate("f => f.outerHTML")
    form.get_by_label("Command", exact=True).fill(shlex.join([sdk_stdio["command"], *sdk_stdio["args"]]))
    form.get_by_role("button", name="Connect", exact=True).click()
    home.wait_for_url(re.compile(r"/s/"))
    expect(status(home)).to_have_text("ready", timeout=20_000)
    home.go_back()
    expect(home.locator("#connect-form").get_by_label("Environment", exact=True)).to_have_value("")
    stored = home.evaluate("JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert "htmx-history-cache" in stored and "sekrit-value" not in stored
