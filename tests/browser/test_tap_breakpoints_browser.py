"""End to end in Chromium: a raw host talks to server-everything through ``mcp-inspector tap``; on the
tap session's page a person pauses on tools/call, edits the held call's argument and forwards it: the
server answers the edit, the host gets that answer, the card and the title's count go away."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest
from support.browser import LONG, LiveApp, assert_clean, open_page
from support.tap_host import Host, echo

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_a_person_pauses_on_tools_call_edits_the_argument_and_forwards_it(
    app_context: Any, live_app: LiveApp, everything_stdio: dict
) -> None:
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["INSPECTOR_DATA_DIR"] = str(live_app.data_dir)
    host = Host(env, "tap-in-chromium", everything_stdio)
    try:
        host.start()
        page = open_page(app_context, live_app.url("/"))
        link = page.get_by_role("link", name="tap-in-chromium")
        deadline = time.monotonic() + LONG / 1000
        while not link.count() and time.monotonic() < deadline:  # the home page lists what it had
            page.wait_for_timeout(200)
            page.reload()
        link.click()
        controls = page.locator(".tap-controls")
        expect(controls.locator("#tap-status")).to_contain_text("No breakpoint", timeout=LONG)
        controls.get_by_label("Direction").select_option("out")
        controls.get_by_label("Method starts with").fill("tools/call")
        controls.get_by_role("button", name="Pause on these").click()
        expect(controls.locator("#tap-status")).to_contain_text("Pause on host → server, method tools/call")

        host.write(echo(2, "typed-by-the-host"))
        card = page.locator("#tap-held article")
        expect(card).to_have_count(1, timeout=LONG)
        expect(card).to_contain_text("tools/call")
        expect(page).to_have_title(re.compile(r"^\(1\) tap-in-chromium"))
        assert host.answer(2, timeout=0.3) is None  # the server waits for the card

        raw = card.get_by_label(re.compile("The message"))
        held = json.loads(raw.input_value())
        held["params"]["arguments"]["message"] = "edited-in-chromium"
        raw.fill(json.dumps(held, indent=2))
        card.get_by_role("button", name="Edit and forward").click()

        answer = host.answer(2, timeout=20)
        assert answer is not None and answer["result"]["content"][0]["text"] == "Echo: edited-in-chromium"
        expect(card).to_have_count(0)
        expect(page).to_have_title(re.compile(r"^tap-in-chromium"))
        assert_clean(page)
    finally:
        host.close()
