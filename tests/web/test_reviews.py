"""The human in the loop: sampling, elicitation and roots requests answered through review cards."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.http import QueryDict
from django.template.loader import render_to_string
from django.test import override_settings
from support.paths import SERVERS
from support.processes import free_port, start_http_server
from support.web import (
    frames_of,
    frames_when,
    live_runtime,
    logged_in_client,
    make_user,
    request,
    start_session,
    stdio_config,
    wait_for_tool,
    wait_until,
    waiting_review,
)

from sessions.models import McpSession, PendingReview, TimelineFrame
from sessions.teams.models import Team, TeamModel
from sessions.web.elicitation_forms import fields_of, validate

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CALL_WAIT = 30.0


def config(spec: dict[str, Any], **capabilities: Any) -> dict[str, Any]:
    return stdio_config(spec["command"], spec["args"], capabilities={"review_roots": False, **capabilities})


def call_tool(session: McpSession, name: str, arguments: dict[str, Any] | None = None) -> asyncio.Future[Any]:
    params = {"name": name, "arguments": arguments or {}}
    return asyncio.ensure_future(request(session, "tools/call", params, wait=CALL_WAIT))


async def tool_text(call: asyncio.Future[Any]) -> str:
    outcome = await asyncio.wait_for(call, CALL_WAIT)
    assert outcome["event"] == "done", outcome
    if "error" in outcome:
        return str(outcome["error"].get("message"))
    return "\n".join(block.get("text", "") for block in outcome["result"]["content"])


async def page_of(client: Any, session: McpSession) -> str:
    response = await client.get(f"/s/{session.public_id}/")
    assert response.status_code == 200
    return response.content.decode()


async def resolved(review: PendingReview) -> PendingReview:
    return await wait_until(
        lambda: PendingReview.objects.filter(pk=review.pk).exclude(status="waiting").first(),
        what="the review resolved",
    )


def url(session: McpSession, review: PendingReview, what: str) -> str:
    return f"/s/{session.public_id}/reviews/{review.pk}/{what}"


# --- sampling ----------------------------------------------------------------------------------------------


async def test_a_sampling_card_shows_the_request_escaped_and_approving_it_completes_the_tool_call(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(everything_stdio))
        client = await logged_in_client(alice)
        call = call_tool(session, "trigger-sampling-request", {"prompt": "<b>bold</b> tea?", "maxTokens": 77})
        review = await waiting_review(session, "sampling/createMessage")

        page = await page_of(client, session)
        assert 'data-count="1"' in page
        assert "&lt;b&gt;bold&lt;/b&gt; tea?" in page and "<b>bold</b>" not in page
        assert "You are a helpful test server." in page
        assert "<dt>maxTokens</dt><dd>77</dd>" in page and "<dt>temperature</dt><dd>0.7</dd>" in page
        assert "Approve and send" in page

        reply = {"text": "Green, please.", "model": "person-1", "stop_reason": "maxTokens"}
        response = await client.post(url(session, review, "sampling"), reply)
        assert response.status_code == 200 and "edited by a person" in response.content.decode()
        text = await tool_text(call)
        assert "Green, please." in text and "person-1" in text and "maxTokens" in text

        done = await resolved(review)
        assert done.status == "answered" and done.answered_by_id == alice.pk and done.edited
        assert done.answer == {
            "role": "assistant",
            "content": {"type": "text", "text": "Green, please."},
            "model": "person-1",
            "stopReason": "maxTokens",
        }
        assert 'data-count="0"' in await page_of(client, session)

        late = await client.post(url(session, review, "sampling"), reply)
        assert late.status_code == 409 and "already answered" in late.content.decode()


def sampling_tools(mode: str = "auto") -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVERS / "sampling_tools.py"), mode]}


async def test_a_tool_enabled_sampling_request_is_answered_with_a_tool_use_then_with_the_text() -> None:
    """2025-11-25: the client declares sampling.tools; the card shows the tools offered and answers
    with a tool use; the server runs the tool and asks again with its result, which the card shows."""
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(sampling_tools()))
        assert session.client_capabilities["sampling"] == {"tools": {}}
        client = await logged_in_client(alice)
        call = call_tool(session, "forecast", {"city": "Oslo"})
        review = await waiting_review(session, "sampling/createMessage")
        page = await page_of(client, session)
        assert "<code>get_weather</code>" in page and "The weather in a city." in page
        assert '<option value="get_weather">get_weather</option>' in page and "Use a tool" in page

        for wrong, why in (
            ({"tool_name": "rm_rf"}, "&#x27;rm_rf&#x27; is not one of the tools the request offers."),
            (
                {"tool_name": "get_weather", "tool_input": "[1]"},
                "The tool&#x27;s input must be a JSON object.",
            ),
            ({"tool_name": "get_weather", "tool_input": "{"}, "The tool&#x27;s input is not JSON"),
        ):
            answer = {"text": "", "model": "human", "stop_reason": "endTurn", **wrong}
            refused = await client.post(url(session, review, "sampling"), answer)
            assert refused.status_code == 422 and why in refused.content.decode()
        use = {
            "text": "Let me look.",
            "model": "human",
            "stop_reason": "endTurn",
            "tool_name": "get_weather",
            "tool_input": '{"city": "Oslo"}',
        }
        assert (await client.post(url(session, review, "sampling"), use)).status_code == 200
        done = await resolved(review)
        assert done.answer["stopReason"] == "toolUse" and done.answer["content"][0] == {
            "type": "text",
            "text": "Let me look.",
        }
        tool_use = done.answer["content"][1]
        assert tool_use["type"] == "tool_use" and tool_use["name"] == "get_weather"
        assert tool_use["input"] == {"city": "Oslo"} and tool_use["id"].startswith("toolu_")

        again = await wait_until(
            lambda: PendingReview.objects.filter(
                session=session, method="sampling/createMessage", status="waiting"
            ).first(),
            what="the second sampling request",
        )
        page = await page_of(client, session)
        assert "tool result" in page and "sunny in Oslo" in page and tool_use["id"] in page
        text = {"text": "Sunny, take sunglasses.", "model": "human", "stop_reason": "endTurn"}
        assert (await client.post(url(session, again, "sampling"), text)).status_code == 200
        assert await tool_text(call) == "human: Sunny, take sunglasses."


@pytest.mark.parametrize(
    ("mode", "answer", "why"),
    [
        ("required", {}, "The request&#x27;s toolChoice is required"),
        ("none", {"tool_name": "get_weather"}, "The request&#x27;s toolChoice is none"),
    ],
)
async def test_the_card_holds_a_reply_to_the_requests_tool_choice(mode: str, answer: dict, why: str) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(sampling_tools(mode)))
        client = await logged_in_client(alice)
        call = call_tool(session, "forecast", {"city": "Oslo"})
        review = await waiting_review(session, "sampling/createMessage")
        reply = {"text": "hm", "model": "human", "stop_reason": "endTurn", **answer}
        refused = await client.post(url(session, review, "sampling"), reply)
        assert refused.status_code == 422 and why in refused.content.decode()
        await client.post(url(session, review, "reject"))
        assert "rejected" in (await tool_text(call)).lower()


async def test_a_task_augmented_sampling_request_is_answered_on_its_card_and_reaches_the_server_as_a_task(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(everything_stdio))
        client = await logged_in_client(alice)
        await wait_for_tool(session, "trigger-sampling-request-async")
        call = call_tool(session, "trigger-sampling-request-async", {"prompt": "tea?"})
        review = await waiting_review(session, "sampling/createMessage")
        # The server has its CreateTaskResult already and polls the task while the card waits.
        created = await wait_until(
            lambda: TimelineFrame.objects.filter(
                session=session, direction="out", note__startswith="task ", note__endswith="created (working)"
            ).first(),
            what="the CreateTaskResult",
        )
        assert created.method == "sampling/createMessage"
        reply = {"text": "Oolong.", "model": "person-1", "stop_reason": "endTurn"}
        response = await client.post(url(session, review, "sampling"), reply)
        assert response.status_code == 200
        text = await tool_text(call)
        assert text.startswith("[COMPLETED]") and "Oolong." in text and "person-1" in text
        assert (await resolved(review)).status == "answered"
        asked = {f.method for f in await frames_when(session, direction="in", rpc_kind="request")}
        assert {"sampling/createMessage", "tasks/get", "tasks/result"} <= asked


async def test_rejecting_a_sampling_request_gives_the_server_error_minus_one(sdk_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(sdk_stdio))
        client = await logged_in_client(alice)
        call = call_tool(session, "ask_llm", {"prompt": "tea?"})
        review = await waiting_review(session, "sampling/createMessage")
        response = await client.post(url(session, review, "reject"))
        assert response.status_code == 200 and "Rejected" in response.content.decode()
        assert "User rejected sampling request" in await tool_text(call)
        done = await resolved(review)
        assert done.status == "rejected" and done.answered_by_id == alice.pk
        sent = [
            json.loads(bytes(f.raw)) for f in await frames_when(session, direction="out", rpc_kind="error")
        ]
        assert any(m.get("error", {}).get("code") == -1 for m in sent)


async def test_a_sampling_answer_needs_a_model_and_an_unchanged_one_is_not_recorded_as_edited(
    sdk_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(sdk_stdio))
        client = await logged_in_client(alice)
        call = call_tool(session, "ask_llm", {"prompt": "tea?"})
        review = await waiting_review(session, "sampling/createMessage")
        nameless = await client.post(
            url(session, review, "sampling"), {"text": "hi", "model": " ", "stop_reason": ""}
        )
        assert nameless.status_code == 422
        assert (
            "Model is required" in nameless.content.decode()
            and "Stop reason is required" in nameless.content.decode()
        )
        assert (await PendingReview.objects.aget(pk=review.pk)).status == "waiting"
        empty = {"text": "", "model": "human", "stop_reason": "endTurn"}
        response = await client.post(url(session, review, "sampling"), empty)
        assert response.status_code == 200
        assert "human: " in await tool_text(call)
        assert not (await resolved(review)).edited


# --- elicitation -------------------------------------------------------------------------------------------


async def test_an_elicitation_form_is_validated_on_the_server_and_sends_typed_values(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(everything_stdio))
        client = await logged_in_client(alice)
        call = call_tool(session, "trigger-elicitation-request")
        review = await waiting_review(session, "elicitation/create")

        page = await page_of(client, session)
        assert "Please provide inputs for the following fields:" in page
        for shown in (
            'type="email"',
            'type="url"',
            'type="date"',
            'min="1"',
            'max="100"',
            "Green Lantern",
            "Dogs",
        ):
            assert shown in page
        assert 'value="It was a dark and stormy night."' in page

        answer = QueryDict(mutable=True)
        answer.update({"action": "accept", "f-integer": "500", "f-email": "ada@example.com"})
        invalid = await client.post(
            url(session, review, "elicitation"),
            answer.urlencode(),
            content_type="application/x-www-form-urlencoded",
        )
        body = invalid.content.decode()
        assert invalid.status_code == 422
        assert "String is required" in body and "Integer must be at most 100" in body
        assert (await PendingReview.objects.aget(pk=review.pk)).status == "waiting"

        answer.update({"f-name": "Ada <Lovelace>", "f-integer": "7", "f-check": "1", "f-number": "2.5"})
        answer.setlist("f-untitledMultipleSelectEnum", ["Piano", "Drums"])
        answer["f-integer"] = "7"
        response = await client.post(
            url(session, review, "elicitation"),
            answer.urlencode(),
            content_type="application/x-www-form-urlencoded",
        )
        assert response.status_code == 200
        text = await tool_text(call)
        assert (
            "Name: Ada <Lovelace>" in text
            and "Favorite Integer: 7" in text
            and "Agreed to terms: true" in text
        )
        done = await resolved(review)
        assert done.answered_by_id == alice.pk and done.edited
        content = done.answer["content"]
        assert content["integer"] == 7 and content["number"] == 2.5 and content["check"] is True
        assert content["untitledMultipleSelectEnum"] == ["Piano", "Drums"]


async def test_an_elicitation_can_be_accepted_declined_or_cancelled(sdk_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(sdk_stdio))
        client = await logged_in_client(alice)
        for action, expected in [("decline", "elicitation decline"), ("cancel", "elicitation cancel")]:
            call = call_tool(session, "ask_name")
            review = await waiting_review(session, "elicitation/create")
            response = await client.post(url(session, review, "elicitation"), {"action": action})
            assert response.status_code == 200
            assert expected in await tool_text(call)
            assert (await resolved(review)).answer == {"action": action}

        call = call_tool(session, "ask_name")
        review = await waiting_review(session, "elicitation/create")
        assert "What is your name?" in await page_of(client, session)
        response = await client.post(
            url(session, review, "elicitation"), {"action": "accept", "f-name": "Ada"}
        )
        assert response.status_code == 200
        assert "Hello, Ada!" in await tool_text(call)


async def test_a_url_elicitation_shows_its_link_only_after_consent(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(everything_stdio))
        client = await logged_in_client(alice)
        call = call_tool(session, "trigger-url-elicitation", {"url": "https://example.com/x"})
        review = await waiting_review(session, "elicitation/create")
        page = await page_of(client, session)
        assert "https://example.com/x" in page and 'href="https://example.com/x"' not in page
        assert "show the link" in page

        consented = (await client.post(url(session, review, "consent"))).content.decode()
        assert 'href="https://example.com/x" target="_blank" rel="noopener noreferrer"' in consented
        response = await client.post(url(session, review, "elicitation"), {"action": "accept"})
        assert response.status_code == 200
        assert "User completed the URL elicitation flow" in await tool_text(call)
        assert (await resolved(review)).answer == {"action": "accept"}


async def test_a_url_elicitation_with_a_javascript_url_cannot_be_opened_or_accepted(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(everything_stdio))
        client = await logged_in_client(alice)
        call = call_tool(session, "trigger-url-elicitation", {"url": "javascript:alert(1)"})
        review = await waiting_review(session, "elicitation/create")
        page = await page_of(client, session)
        assert "not http(s)" in page and 'href="javascript' not in page

        consent = await client.post(url(session, review, "consent"))
        assert consent.status_code == 422 and "href" not in consent.content.decode()
        accept = await client.post(url(session, review, "elicitation"), {"action": "accept"})
        assert accept.status_code == 422
        response = await client.post(url(session, review, "elicitation"), {"action": "decline"})
        assert response.status_code == 200
        assert "declined" in await tool_text(call)


async def test_an_elicitation_in_an_undeclared_mode_is_refused_at_once_and_nothing_waits() -> None:
    bad_shapes = SERVERS / "bad_shapes.py"
    form_only = {"elicitation_form": True, "elicitation_url": False, "review_roots": False}
    async with live_runtime():
        alice = await make_user()
        session = await start_session(
            alice, stdio_config(sys.executable, [str(bad_shapes), "elicit"], capabilities=form_only)
        )
        client = await logged_in_client(alice)
        text = await tool_text(call_tool(session, "ask"))
        page = await page_of(client, session)
        [asked] = await frames_of(session, method="elicitation/create", direction="in")
    assert json.loads(text)["code"] == -32602
    assert not await PendingReview.objects.filter(session=session).aexists()
    assert 'data-count="0"' in page
    assert [v["code"] for v in asked.verdicts] == ["undeclared-capability"]


async def test_an_elicitation_whose_schema_nests_an_object_is_refused_and_no_form_is_offered() -> None:
    bad_shapes = SERVERS / "bad_shapes.py"
    async with live_runtime():
        alice = await make_user()
        session = await start_session(
            alice,
            stdio_config(
                sys.executable, [str(bad_shapes), "nested-elicit"], capabilities={"review_roots": False}
            ),
        )
        client = await logged_in_client(alice)
        text = await tool_text(call_tool(session, "ask"))
        page = await page_of(client, session)
        [asked] = await frames_of(session, method="elicitation/create", direction="in")
    assert json.loads(text)["code"] == -32602
    assert not await PendingReview.objects.filter(session=session).aexists()
    assert 'data-count="0"' in page and 'name="f-address"' not in page
    assert "elicitation-schema" in [v["code"] for v in asked.verdicts]


# --- roots -------------------------------------------------------------------------------------------------


async def test_a_reviewed_roots_request_sends_the_edited_roots_and_keeps_them(sdk_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        start = [{"uri": "file:///srv/one", "name": "One"}]
        session = await start_session(alice, config(sdk_stdio, review_roots=True), roots=start)
        client = await logged_in_client(alice)
        call = call_tool(session, "list_roots")
        review = await waiting_review(session, "roots/list")
        page = await page_of(client, session)
        assert "file:///srv/one One" in page and "Send roots" in page

        bad = await client.post(url(session, review, "roots"), {"roots": "https://example.com/"})
        assert bad.status_code == 422 and "not a file:// URI" in bad.content.decode()

        edited = "file:///srv/one One\nfile:///srv/two   Two & more\n"
        response = await client.post(url(session, review, "roots"), {"roots": edited})
        assert response.status_code == 200
        sent = json.loads(await tool_text(call))
        assert sent["roots"] == [
            {"uri": "file:///srv/one", "name": "One"},
            {"uri": "file:///srv/two", "name": "Two & more"},
        ]
        done = await resolved(review)
        assert done.edited and done.answered_by_id == alice.pk
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).roots == sent["roots"])

        call = call_tool(session, "list_roots")
        review = await waiting_review(session, "roots/list")
        assert "file:///srv/two Two &amp; more" in await page_of(client, session)
        assert (await client.post(url(session, review, "reject"))).status_code == 200
        assert "User rejected roots request" in await tool_text(call)


async def test_the_roots_panel_saves_roots_and_tells_the_server(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, config(everything_stdio))
        client = await logged_in_client(alice)
        panel = (await client.get(f"/s/{session.public_id}/panel/roots")).content.decode()
        assert "declared: saving sends" in panel and "answered automatically" in panel

        bad = await client.post(f"/s/{session.public_id}/roots", {"roots": "/tmp no-scheme"})
        assert bad.status_code == 422 and "not a file:// URI" in bad.content.decode()

        response = await client.post(f"/s/{session.public_id}/roots", {"roots": "file:///work/app App <x>"})
        body = response.content.decode()
        assert response.status_code == 200 and "Saved" in body and "App &lt;x&gt;" in body
        await wait_until(
            lambda: session.frames.filter(method="notifications/roots/list_changed", direction="out").exists()
        )
        # server-everything asks again after list_changed; its next roots/list answer carries the new root.
        await wait_until(
            lambda: any(
                "file:///work/app" in f.text
                for f in session.frames.filter(direction="out", rpc_kind="result")
            )
        )
        assert "file:///work/app" in await tool_text(call_tool(session, "get-roots-list"))


# --- the form builder (no server) --------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 2, "maxLength": 5},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "ratio": {"type": "number"},
        "ok": {"type": "boolean", "default": True},
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "tags": {
            "type": "array",
            "items": {"anyOf": [{"const": "a", "title": "A"}, {"const": "b"}]},
            "maxItems": 1,
        },
    },
    "required": ["name", "color"],
}


def form(**values: Any) -> QueryDict:
    data = QueryDict(mutable=True)
    for key, value in values.items():
        if isinstance(value, list):
            data.setlist(f"f-{key}", value)
        else:
            data[f"f-{key}"] = value
    return data


def test_fields_follow_the_schema_kinds_defaults_and_choices() -> None:
    fields = {f.name: f for f in fields_of(SCHEMA)}
    assert [fields[n].kind for n in SCHEMA["properties"]] == [
        "text",
        "number",
        "number",
        "checkbox",
        "datetime-local",
        "date",
        "select",
        "multi",
    ]
    assert fields["color"].options == [("r", "Red"), ("g", "Green")] and fields["color"].required
    assert fields["tags"].options == [("a", "A"), ("b", "b")]
    assert fields["ok"].checked and fields["name"].limits == "2–5 characters"


def test_valid_input_becomes_typed_content() -> None:
    content, fields = validate(
        SCHEMA,
        form(
            name="Ada",
            age="36",
            ratio="0.5",
            when="2025-01-02T03:04",
            day="2025-01-02",
            color="g",
            tags=["a"],
        ),
    )
    assert not any(f.error for f in fields)
    assert content == {
        "name": "Ada",
        "age": 36,
        "ratio": 0.5,
        "ok": False,
        "when": "2025-01-02T03:04:00Z",
        "day": "2025-01-02",
        "color": "g",
        "tags": ["a"],
    }


def test_invalid_input_gets_a_message_per_field() -> None:
    _, fields = validate(
        SCHEMA, form(name="A", age="1.5", ratio="x", day="tomorrow", color="blue", tags=["a", "b"])
    )
    errors = {f.name: f.error for f in fields if f.error}
    assert errors == {
        "name": "name must be at least 2 characters",
        "age": "age must be a whole number",
        "ratio": "ratio must be a number",
        "day": "day must be a date (YYYY-MM-DD)",
        "color": "color is not one of the choices",
        "tags": "tags allows at most 1 choices",
    }
    _, fields = validate(SCHEMA, form(age="200"))
    errors = {f.name: f.error for f in fields if f.error}
    assert errors == {
        "name": "name is required",
        "age": "age must be at most 150",
        "color": "color is required",
    }


# --- drafting a sampling reply with a model ----------------------------------------------------------------

FAKE_LLM = SERVERS / "fake_llm.py"


@pytest.fixture
def fake_llm(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The stand-in chat completions API (an LLM provider cannot run here); yields its URL and its log."""
    port = free_port()
    log = tmp_path / "llm-requests.jsonl"
    with start_http_server([sys.executable, str(FAKE_LLM), str(port), str(log)], port):
        yield f"http://127.0.0.1:{port}/v1", log


