"""In Chromium: the Playground tab chats with a scripted model over server-everything's tools.

The model (tests/servers/scripted_llm.py, OpenAI-compatible, streaming) calls `echo` (marked read-only:
it runs at once) and `toggle-simulated-logging` (not read-only: it waits for the person's approval);
both calls run through the session, so they are on its timeline and in its Requests list.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import SHORT, assert_clean, call_card, connect, open_tab, timeline_rows
from support.paths import SERVERS
from support.processes import free_port, start_http_server

playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

KEY = "sk-scripted-browser-key"
SCRIPT = {
    "key": KEY,
    "steps": [
        {
            "match": "Echo hello",
            "text": "I will echo it, then turn logging on.",
            "chunk": 5,
            "tool_calls": [
                {"id": "call_echo", "name": "echo", "arguments": {"message": "hello from the model"}},
                {"id": "call_toggle", "name": "toggle-simulated-logging", "arguments": {}},
            ],
        },
        {"match": "Started simulated", "text": "Echoed, and simulated logging is on.", "chunk": 3},
        {
            "match": "Show the weather in Oslo",
            "text": "Here is the view.",
            "tool_calls": [{"id": "call_view", "name": "show_weather", "arguments": {"city": "Oslo"}}],
        },
        {"match": "Oslo: 4", "text": "It is 4 °C in Oslo: the view shows it.", "chunk": 6},
        {"match": "What should I wear in Oslo?", "text": "A warm coat, for 4 °C."},
        {
            "match": "Tell a story",
            "text": "Once upon a time a server answered every call.",
            "chunk": 4,
            "chunk_delay": 0.25,
        },
    ],
}


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


@pytest.fixture(scope="module")
def app_env(scripted_llm: tuple[str, Path]) -> dict[str, str]:
    url, _ = scripted_llm
    models = [
        {"name": "scripted", "label": "Scripted GPT", "url": url, "model": "scripted-model", "api_key": KEY}
    ]
    return {"INSPECTOR_LLM_MODELS": json.dumps(models)}


def _tool_card(page: Any, name: str) -> Any:
    return page.locator("#chat-log article.chat-tool").filter(has=page.locator("header code", has_text=name))


def test_a_chat_calls_a_read_only_tool_at_once_and_another_after_approval_both_on_the_timeline(
    home: Any, everything_stdio: dict, scripted_llm: tuple[str, Path]
) -> None:
    _, log = scripted_llm
    connect(home, stdio=everything_stdio)
    open_tab(home, "Playground")
    panel = home.locator("#panel")
    expect(panel.get_by_label("Model")).to_have_value("scripted")
    panel.get_by_label("System prompt").fill("You test MCP servers.")
    panel.get_by_label("Temperature").fill("0.3")
    panel.get_by_role("button", name="Start chat").click()

    composer = home.locator("form.chat-composer")
    composer.get_by_label("Message").fill("Echo hello, then turn on logging")
    composer.get_by_role("button", name="Send").click()
    expect(composer.get_by_label("Message")).to_have_value("")

    echo = _tool_card(home, "echo")
    expect(echo.get_by_text("done", exact=True)).to_be_visible(timeout=SHORT)
    expect(echo.locator(".chat-result")).to_have_text("Echo: hello from the model")
    expect(echo.locator("pre.json")).to_contain_text('"message": "hello from the model"')
    expect(echo).to_contain_text(" ms")

    toggle = _tool_card(home, "toggle-simulated-logging")
    expect(toggle.get_by_text("waiting for approval")).to_be_visible()
    # Not run before approval: the session has the echo call and no call of the other tool.
    expect(call_card(home, "tools/call", "echo")).to_have_count(1)
    expect(call_card(home, "tools/call", "toggle-simulated-logging")).to_have_count(0)
    assert len(log.read_text().splitlines()) == 1

    home.screenshot(path="/tmp/pg-pending.png", full_page=True)
    toggle.get_by_role("button", name="Approve").click()
    expect(toggle.get_by_text("done", exact=True)).to_be_visible(timeout=SHORT)
    expect(toggle).to_contain_text("approved by")
    expect(home.locator("#chat-log .chat-assistant").last).to_contain_text(
        "Echoed, and simulated logging is on."
    )
    expect(home.locator("#chat-log .chat-working")).to_have_count(0)
    expect(call_card(home, "tools/call", "toggle-simulated-logging")).to_have_count(1)
    expect(timeline_rows(home, "tools/call")).to_have_count(4)  # two requests, two answers

    # The card links to its frame on the timeline.
    frame_link = echo.get_by_role("link", name="frame #")
    frame_link.click()
    expect(home.locator("#frame-detail")).to_contain_text("hello from the model")
    # And the timeline's frame links back to the chat, from another tab.
    open_tab(home, "Tools")
    timeline_rows(home, "tools/call").last.click()
    back = home.locator("#frame-detail .from-chat")
    expect(back).to_contain_text("toggle-simulated-logging")
    back.get_by_role("link", name="Playground chat").click()
    expect(home.get_by_role("tab", name="Playground")).to_have_attribute("aria-selected", "true")
    expect(_tool_card(home, "toggle-simulated-logging").get_by_text("done", exact=True)).to_be_visible()

    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert first["messages"][0] == {"role": "system", "content": "You test MCP servers."}
    assert first["temperature"] == 0.3 and first["stream"] is True and first["model"] == "scripted-model"
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert offered["echo"]["properties"]["message"]["type"] == "string"
    results = [m for m in second["messages"] if m["role"] == "tool"]
    assert [(r["tool_call_id"], r["content"]) for r in results][0] == (
        "call_echo",
        "Echo: hello from the model",
    )
    assert results[1]["tool_call_id"] == "call_toggle"
    home.screenshot(path="/tmp/pg-done.png", full_page=True)
    assert KEY not in home.content()

    # A slow stream shows its text as it comes, then the whole answer.
    composer.get_by_label("Message").fill("Tell a story")
    composer.get_by_role("button", name="Send").click()
    streaming = home.locator("#chat-log .chat-working .chat-streaming")
    expect(streaming).to_contain_text("Once upon", timeout=SHORT)
    assert "every call." not in streaming.inner_text()
    # Away and back while it streams: the chat goes on without the page, and the page catches up.
    open_tab(home, "Tools")
    open_tab(home, "Playground")
    expect(home.locator("#chat-log .chat-assistant").last).to_have_text(
        re.compile("Once upon a time a server answered every call.")
    )
    expect(home.locator("#chat-log .chat-working")).to_have_count(0)
    assert_clean(home)


def test_a_tool_with_a_view_shows_it_in_the_chat_and_it_stays_as_the_chat_goes_on(
    home: Any, scripted_llm: tuple[str, Path]
) -> None:
    connect(home, stdio={"command": sys.executable, "args": [str(SERVERS / "apps_server.py"), "stdio"]})
    open_tab(home, "Playground")
    home.locator("#panel").get_by_role("button", name="Start chat").click()
    composer = home.locator("form.chat-composer")
    composer.get_by_label("Message").fill("Show the weather in Oslo")
    composer.get_by_role("button", name="Send").click()
    card = _tool_card(home, "show_weather")
    card.get_by_role("button", name="Approve").click()  # not marked read-only: the person approves
    view = card.get_by_role("region", name="View of show_weather")
    inside = view.frame_locator("iframe.app-frame")
    expect(inside.locator("#result")).to_contain_text("Oslo: 4", timeout=SHORT)
    # The model's answer draws the log again; the view is the same one, not read a second time.
    expect(home.locator("#chat-log .chat-assistant").last).to_contain_text("the view shows it")
    expect(home.locator("#chat-log .chat-working")).to_have_count(0)
    expect(inside.locator("#result")).to_contain_text("Oslo: 4")
    expect(timeline_rows(home, "resources/read")).to_have_count(2)  # one request, one answer
    # A control in the view calls a tool through the session.
    inside.get_by_role("button", name="Refresh").click()
    expect(inside.locator("#refreshed")).to_have_text("refreshed Oslo: 5 °C")
    expect(timeline_rows(home, "tools/call").filter(has_text="refresh_weather").first).to_be_visible()
    # The model was offered the tools a model may call: not the one the view keeps for itself.
    _, log = scripted_llm
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    offered = {t["function"]["name"] for t in asked[-1]["tools"]}
    assert "show_weather" in offered and "model_only_secret" in offered and "refresh_weather" not in offered
    # What the view asks to say to the model goes to the message box for the person to send; the
    # context it gives goes to the model with the next turn.
    inside.get_by_role("button", name="Tell the model").click()
    for_model = view.get_by_role("region", name="What a model would receive")
    expect(for_model).to_contain_text("given to the chat's model on its next turn")
    for_model.get_by_role("button", name="Put in the message box").click()
    expect(composer.get_by_label("Message")).to_have_value("What should I wear in Oslo?")
    expect(composer.get_by_label("Message")).to_be_focused()
    composer.get_by_role("button", name="Send").click()
    expect(home.locator("#chat-log .chat-assistant").last).to_contain_text("A warm coat")
    asked = [json.loads(line) for line in log.read_text().splitlines()]
    system = asked[-1]["messages"][0]
    assert system["role"] == "system", asked[-1]["messages"]
    context = 'Context from the view of the show_weather call call_view:\n{"city": "Oslo", "shown": true}'
    assert context in system["content"]
    assert_clean(home)
