"""A chat's logic without a model or a server: what the model is sent, which step comes next, which
calls wait for the person, a tool result in words."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from support.teams import team_of

from inspector.checks import check_llm_models
from sessions.models import McpSession
from sessions.playground.models import Chat, ChatEntry
from sessions.playground.transcript import conversation, result_text
from sessions.playground.turns import _claim, _release, needs_approval, next_work

Kind, Status = ChatEntry.Kind, ChatEntry.Status


def entry(kind: str, text: str = "", **fields: Any) -> ChatEntry:
    return ChatEntry(kind=kind, text=text, **fields)


def call(status: str, call_id: str = "c1", **fields: Any) -> ChatEntry:
    return entry(Kind.TOOL, call_id=call_id, tool_name="echo", status=status, **fields)


def test_the_model_is_sent_its_calls_with_their_results_and_no_error_lines() -> None:
    entries = [
        entry(Kind.USER, "hi"),
        entry(Kind.ERROR, "GPT did not answer within 5 s"),
        entry(Kind.USER, "again"),
        entry(Kind.ASSISTANT, "Calling."),
        call(Status.DONE, "c1", arguments={"m": "x"}, raw_arguments='{"m": "x"}', text="x"),
        call(Status.INVALID, "c2", arguments={}, raw_arguments='{"m": ', text="not JSON", is_error=True),
    ]
    user, again, assistant, first, second = conversation(entries)
    assert (user.text, again.text) == ("hi", "again")
    assert [(c.id, c.arguments, c.raw) for c in assistant.tool_calls] == [
        ("c1", {"m": "x"}, '{"m": "x"}'),
        ("c2", {}, ""),
    ]
    assert (first.role, first.tool_call_id, first.text, first.is_error) == ("tool", "c1", "x", False)
    assert (second.tool_call_id, second.is_error) == ("c2", True)


@pytest.mark.parametrize(
    ("entries", "work"),
    [
        ([], ""),
        ([entry(Kind.USER, "hi")], "model"),
        ([entry(Kind.USER), entry(Kind.ASSISTANT, "done")], ""),
        ([entry(Kind.USER), entry(Kind.ASSISTANT), call(Status.APPROVED), call(Status.PENDING)], "tools"),
        ([entry(Kind.USER), entry(Kind.ASSISTANT), call(Status.DONE), call(Status.PENDING)], ""),
        ([entry(Kind.USER), entry(Kind.ASSISTANT), call(Status.DONE), call(Status.DENIED)], "model"),
        ([entry(Kind.USER), entry(Kind.ERROR, "timeout")], ""),
    ],
)
def test_the_next_step(entries: list[ChatEntry], work: str) -> None:
    assert next_work(entries) == work


@pytest.mark.parametrize(
    ("approval", "annotations", "waits"),
    [
        ("writes", {"readOnlyHint": True}, False),
        ("writes", {"readOnlyHint": False}, True),
        ("writes", {"readOnlyHint": "true"}, True),  # a hint that is not a boolean is no hint
        ("writes", None, True),
        ("all", {"readOnlyHint": True}, True),
        ("none", {"destructiveHint": True}, False),
    ],
)
def test_which_calls_wait_for_the_person(approval: str, annotations: Any, waits: bool) -> None:
    tool = {"name": "t"} if annotations is None else {"name": "t", "annotations": annotations}
    assert needs_approval(Chat(approval=approval), tool) is waits


def test_a_tool_result_in_words() -> None:
    result = {
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///a"},
        ]
    }
    assert result_text(result) == "one\n[image content]\n[resource link file:///a]"
    assert result_text({"content": [], "structuredContent": {"sum": 5}}) == '{"sum": 5}'
    assert result_text(None, {"code": -32602, "message": "bad params"}) == "error: bad params"
    assert len(result_text({"content": [{"type": "text", "text": "x" * 50_000}]})) == 20_000


@pytest.mark.django_db
def test_one_step_at_a_time_per_chat_and_a_claim_that_outlived_its_step_lapses() -> None:
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="s", config={})
    chat = Chat.objects.create(session=session, team=session.team, model_key="m")
    assert _claim(chat.pk, 60) and not _claim(chat.pk, 60)
    _release(chat.pk)
    assert _claim(chat.pk, -1)
    assert _claim(chat.pk, 60)  # the claim before has lapsed (its step's process died, say)


def test_a_wrong_model_list_stops_the_start_with_its_reason(settings: Any) -> None:
    wrong = {"url": "http://x/v1", "model": "m", "api": "gemini", "api_key": "sk-7"}
    settings.INSPECTOR_LLM_MODELS = json.dumps([wrong])
    [error] = check_llm_models()
    assert error.id == "inspector.E006" and "model 1: api must be one of" in error.msg
    assert "sk-7" not in error.msg
    settings.INSPECTOR_LLM_MODELS = '[{"url": "http://x/v1", "model": "m"}]'
    assert check_llm_models() == []
