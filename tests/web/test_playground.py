"""The Playground against server-everything and the scripted model server (tests/servers/scripted_llm.py):
a chat's tool calls run through the session and land on its timeline; a model that is slow, answers
garbage, calls a tool that does not exist or with arguments that are not JSON gets a clear message in
the chat, and nothing else breaks."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from support.paths import SERVERS
from support.processes import free_port, start_http_server
from support.web import (
    frames_of,
    frames_stored,
    live_runtime,
    logged_in_client,
    make_user,
    start_session,
    stdio_config,
)

from sessions.models import McpSession
from sessions.playground.models import Chat, ChatEntry

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEY = "sk-scripted-web-key"
STEP = re.compile(r'hx-post="(/s/[^"]+/playground/\d+/step)"')


class Scripted:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def requests(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def scripted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scripted]:
    """The scripted model server, with the steps of the test's ``script`` marker."""
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps({"key": KEY, "steps": request.node.get_closest_marker("script").args[0]}))
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)], port
    ):
        yield Scripted(f"http://127.0.0.1:{port}/v1", log)


def models(url: str) -> str:
    return json.dumps(
        [
            {"name": "gpt", "url": url, "model": "gpt-scripted", "api_key": KEY},
            {"name": "claude", "api": "anthropic", "url": url, "model": "claude-scripted", "api_key": KEY},
            {"name": "impatient", "url": url, "model": "gpt-scripted", "api_key": KEY, "timeout": 1},
        ]
    )


async def new_chat(client: Any, session: McpSession, model: str, **fields: str) -> Chat:
    response = await client.post(f"/s/{session.public_id}/playground/chats", {"model": model, **fields})
    assert response.status_code == 200, response.content.decode()
    return await Chat.objects.filter(session=session).afirst()  # type: ignore[return-value]


async def say(client: Any, session: McpSession, chat: Chat, text: str, steps: int = 12) -> str:
    """Send a message and take the steps the log asks for, as the page does; the last log."""
    response = await client.post(f"/s/{session.public_id}/playground/{chat.pk}/send", {"text": text})
    html = response.content.decode()
    for _ in range(steps):
        found = STEP.search(html)
        if not found:
            return html
        response = await client.post(found[1])
        assert response.status_code == 200
        html = response.content.decode()
    raise AssertionError(f"the chat still wants a step after {steps}:\n{html}")


async def entries(chat: Chat) -> list[ChatEntry]:
    return [e async for e in ChatEntry.objects.filter(chat=chat)]


@pytest.mark.script(
    [
        {
            "match": "Add 2 and 3",
            "text": "Adding.",
            "tool_calls": [{"id": "tu_sum", "name": "get-sum", "arguments": {"a": 2, "b": 3}}],
        },
        {"match": "The sum of 2 and 3 is 5", "text": "It is 5."},
    ]
)
async def test_an_anthropic_model_calls_a_tool_through_the_session_and_reads_its_result(
    everything_stdio: dict, scripted: Scripted
) -> None:
    with override_settings(INSPECTOR_LLM_MODELS=models(scripted.url)):
        async with live_runtime():
            alice = await make_user()
            session = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            client = await logged_in_client(alice)
            chat = await new_chat(client, session, "claude", system_prompt="Be exact.")
            html = await say(client, session, chat, "Add 2 and 3")
            assert "It is 5." in html and KEY not in html
            user, asked, call, answered = await entries(chat)
            assert (call.tool_name, call.status, call.arguments) == ("get-sum", "done", {"a": 2, "b": 3})
            assert call.text == "The sum of 2 and 3 is 5." and call.latency_ms is not None
            assert (asked.model_name, asked.input_tokens, asked.output_tokens) == ("scripted-1", 13, 5)
            await frames_stored(session, call.request_seq, call.response_seq)
            frames = await frames_of(session, method="tools/call")
            assert [f.seq for f in frames] == [call.request_seq, call.response_seq]
            assert f'hx-get="/s/{session.public_id}/frames/{call.request_seq}"' in html
            first, second = scripted.requests()
            assert first["path"] == "/v1/messages" and first["system"] == "Be exact." and first["stream"]
            # The tools were listed through the session first (the chat's first message lists them).
            assert "get-sum" in {t["name"] for t in first["tools"]}
            assert second["messages"][-1]["content"][0] == {
                "type": "tool_result",
                "tool_use_id": "tu_sum",
                "content": "The sum of 2 and 3 is 5.",
                "is_error": False,
            }