@contextlib.asynccontextmanager
async def drafting(spec: dict, base: str, key: str = "test-key") -> AsyncIterator[tuple[McpSession, Any]]:
    """Alice's live session on ``spec`` and her client, with the stand-in at ``base`` as the installation's
    model (``fake-model``), called with ``key``."""
    with override_settings(
        INSPECTOR_LLM_URL=base, INSPECTOR_LLM_MODEL="fake-model", INSPECTOR_LLM_API_KEY=key
    ):
        async with live_runtime():
            alice = await make_user()
            session = await start_session(alice, config(spec))
            yield session, await logged_in_client(alice)


async def test_a_model_drafts_the_sampling_reply_and_the_person_approves_it(
    everything_stdio: dict, fake_llm: tuple[str, Path]
) -> None:
    base, log = fake_llm
    async with drafting(everything_stdio, base) as (session, client):
        call = call_tool(session, "trigger-sampling-request", {"prompt": "Tea or coffee?", "maxTokens": 77})
        review = await waiting_review(session, "sampling/createMessage")
        page = await page_of(client, session)
        assert "Draft with fake-model" in page and "test-key" not in page

        card = (await client.post(url(session, review, "draft"))).content.decode()
        assert "Drafted by <strong>fake-model-1</strong>" in card
        drafted = "Drafted: Resource trigger-sampling-request context: Tea or coffee?"
        assert drafted in card and 'value="endTurn"' in card
        sent = json.loads(log.read_text().splitlines()[-1])
        assert sent["model"] == "fake-model" and sent["max_tokens"] == 77 and sent["temperature"] == 0.7
        assert sent["messages"][0] == {"role": "system", "content": "You are a helpful test server."}
        assert sent["messages"][-1] == {"role": "user", "content": drafted.removeprefix("Drafted: ")}

        draft_sha = re.search(r'name="draft_sha" value="([0-9a-f]{64})"', card)
        assert draft_sha
        answer = {
            "text": drafted,
            "model": "fake-model-1",
            "stop_reason": "endTurn",
            "drafted_by": "fake-model-1",
            "draft_sha": draft_sha[1],
        }
        response = await client.post(url(session, review, "sampling"), answer)
        assert response.status_code == 200
        assert drafted in await tool_text(call)
        await resolved(review)
        frames = await frames_when(
            session, direction="out", rpc_kind="result", method="sampling/createMessage"
        )
        assert frames and frames[-1].note == "drafted by fake-model-1, approved by alice"


