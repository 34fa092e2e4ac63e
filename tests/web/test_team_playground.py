"""The team's Playground page over two live sessions (server-everything and the SDK test server) with the
scripted model (tests/servers/scripted_llm.py): the tool names both servers offer are told apart, each
call runs through its own session and is on that session's timeline, linked both ways; a tool that asks
for sampling mid-chat is answered by the chat's model; each answer's tokens and cost are shown."""

from __future__ import annotations

import asyncio
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
    frames_when,
    live_runtime,
    logged_in_client,
    make_user,
    start_session,
    stdio_config,
    waiting_review,
)

from sessions.models import McpSession, PendingReview
from sessions.playground.models import Chat, ChatEntry

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEY = "sk-scripted-team-key"
STEP = re.compile(r'hx-post="(/playground/\d+/step)"')
SCRIPT = [
    {
        "match": "Echo on both servers",
        "text": "Echoing on both.",
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
]


@pytest.fixture
def scripted(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The scripted model server, with SCRIPT or the steps of the test's ``script`` marker."""
    marker = request.node.get_closest_marker("script")
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps({"key": KEY, "steps": marker.args[0] if marker else SCRIPT}))
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)], port
    ):
        yield f"http://127.0.0.1:{port}/v1", log


def models(url: str) -> str:
    entry = {"name": "gpt", "url": url, "model": "gpt-scripted", "api_key": KEY}
    return json.dumps([entry | {"input_price": 3, "output_price": 15}])


async def steps(client: Any, html: str, limit: int = 12) -> str:
    """Take the steps the log asks for, as the page does; the last log."""
    for _ in range(limit):
        found = STEP.search(html)
        if not found:
            return html
        response = await client.post(found[1])
        assert response.status_code == 200
        html = response.content.decode()
    raise AssertionError(f"the chat still wants a step after {limit}:\n{html}")


async def entries(chat: Chat) -> list[ChatEntry]:
    return [e async for e in ChatEntry.objects.filter(chat=chat)]