@pytest.mark.script(
    [
        {"match": "slow", "text": "late", "delay": 3},
        {"match": "garbage", "raw": "<html>502 Bad Gateway</html>", "content_type": "text/html"},
        {"match": "fail", "status": 503, "error": "the model is overloaded"},
        {"match": "ghost", "tool_calls": [{"id": "c1", "name": "summon-ghost", "arguments": {}}]},
        {"match": "There is no tool named", "text": "That tool does not exist, sorry."},
        {"match": "malformed", "tool_calls": [{"id": "c2", "name": "echo", "arguments": '{"message": '}]},
        {"match": "was not made", "text": "My arguments were broken."},
        {"match": "still", "text": "Still here."},
    ]
)
async def test_a_slow_garbled_failing_or_confused_model_says_so_in_the_chat_and_nothing_else_breaks(
    everything_stdio: dict, scripted: Scripted
) -> None:
    with override_settings(INSPECTOR_LLM_MODELS=models(scripted.url)):
        async with live_runtime():
            alice = await make_user()
            session = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            client = await logged_in_client(alice)
            impatient = await new_chat(client, session, "impatient")
            html = await say(client, session, impatient, "slow")
            assert "could not answer: impatient did not answer within 1 s" in html
            chat = await new_chat(client, session, "gpt")
            html = await say(client, session, chat, "garbage")
            assert (
                "gpt could not answer: gpt answered something that is not JSON: &#x27;&lt;html&gt;502" in html
            )
            html = await say(client, session, chat, "fail")
            assert "gpt answered HTTP 503: the model is overloaded" in html
            html = await say(client, session, chat, "ghost")
            assert (
                "There is no tool named &#x27;summon-ghost&#x27; in this session: it was not called." in html
            )
            assert "That tool does not exist, sorry." in html
            html = await say(client, session, chat, "malformed")
            assert "The call of &#x27;echo&#x27; was not made: its arguments are not JSON" in html
            assert "My arguments were broken." in html
            html = await say(client, session, chat, "still")
            assert "Still here." in html
            assert not await frames_of(session, method="tools/call")  # none of them reached the server
            await session.arefresh_from_db()
            assert session.status == "ready"
            page = await client.get(f"/s/{session.public_id}/panel/playground?chat={chat.pk}")
            assert page.status_code == 200 and KEY not in page.content.decode()
            kinds = [(e.kind, e.status) for e in await entries(chat)]
            assert kinds.count(("error", "")) == 2 and kinds.count(("tool", "invalid")) == 2


@pytest.mark.script(
    [
        {"match": "first", "text": "Offered everything."},
        {"match": "second", "text": "Offered less."},
    ]
)
async def test_the_tools_offered_are_the_persons_to_choose_and_a_tool_left_out_is_not_offered(
    everything_stdio: dict, scripted: Scripted
) -> None:
    with override_settings(INSPECTOR_LLM_MODELS=models(scripted.url)):
        async with live_runtime():
            alice = await make_user()
            session = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            client = await logged_in_client(alice)
            chat = await new_chat(client, session, "gpt")
            assert "Offered everything." in await say(client, session, chat, "first")
            panel = (await client.get(f"/s/{session.public_id}/panel/playground")).content.decode()
            shown = re.findall(r'name="tools_shown" value="([^"]+)"', panel)
            assert "echo" in shown and "get-sum" in shown
            ticked = [name for name in shown if name != "echo"]
            settings = {"model": "gpt", "approval": "writes", "sampling": "person"}
            response = await client.post(
                f"/s/{session.public_id}/playground/{chat.pk}/settings",
                {**settings, "tools_shown": shown, "tools": ticked},
            )
            assert response.status_code == 200 and "1 tool not offered" in response.content.decode()
            assert "Offered less." in await say(client, session, chat, "second")
            first, second = scripted.requests()
            offered = [{t["function"]["name"] for t in request["tools"]} for request in (first, second)]
            assert "echo" in offered[0] and offered[1] == offered[0] - {"echo"}
            # Too many names is refused with the reason, and nothing changes.
            response = await client.post(
                f"/s/{session.public_id}/playground/{chat.pk}/settings",
                {**settings, "tools_shown": [f"t{n}" for n in range(501)]},
            )
            assert response.status_code == 422 and "at most 500 tools" in response.content.decode()
            assert (await Chat.objects.aget(pk=chat.pk)).tools_off == ["echo"]