async def test_the_card_drafts_with_the_teams_own_model_when_chosen_and_never_another_teams(
    everything_stdio: dict, fake_llm: tuple[str, Path]
) -> None:
    base, log = fake_llm
    async with drafting(everything_stdio, base) as (session, client):
        await TeamModel.objects.acreate(
            team_id=session.team_id,
            name="ours",
            label="Our team's model",
            url=base,
            model="team-x",
            api_key="test-key",
        )
        other = await Team.objects.acreate(name="another team")
        await TeamModel.objects.acreate(
            team=other, name="theirs", url=base, model="their-x", api_key="test-key"
        )
        call = call_tool(session, "trigger-sampling-request", {"prompt": "Tea?", "maxTokens": 50})
        review = await waiting_review(session, "sampling/createMessage")
        page = await page_of(client, session)
        picker = re.search(
            r'<select id="review-\d+-draft-model" name="draft_model">(.*?)</select>', page, re.S
        )
        assert picker, "two models: the card lets the person choose"
        assert re.findall(r'<option value="([^"]+)"', picker[1]) == ["default", "ours"]
        assert "Our team&#x27;s model" in picker[1] and "theirs" not in page and "test-key" not in page

        card = (await client.post(url(session, review, "draft"), {"draft_model": "ours"})).content.decode()
        assert "Drafted: Resource trigger-sampling-request context: Tea?" in card
        assert json.loads(log.read_text().splitlines()[-1])["model"] == "team-x"
        assert '<option value="ours" selected>' in card  # the card keeps the person's choice

        refused = await client.post(url(session, review, "draft"), {"draft_model": "theirs"})
        assert refused.status_code == 422 and "no model named &#x27;theirs&#x27;" in refused.content.decode()
        assert json.loads(log.read_text().splitlines()[-1])["model"] == "team-x"  # nothing went to it
        await client.post(url(session, review, "reject"))
        await asyncio.wait_for(call, CALL_WAIT)