async def test_a_chat_over_two_sessions_calls_each_servers_tool_through_its_session_and_the_model_samples(
    everything_stdio: dict, sdk_stdio: dict, scripted: tuple[str, Path]
) -> None:
    url, log = scripted
    with override_settings(INSPECTOR_LLM_MODELS=models(url)):
        async with live_runtime():
            alice = await make_user()
            everything = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            sdk = await start_session(alice, stdio_config(sdk_stdio["command"], sdk_stdio["args"]))
            client = await logged_in_client(alice)
            page = (await client.get("/playground")).content.decode()
            assert str(everything.public_id) in page and str(sdk.public_id) in page
            fields = {"model": "gpt", "approval": "writes", "sampling": "model"}
            picked = [str(everything.public_id), str(sdk.public_id)]
            response = await client.post("/playground/new", {**fields, "session": picked})
            assert response.status_code == 302
            chat = await Chat.objects.aget(team_page=True)
            assert response["Location"] == f"/playground/{chat.pk}"

            sent = await client.post(f"/playground/{chat.pk}/send", {"text": "Echo on both servers"})
            html = await steps(client, sent.content.decode())
            _, _, first, second = await entries(chat)
            # server-everything's echo is read-only: it ran at once; the SDK server's waits for the person.
            assert (first.mcp_name, first.session_id, first.status) == ("echo", everything.pk, "done")
            assert (second.mcp_name, second.session_id, second.status) == ("echo", sdk.pk, "pending")
            assert f"/playground/{chat.pk}/calls/{second.pk}/approve" in html
            approved = await client.post(f"/playground/{chat.pk}/calls/{second.pk}/approve")
            html = await steps(client, approved.content.decode())
            assert "Both servers echoed." in html and KEY not in html
            await second.arefresh_from_db()
            assert (second.status, second.text, second.decided_by_id) == ("done", "hello-sdk", alice.pk)
            offered = {t["function"]["name"] for t in json.loads(log.read_text().splitlines()[0])["tools"]}
            assert {"everything__echo", "sdk_test_server__echo", "get-sum", "ask_llm"} <= offered
            assert "echo" not in offered

            # Each call is on its own session's timeline, and each links to the other.
            for session, call in ((everything, first), (sdk, second)):
                await frames_stored(session, call.request_seq, call.response_seq)
                frames = await frames_of(session, method="tools/call")
                assert [f.seq for f in frames] == [call.request_seq, call.response_seq]
                assert f'href="/s/{session.public_id}/?frame={call.request_seq}"' in html
                detail = await client.get(f"/s/{session.public_id}/frames/{call.request_seq}")
                assert f'href="/playground/{chat.pk}"' in detail.content.decode()

            sent = await client.post(f"/playground/{chat.pk}/send", {"text": "Ask the server's model"})
            html = await steps(client, sent.content.decode())
            asking = (await entries(chat))[-1]
            assert (asking.mcp_name, asking.status) == ("ask_llm", "pending")
            approved = await client.post(f"/playground/{chat.pk}/calls/{asking.pk}/approve")
            html = await steps(client, approved.content.decode())
            assert "The server&#x27;s model said four." in html
            await asking.arefresh_from_db()
            assert asking.status == "done" and asking.text == "scripted-1: Four."
            sampled = await ChatEntry.objects.aget(chat=chat, kind="sampling")
            assert (sampled.text, sampled.session_id, sampled.is_error) == ("Four.", sdk.pk, False)
            review = await PendingReview.objects.aget(session=sdk, method="sampling/createMessage")
            assert review.status == "answered" and review.answer["content"]["text"] == "Four."
            assert review.frame_seq == sampled.request_seq
            answer = (await frames_when(sdk, direction="out", rpc_kind="result"))[-1]
            assert f"answered by gpt for Playground chat {chat.pk}" in (answer.note or "")
            detail = await client.get(f"/s/{sdk.public_id}/frames/{review.frame_seq}")
            assert "A sampling request the model answered" in detail.content.decode()

            # Tokens and cost: 11 in, 7 out at 3 and 15 a million tokens.
            answers = [e for e in await entries(chat) if e.kind == "assistant"]
            assert all((e.input_tokens, e.output_tokens) == (11, 7) for e in answers)
            assert answers[0].cost == pytest.approx(0.000138)
            assert "11 in / 7 out tokens" in html and "$0.000138" in html
            assert sampled.cost == pytest.approx(0.000138)


async def test_a_team_chat_cannot_be_started_over_another_teams_session_nor_read_by_it(
    everything_stdio: dict, scripted: tuple[str, Path]
) -> None:
    url, _ = scripted
    with override_settings(INSPECTOR_LLM_MODELS=models(url)):
        async with live_runtime():
            alice, dave = await make_user("alice"), await make_user("dave")
            session = await start_session(
                alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
            )
            client, other = await logged_in_client(alice), await logged_in_client(dave)
            fields = {"model": "gpt", "session": [str(session.public_id)]}
            refused = await other.post("/playground/new", fields)
            assert refused.status_code == 404 and "No such session in this team" in refused.content.decode()
            refused = await other.post("/playground/new", {**fields, "session": ["not-a-uuid"]})
            assert refused.status_code == 404
            empty = await client.post("/playground/new", {"model": "gpt"})
            assert empty.status_code == 422 and "Pick one or more live sessions" in empty.content.decode()
            assert (await client.post("/playground/new", fields)).status_code == 302
            chat = await Chat.objects.aget(team_page=True)
            assert (await other.get(f"/playground/{chat.pk}")).status_code == 404
            assert (await other.post(f"/playground/{chat.pk}/send", {"text": "hi"})).status_code == 404
            # A tab's chat list is the session's own chats: the team's page keeps its own.
            panel = await client.get(f"/s/{session.public_id}/panel/playground")
            assert f"Chat {chat.pk} " not in panel.content.decode()
            await session.arefresh_from_db()
            assert session.status == McpSession.Status.READY


