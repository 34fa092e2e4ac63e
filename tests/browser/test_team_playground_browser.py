"""In Chromium: the team's Playground page chats with a scripted model over two live sessions at once,
server-everything and the SDK test server (tests/servers/sdk_server.py).

Both servers offer `echo`: the model is offered `everything__echo` and `sdk_test_server__echo`. It calls
both; server-everything's is marked read-only and runs at once, the SDK server's waits for the person's
approval. Each call is on its own session's timeline, its card links to the frame there and the frame
links back to the chat. Then the SDK server's `ask_llm`, approved, sends sampling/createMessage mid-call,
and the chat's model answers it. Each answer shows its tokens and cost.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import SHORT, assert_clean, connect, timeline_rows
from support.paths import SERVERS
from support.processes import free_port, start_http_server

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

KEY = "sk-scripted-team-browser-key"
SCRIPT = {
    "key": KEY,
    "steps": [
        {
            "match": "Echo on both servers",
            "text": "Echoing on both.",
            "chunk": 5,
            "tool_calls": [
                {"id": "c1", "name": "everything__echo", "arguments": {"message": "hello-everything"}},
                {"id": "c2", "name": "sdk_test_server__echo", "arguments": {"text": "hello-sdk"}},
            ],
        },
        {"match": "hello-sdk", "text": "Both servers echoed."},
        {
            "match": "Ask the server's model",
            "tool_calls": [{"id": "c3", "name": "ask_llm", "arguments": {"prompt": "What is 2+2?"}}],
        },
        {"match": "What is 2+2?", "text": "Four."},
        {"match": ": Four.", "text": "The server's model said four."},
    ],
}


@pytest.fixture(scope="module")
def scripted_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("scripted-llm-team")
    script, log = folder / "script.json", folder / "requests.jsonl"
    script.write_text(json.dumps(SCRIPT))
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)], port
    ):
        yield f"http://127.0.0.1:{port}/v1", log


@pytest.fixture(scope="module")
def app_env(scripted_llm: tuple[str, Path]) -> dict[str, str]:
    url, _ = scripted_llm
    model = {"name": "scripted", "label": "Scripted GPT", "url": url, "model": "scripted-model"}
    priced = model | {"api_key": KEY, "input_price": 3, "output_price": 15}
    return {"INSPECTOR_LLM_MODELS": json.dumps([priced])}


def _card(page: Any, name: str) -> Any:
    return page.locator("#chat-log article.chat-tool").filter(has=page.locator("header code", has_text=name))


def _session_id(url: str) -> str:
    found = re.search(r"/s/([0-9a-f-]{36})/", url)
    assert found, url
    return found[1]


def test_a_team_chat_calls_tools_on_two_servers_with_approval_and_the_model_answers_sampling(
    home: Any, live_app: Any, everything_stdio: dict, sdk_stdio: dict, scripted_llm: tuple[str, Path]
) -> None:
    everything = _session_id(connect(home, stdio=everything_stdio))
    home.goto(live_app.url("/"))
    sdk = _session_id(connect(home, stdio=sdk_stdio))

    home.locator("nav.topnav").get_by_role("link", name="Playground").click()
    home.wait_for_url(re.compile(r"/playground$"))
    form = home.locator("details.new-chat form")
    for session in (everything, sdk):
        form.get_by_label(re.compile(session.replace("-", "")[:8])).check()
    form.get_by_label("Sampling requests answered").select_option("model")
    form.get_by_role("button", name="Start chat").click()
    home.wait_for_url(re.compile(r"/playground/\d+$"))
    chat_url = home.url
    expect(home.locator(".playground-tools")).to_contain_text("(everything)")
    expect(home.locator(".playground-tools")).to_contain_text("(sdk_test_server)")

    composer = home.locator("form.chat-composer")
    composer.get_by_label("Message").fill("Echo on both servers")
    composer.get_by_role("button", name="Send").click()
    first = _card(home, "everything__echo")
    expect(first.get_by_text("done", exact=True)).to_be_visible(timeout=SHORT)
    expect(first.locator(".chat-result")).to_have_text("Echo: hello-everything")
    second = _card(home, "sdk_test_server__echo")
    expect(second.get_by_text("waiting for approval")).to_be_visible()
    expect(second).to_contain_text("(MCP tool echo)")
    home.screenshot(path="/tmp/team-pg-pending.png", full_page=True)
    second.get_by_role("button", name="Approve").click()
    expect(second.get_by_text("done", exact=True)).to_be_visible(timeout=SHORT)
    expect(second.locator(".chat-result")).to_have_text("hello-sdk")
    answer = home.locator("#chat-log .chat-assistant").last
    expect(answer).to_contain_text("Both servers echoed.")
    expect(answer.locator(".chat-tokens")).to_have_text("11 in / 7 out tokens")
    expect(answer.locator(".chat-cost")).to_have_text("$0.000138")

    composer.get_by_label("Message").fill("Ask the server's model")
    composer.get_by_role("button", name="Send").click()
    asking = _card(home, "ask_llm")
    expect(asking.get_by_text("waiting for approval")).to_be_visible(timeout=SHORT)
    asking.get_by_role("button", name="Approve").click()
    expect(asking.get_by_text("done", exact=True)).to_be_visible(timeout=SHORT)
    expect(asking.locator(".chat-result")).to_have_text("scripted-1: Four.")
    sampled = home.locator("#chat-log article.chat-sampling")
    expect(sampled).to_contain_text("Four.")
    expect(sampled).to_contain_text("answered by scripted-1")
    expect(home.locator("#chat-log .chat-assistant").last).to_contain_text("The server's model said four.")
    expect(home.locator(".chat-totals")).to_contain_text("55 input / 35 output tokens")
    home.screenshot(path="/tmp/team-pg-done.png", full_page=True)
    assert KEY not in home.content()

    # Each card links to its frame on its own session's timeline; the frame links back to the chat.
    for session, card, text in ((everything, first, "hello-everything"), (sdk, second, "hello-sdk")):
        home.goto(chat_url)
        card.get_by_role("link", name="frame #").click()
        home.wait_for_url(re.compile(f"/s/{session}/"))
        expect(home.locator("#frame-detail")).to_contain_text(text)
        expect(timeline_rows(home, "tools/call").first).to_be_visible()
        back = home.locator("#frame-detail .from-chat")
        expect(back).to_contain_text("A call the model made")
        if session == sdk:
            home.screenshot(path="/tmp/team-pg-frame.png", full_page=True)
        back.get_by_role("link", name="Playground chat").click()
        home.wait_for_url(chat_url)
    # The sampling request is on the SDK server's timeline, and links back too.
    sampled.get_by_role("link", name="frame #").click()
    home.wait_for_url(re.compile(f"/s/{sdk}/"))
    expect(home.locator("#frame-detail")).to_contain_text("sampling/createMessage")
    expect(home.locator("#frame-detail .from-chat")).to_contain_text("A sampling request the model answered")
    expect(timeline_rows(home, "sampling/createMessage").first).to_be_visible()
    assert_clean(home)