async def test_a_model_drafts_a_tool_use_and_then_its_answer_from_the_tools_result(tmp_path: Path) -> None:
    """The draft offers the model the request's tools; its tool call fills the card's tool use, and the
    next request's tool use and result reach it as its own call and the tool's answer."""
    steps = [
        {"match": "sunny in Oslo", "text": "Sunny in Oslo."},
        {"tool_calls": [{"id": "call_7", "name": "get_weather", "arguments": {"city": "Oslo"}}]},
    ]
    script, log = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script.write_text(json.dumps({"key": "test-key", "steps": steps}))
    port = free_port()
    model = [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)]
    with start_http_server(model, port):
        async with drafting(sampling_tools(), f"http://127.0.0.1:{port}/v1") as (session, client):
            call = call_tool(session, "forecast", {"city": "Oslo"})
            review = await waiting_review(session, "sampling/createMessage")
            card = (await client.post(url(session, review, "draft"))).content.decode()
            assert '<option value="get_weather" selected>get_weather</option>' in card
            assert "&quot;city&quot;: &quot;Oslo&quot;" in card and 'value="toolUse"' in card
            sent = json.loads(log.read_text().splitlines()[-1])
            assert [t["function"]["name"] for t in sent["tools"]] == ["get_weather"]
            sha = re.search(r'name="draft_sha" value="([0-9a-f]{64})"', card)
            assert sha
            answer = {
                "text": "",
                "model": "gpt-scripted",
                "stop_reason": "toolUse",
                "tool_name": "get_weather",
                "tool_input": '{\r\n  "city": "Oslo"\r\n}',  # as a browser sends a textarea
                "drafted_by": "gpt-scripted",
                "draft_sha": sha[1],
            }
            assert (await client.post(url(session, review, "sampling"), answer)).status_code == 200
            done = await resolved(review)
            assert done.answer["content"] == [
                {
                    "type": "tool_use",
                    "id": done.answer["content"][0]["id"],
                    "name": "get_weather",
                    "input": {"city": "Oslo"},
                }
            ]
            frames = await frames_of(
                session, direction="out", rpc_kind="result", method="sampling/createMessage"
            )
            assert frames and frames[-1].note == "drafted by gpt-scripted, approved by alice"

            again = await wait_until(
                lambda: PendingReview.objects.filter(
                    session=session, method="sampling/createMessage", status="waiting"
                ).first(),
                what="the second sampling request",
            )
            card = (await client.post(url(session, again, "draft"))).content.decode()
            assert "Sunny in Oslo." in card
            sent = json.loads(log.read_text().splitlines()[-1])
            assistant, tool = sent["messages"][-2:]
            assert (
                assistant["role"] == "assistant"
                and assistant["tool_calls"][0]["function"]["name"] == "get_weather"
            )
            assert tool["role"] == "tool" and tool["content"] == "sunny in Oslo"
            assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
            reply = {"text": "Sunny in Oslo.", "model": "gpt-scripted", "stop_reason": "endTurn"}
            assert (await client.post(url(session, again, "sampling"), reply)).status_code == 200
            assert await tool_text(call) == "gpt-scripted: Sunny in Oslo."


async def test_a_draft_that_fails_says_why_and_the_card_stays(
    everything_stdio: dict, fake_llm: tuple[str, Path]
) -> None:
    base, _ = fake_llm
    async with drafting(everything_stdio, base, key="wrong") as (session, client):
        call = call_tool(session, "trigger-sampling-request", {"prompt": "hi", "maxTokens": 5})
        review = await waiting_review(session, "sampling/createMessage")
        response = await client.post(url(session, review, "draft"))
        text = response.content.decode()
        assert response.status_code == 422 and "Draft failed:" in text and "HTTP 401" in text
        assert "wrong" not in text  # the key never reaches a page
        await client.post(url(session, review, "reject"))
        await asyncio.wait_for(call, CALL_WAIT)
    with override_settings(INSPECTOR_LLM_URL="", INSPECTOR_LLM_MODEL=""):
        assert "Draft with" not in render_to_string(
            "sessions/reviews/_sampling.html", {"review": review, "session": session, "form": {}}
        )