async def test_a_chat_that_leaves_sampling_to_the_person_links_the_waiting_request_and_goes_on_once_answered(
    sdk_stdio: dict, scripted: tuple[str, Path]
) -> None:
    url, log = scripted
    with override_settings(INSPECTOR_LLM_MODELS=models(url)):
        async with live_runtime():
            alice = await make_user()
            sdk = await start_session(alice, stdio_config(sdk_stdio["command"], sdk_stdio["args"]))
            client = await logged_in_client(alice)
            fields = {"model": "gpt", "approval": "none", "sampling": "person"}
            fields["session"] = [str(sdk.public_id)]
            assert (await client.post("/playground/new", fields)).status_code == 302
            chat = await Chat.objects.aget(team_page=True)
            await client.post(f"/playground/{chat.pk}/send", {"text": "Ask the server's model"})
            html = (await client.post(f"/playground/{chat.pk}/step")).content.decode()  # the model calls
            assert f'hx-get="/playground/{chat.pk}/stream" hx-trigger="every 1s"' in html
            calling = asyncio.ensure_future(client.post(f"/playground/{chat.pk}/step"))
            review = await waiting_review(sdk, "sampling/createMessage")
            shown = (await client.get(f"/playground/{chat.pk}/stream")).content.decode()
            assert f'href="/s/{sdk.public_id}/?frame={review.frame_seq}"' in shown
            assert "this chat leaves sampling to you" in shown
            answer = {"text": "Four.", "model": "human", "stop_reason": "endTurn"}
            answered = await client.post(f"/s/{sdk.public_id}/reviews/{review.pk}/sampling", answer)
            assert answered.status_code == 200
            html = await steps(client, (await calling).content.decode())
            assert "The server&#x27;s model said four." in html
            call = await ChatEntry.objects.aget(chat=chat, kind="tool")
            assert (call.status, call.text) == ("done", "human: Four.")
            assert not await ChatEntry.objects.filter(chat=chat, kind="sampling").aexists()
            # The model was asked twice (the call, the last answer), never for the sampling request.
            assert len(log.read_text().splitlines()) == 2


@pytest.mark.script(
    [
        {
            "match": "Ask the server's model",
            "tool_calls": [{"id": "c3", "name": "ask_llm", "arguments": {"prompt": "What is 2+2?"}}],
        },
        {"match": "What is 2+2?", "status": 503, "error": "the model is overloaded"},
        {"match": "overloaded", "text": "The server's model could not be asked."},
    ]
)
async def test_a_model_that_cannot_answer_a_sampling_request_rejects_it_saying_why_and_the_chat_goes_on(
    sdk_stdio: dict, scripted: tuple[str, Path]
) -> None:
    url, _ = scripted
    with override_settings(INSPECTOR_LLM_MODELS=models(url)):
        async with live_runtime():
            alice = await make_user()
            sdk = await start_session(alice, stdio_config(sdk_stdio["command"], sdk_stdio["args"]))
            client = await logged_in_client(alice)
            fields = {"model": "gpt", "approval": "none", "sampling": "model"}
            assert (
                await client.post("/playground/new", fields | {"session": [str(sdk.public_id)]})
            ).status_code == 302
            chat = await Chat.objects.aget(team_page=True)
            sent = await client.post(f"/playground/{chat.pk}/send", {"text": "Ask the server's model"})
            html = await steps(client, sent.content.decode())
            assert "The server&#x27;s model could not be asked." in html
            sampled = await ChatEntry.objects.aget(chat=chat, kind="sampling")
            assert sampled.is_error and "gpt answered HTTP 503: the model is overloaded" in sampled.text
            assert "could not answer the sampling request" in html
            review = await PendingReview.objects.aget(session=sdk, method="sampling/createMessage")
            assert review.status == "rejected"
            call = await ChatEntry.objects.aget(chat=chat, kind="tool")
            assert call.is_error and "overloaded" in call.text
            await sdk.arefresh_from_db()
            assert sdk.status == McpSession.Status.READY
