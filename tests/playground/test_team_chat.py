"""The pure parts of a chat over several sessions: one tool list from their listings with the shared
names told apart, the prefixes, an answer's cost from the configured prices, a sampling request as the
model's request and its answer as the server's result, and the next step with a sampling entry in."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings

from inspector.checks import check_llm_models
from sessions.playground.costs import cost_of, parse_prices
from sessions.playground.models import ChatEntry
from sessions.playground.routing import combine, prefix_for, unique_prefixes
from sessions.playground.sampling import sampling_request, sampling_result
from sessions.playground.turns import next_work
from sessions.providers import ModelConfig, Reply, _anthropic, _openai, tool_specs
from sessions.web.llm import preferred

Kind, Status = ChatEntry.Kind, ChatEntry.Status


def tool(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "inputSchema": {"type": "object"}, **fields}


def test_a_name_two_sessions_offer_is_prefixed_for_each_and_routed_to_its_session() -> None:
    read_only = {"readOnlyHint": True}
    offered, routes = combine(
        [
            (1, "everything", [tool("echo", annotations=read_only), tool("get-sum")]),
            (2, "sdk_test_server", [tool("echo"), tool("add"), tool("add"), {"title": "no name"}]),
        ]
    )
    names = [t["name"] for t in offered]
    assert names == ["everything__echo", "get-sum", "sdk_test_server__echo", "add"]
    assert (routes["everything__echo"].session_id, routes["everything__echo"].mcp_name) == (1, "echo")
    assert (routes["sdk_test_server__echo"].session_id, routes["add"].session_id) == (2, 2)
    assert routes["everything__echo"].tool["annotations"] == read_only
    # The model sees the prefixed names as they are: letters, digits, _ and - only.
    assert [spec.name for spec in tool_specs(offered)] == names


def test_one_session_offers_its_tools_under_their_own_names() -> None:
    offered, routes = combine([(7, "", [tool("files/read"), tool("echo")])])
    assert [t["name"] for t in offered] == ["files/read", "echo"]
    assert routes["files/read"].mcp_name == "files/read"


def test_prefixes_come_from_the_server_names_and_two_sessions_of_one_server_are_numbered() -> None:
    assert prefix_for("mcp-servers/everything", "s1") == "everything"
    assert prefix_for("SDK Test Server!", "s1") == "sdk_test_server"
    assert prefix_for("…", "s3") == "s3"
    assert unique_prefixes(["everything", "mcp-servers/everything", "", "x" * 40]) == [
        "everything",
        "everything2",
        "s3",
        "x" * 20,
    ]


def test_an_answer_costs_its_tokens_at_the_configured_prices_per_million() -> None:
    text = json.dumps(
        [
            {"name": "gpt", "url": "http://x/v1", "model": "m", "input_price": 3, "output_price": 15},
            {"name": "free", "url": "http://x/v1", "model": "m"},
            {"url": "http://x/v1", "model": "half", "output_price": 1.5},
        ]
    )
    assert parse_prices(text) == {"gpt": (3.0, 15.0), "half": (0.0, 1.5)}
    with override_settings(INSPECTOR_LLM_MODELS=text):
        assert cost_of("gpt", 1_000, 100) == pytest.approx(0.0045)
        assert cost_of("half", 10, 1_000_000) == pytest.approx(1.5)
        assert cost_of("free", 1_000, 100) is None
        assert cost_of("gpt", None, 100) is None


@pytest.mark.parametrize("price", ["3", -1, True, 2_000_000])
def test_a_price_that_is_not_a_number_per_million_stops_the_start_with_the_entry(price: object) -> None:
    text = json.dumps([{"name": "gpt", "url": "http://x/v1", "model": "m", "input_price": price}])
    with pytest.raises(ValueError, match="model 1: input_price must be a number from 0 to 1000000"):
        parse_prices(text)
    with override_settings(INSPECTOR_LLM_MODELS=text):
        (error,) = check_llm_models()
    assert error.id == "inspector.E006" and "input_price" in error.msg


def test_a_sampling_request_is_asked_of_the_model_as_its_messages_and_answered_as_the_clients() -> None:
    params = {
        "systemPrompt": "Be brief.",
        "temperature": 0.2,
        "maxTokens": 100,
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "What is 2+2?"}},
            {"role": "assistant", "content": [{"type": "image", "data": "…"}]},
            {"role": "system", "content": {"type": "text", "text": "not a sampling role"}},
        ],
    }
    request = sampling_request(params, temperature=1.0)
    assert (request.system, request.temperature, request.tools) == ("Be brief.", 0.2, [])
    assert [(m.role, m.text) for m in request.messages] == [
        ("user", "What is 2+2?"),
        ("assistant", "[image content left out]"),
    ]
    assert sampling_request({"messages": []}, temperature=0.7).temperature == 0.7
    config = ModelConfig("gpt", "GPT", "openai", "http://x/v1", "gpt-4")
    assert sampling_result(Reply("Four.", stop="end", model="gpt-4-0613"), config) == {
        "role": "assistant",
        "content": {"type": "text", "text": "Four."},
        "model": "gpt-4-0613",
        "stopReason": "endTurn",
    }
    cut = sampling_result(Reply("Fo", stop="max_tokens"), config)
    assert (cut["model"], cut["stopReason"]) == ("gpt-4", "maxTokens")
    assert sampling_result(Reply("F", stop="stop_sequence"), config)["stopReason"] == "stopSequence"


def test_a_sampling_requests_token_limit_and_stop_sequences_reach_either_api_within_the_models_own() -> None:
    params = {"maxTokens": 100, "stopSequences": ["\n\n", "END", 7, ""], "messages": []}
    request = sampling_request(params)
    assert (request.max_tokens, request.stop) == (100, ("\n\n", "END"))
    small = ModelConfig("gpt", "GPT", "openai", "http://x/v1", "gpt-4", max_tokens=64)
    sent = _openai.body(small, request, stream=False)
    assert (sent["max_tokens"], sent["stop"]) == (64, ["\n\n", "END"])
    claude = ModelConfig("c", "C", "anthropic", "http://x/v1", "claude", max_tokens=4096)
    sent = _anthropic.body(claude, request, stream=False)
    assert (sent["max_tokens"], sent["stop_sequences"]) == (100, ["\n\n", "END"])
    # No limit asked: each API as before (OpenAI's own default, the model's for Anthropic).
    bare = sampling_request({"maxTokens": True, "messages": []})
    assert "max_tokens" not in _openai.body(small, bare, stream=False)
    assert _anthropic.body(claude, bare, stream=False)["max_tokens"] == 4096
    answer = {"content": [{"type": "text", "text": "a"}], "stop_reason": "stop_sequence", "model": "c"}
    assert _anthropic.parse_response(answer).stop == "stop_sequence"


def test_a_review_card_offers_first_the_model_a_sampling_requests_hints_name() -> None:
    offered = [
        {"key": "default", "label": "gpt-4o-mini", "model": "gpt-4o-mini"},
        {"key": "ours", "label": "Our Claude", "model": "claude-3-5-sonnet-20241022"},
    ]
    hinted = lambda *names: {"modelPreferences": {"hints": [{"name": n} for n in names]}}  # noqa: E731
    assert preferred(hinted("claude-3-5-sonnet"), offered) == "ours"  # a hint is part of a model's id
    assert preferred(hinted("gemini", "OUR CLAUDE"), offered) == "ours"  # the first that matches, any case
    assert preferred(hinted("gemini"), offered) == "default"
    assert preferred({"modelPreferences": {"hints": "claude"}}, offered) == "default"  # not a list: no hint
    assert preferred({}, offered) == "default" and preferred({}, []) == ""


def test_a_sampling_answer_after_a_call_leaves_the_next_turn_to_the_model() -> None:
    said = [ChatEntry(kind=Kind.USER), ChatEntry(kind=Kind.ASSISTANT)]
    done = ChatEntry(kind=Kind.TOOL, status=Status.DONE)
    assert next_work([*said, done, ChatEntry(kind=Kind.SAMPLING)]) == "model"
    assert next_work([*said, done, ChatEntry(kind=Kind.SAMPLING), ChatEntry(kind=Kind.ASSISTANT)]) == ""


def test_a_tool_an_app_keeps_for_its_views_is_not_offered_to_a_model() -> None:
    from sessions.playground.turns import for_model

    tools = [
        {"name": "both"},
        {"name": "view-only", "_meta": {"ui": {"visibility": ["app"]}}},
        {"name": "model-only", "_meta": {"ui": {"visibility": ["model"]}}},
        {"name": "odd", "_meta": {"ui": {"visibility": "app"}}},  # not a list: the default, both
    ]
    assert [t["name"] for t in for_model(tools)] == ["both", "model-only", "odd"]


def test_each_views_last_context_goes_to_the_model_after_the_system_prompt_cut_when_long() -> None:
    from sessions.playground.transcript import MAX_VIEW_CONTEXT, with_view_contexts

    shown = ChatEntry(kind=Kind.TOOL, tool_name="show_weather", call_id="call_1")
    shown.view_context = {
        "content": [{"type": "text", "text": "Oslo is shown."}, {"type": "image", "data": "…"}],
        "structuredContent": {"city": "Oslo", "shown": True},
    }
    big = ChatEntry(kind=Kind.TOOL, tool_name="show_map", call_id="call_2")
    big.view_context = {"content": [{"type": "text", "text": "x" * (MAX_VIEW_CONTEXT + 10)}]}
    quiet = ChatEntry(kind=Kind.TOOL, tool_name="echo", call_id="call_3")
    system = with_view_contexts("Be brief.", [ChatEntry(kind=Kind.USER, text="hi"), shown, quiet, big])
    first, second, third = system.split("\n\n")
    assert first == "Be brief."
    assert second == (
        "Context from the view of the show_weather call call_1:\n"
        'Oslo is shown.\n{"city": "Oslo", "shown": true}'
    )
    assert third.endswith(f"x [cut at {MAX_VIEW_CONTEXT} characters]") and len(third) < MAX_VIEW_CONTEXT + 100
    assert with_view_contexts("", [quiet]) == "" and with_view_contexts("Be brief.", []) == "Be brief."
