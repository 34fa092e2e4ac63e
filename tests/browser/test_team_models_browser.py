"""In Chromium: the team's admin adds a model on the team page (the scripted model server, with its key),
the key never shown again; a chat with it over server-everything echoes the key a person pasted; the
chat's share link, opened by a stranger with no account, shows the chat with the key redacted.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import SHORT, assert_clean, connect, new_context, open_page, open_tab
from support.paths import SERVERS
from support.processes import free_port, start_http_server

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

KEY = "sk-team-browser-key-0123456789"
SCRIPT = {"key": KEY, "steps": [{"match": "Say hi", "text": f"Hi! You said {KEY}, keep it secret."}]}


@pytest.fixture(scope="module")
def scripted_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("scripted-llm")
    script, log = folder / "script.json", folder / "requests.jsonl"
    script.write_text(json.dumps(SCRIPT))
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)], port
    ):
        yield f"http://127.0.0.1:{port}/v1", log


def test_a_team_model_chats_and_its_shared_chat_shows_no_key(
    home: Any, browser: Any, everything_stdio: dict, scripted_llm: tuple[str, Path]
) -> None:
    url, log = scripted_llm
    base = home.url.rstrip("/")
    home.goto(base + "/team")
    form = home.locator("form.team-model-form")
    form.get_by_label("Name").fill("ours")
    form.get_by_label("Label").fill("Team scripted")
    form.get_by_label("Base URL").fill(url)
    form.get_by_label("Model", exact=True).fill("scripted-model")
    form.get_by_label("API key").fill(KEY)
    form.get_by_role("button", name="Add the model").click()
    row = home.locator("table.team-models tbody tr")
    expect(row).to_contain_text("Team scripted")
    expect(row.get_by_label("a key is saved")).to_be_visible()
    assert KEY not in home.content()

    home.goto(base + "/")
    connect(home, stdio=everything_stdio)
    open_tab(home, "Playground")
    panel = home.locator("#panel")
    panel.get_by_label("Model").select_option("ours")
    panel.get_by_role("button", name="Start chat").click()
    composer = home.locator("form.chat-composer")
    composer.get_by_label("Message").fill(f"Say hi; my key is {KEY}")
    composer.get_by_role("button", name="Send").click()
    expect(home.locator("#chat-log .chat-assistant").last).to_contain_text("Hi! You said", timeout=SHORT)
    # The scripted server refuses a request without the key: the team's key was decrypted and sent.
    assert json.loads(log.read_text().splitlines()[0])["model"] == "scripted-model"

    home.get_by_role("link", name="Share…").click()
    home.get_by_label("Who may open it").select_option("anyone")
    home.get_by_role("button", name="Make a link").click()
    link = home.get_by_label("Share link").input_value()
    assert "/shared-item/" in link
    home.screenshot(path="/tmp/team-model-share.png", full_page=True)

    stranger = new_context(browser)
    try:
        shared = open_page(stranger, link)
        expect(shared.locator("h1")).to_have_text("Chat with ours")
        expect(shared.locator(".chat-assistant")).to_contain_text("You said [redacted], keep it secret.")
        expect(shared.locator(".chat-user")).to_contain_text("my key is [redacted]")
        assert KEY not in shared.content()
        shared.screenshot(path="/tmp/team-model-shared-page.png", full_page=True)
        assert_clean(shared)
    finally:
        stranger.close()
    assert_clean(home)
