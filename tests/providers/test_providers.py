"""The model providers' protocol code, in process: streams put together, tool calls read and mapped,
the conversation as each API takes it, errors said in words (httpx's mock transport stands for the API)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from sessions.providers import (
    ChatRequest,
    Message,
    ModelConfig,
    ProviderError,
    ToolCall,
    _anthropic,
    _openai,
    complete,
    parse_models,
    tool_specs,
)
from sessions.providers._sse import parse

OPENAI = ModelConfig("gpt", "GPT", "openai", "http://llm.test/v1", "gpt-x", "sk-secret-1", timeout=5.0)
ANTHROPIC = ModelConfig("claude", "Claude", "anthropic", "http://llm.test/v1", "claude-x", "sk-ant-2", 5.0)
ECHO = {"name": "echo", "description": "Echoes", "inputSchema": {"type": "object", "properties": {"m": {}}}}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return "data: " + json.dumps(
        {"model": "gpt-x-1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    )


def test_sse_events_are_cut_at_blank_lines_with_comments_and_multiline_data() -> None:
    events = parse(": keep-alive\nevent: a\ndata: 1\ndata: 2\n\ndata: {}\n\ndata: last")
    assert [(e.event, e.data) for e in events] == [("a", "1\n2"), ("message", "{}"), ("message", "last")]


def test_an_openai_stream_assembles_text_and_tool_calls_whose_arguments_come_in_pieces() -> None:
    assembler = _openai.StreamAssembler()
    lines = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Let me "}),
        _chunk({"content": "check."}),
        _chunk({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "echo", "arguments": ""}}]}),
        _chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "call_b", "function": {"name": "get-sum", "arguments": '{"a"'}}
                ]
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"m": "h'}}]}),
        _chunk({"tool_calls": [{"index": 1, "function": {"arguments": ': 2, "b": 3}'}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'i"}'}}]}),
        _chunk({}, "tool_calls"),
        'data: {"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9}}',
        "data: [DONE]",
    ]
    for event in parse("\n\n".join(lines)):
        assembler.feed(event.data)
    reply = assembler.result()
    assert assembler.done and reply.text == "Let me check." and reply.stop == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call_a", "echo", {"m": "hi"}),
        ("call_b", "get-sum", {"a": 2, "b": 3}),
    ]
    assert (reply.model, reply.input_tokens, reply.output_tokens) == ("gpt-x-1", 40, 9)


def test_malformed_tool_arguments_keep_what_came_and_say_what_is_wrong() -> None:
    answer = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [
                        {"id": "1", "function": {"name": "echo", "arguments": '{"m": '}},
                        {"id": "2", "function": {"name": "echo", "arguments": "[1]"}},
                        {"id": "3", "function": {"name": "echo", "arguments": ""}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ]
    }
    first, second, third = _openai.parse_response(answer).tool_calls
    assert first.raw == '{"m": ' and first.problem.startswith("its arguments are not JSON")
    assert second.problem == "its arguments are not a JSON object"
    assert third.arguments == {} and not third.problem


@pytest.mark.parametrize(
    "data",
    ["not json", "[1]", '{"choices": [{"delta": []}]}', '{"error": {"message": "overloaded"}}'],
)
def test_a_garbled_openai_stream_is_a_provider_error(data: str) -> None:
    with pytest.raises(ProviderError):
        _openai.StreamAssembler().feed(data)


def test_an_anthropic_stream_assembles_text_and_a_tool_use_from_json_pieces() -> None:
    def event(kind: str, **body: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **body})}"

    stream = "\n\n".join(
        [
            event("message_start", message={"model": "claude-x-1", "usage": {"input_tokens": 30}}),
            event("ping"),
            event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": "On "}),
            event("content_block_delta", index=0, delta={"type": "text_delta", "text": "it."}),
            event("content_block_stop", index=0),
            event(
                "content_block_start",
                index=1,
                content_block={"type": "tool_use", "id": "tu_1", "name": "echo", "input": {}},
            ),
            event(
                "content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": '{"m":'}
            ),
            event(
                "content_block_delta", index=1, delta={"type": "input_json_delta", "partial_json": ' "yo"}'}
            ),
            event("content_block_stop", index=1),
            event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 12}),
            event("message_stop"),
        ]
    )
    assembler = _anthropic.StreamAssembler()
    for e in parse(stream):
        assembler.feed(e.event, e.data)
    reply = assembler.result()
    assert assembler.done and reply.text == "On it." and reply.stop == "tool_use"
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("tu_1", "echo", {"m": "yo"})]
    assert (reply.model, reply.input_tokens, reply.output_tokens) == ("claude-x-1", 30, 12)


def test_an_anthropic_error_event_and_a_delta_for_no_block_are_provider_errors() -> None:
    with pytest.raises(ProviderError, match="overloaded"):
        _anthropic.StreamAssembler().feed("error", '{"type": "error", "error": {"message": "overloaded"}}')
    with pytest.raises(ProviderError, match="content_block_delta"):
        _anthropic.StreamAssembler().feed(
            "content_block_delta", '{"type": "content_block_delta", "index": 3}'
        )


CONVERSATION = [
    Message("user", "Echo hi and add 2 and 3"),
    Message(
        "assistant",
        "Sure.",
        [ToolCall("c1", "echo", {"m": "hi"}, '{"m": "hi"}'), ToolCall("c2", "get-sum", {"a": 2, "b": 3})],
    ),
    Message("tool", "hi", tool_call_id="c1"),
    Message("tool", "error: no", tool_call_id="c2", is_error=True),
    Message("user", "Thanks"),
]


def test_the_conversation_as_openai_takes_it_tools_as_functions() -> None:
    request = ChatRequest("Be brief.", CONVERSATION, tool_specs([ECHO]), 0.2)
    body = _openai.body(OPENAI, request, stream=True)
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][2]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "echo", "arguments": '{"m": "hi"}'},
    }
    assert json.loads(body["messages"][2]["tool_calls"][1]["function"]["arguments"]) == {"a": 2, "b": 3}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "hi"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "echo", "description": "Echoes", "parameters": ECHO["inputSchema"]},
        }
    ]
    assert body["stream"] is True and body["temperature"] == 0.2


def test_the_conversation_as_anthropic_takes_it_tool_results_and_words_in_one_user_turn() -> None:
    body = _anthropic.body(
        ANTHROPIC, ChatRequest("Be brief.", CONVERSATION, tool_specs([ECHO])), stream=False
    )
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "c1",
        "name": "echo",
        "input": {"m": "hi"},
    }
    results = body["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert results[1] == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": "error: no",
        "is_error": True,
    }
    assert body["system"] == "Be brief." and body["tools"][0]["input_schema"] == ECHO["inputSchema"]
    assert "temperature" not in body and body["max_tokens"] == 4096


def test_mcp_tools_are_named_as_the_apis_allow_uniquely_with_a_schema_each() -> None:
    specs = tool_specs(
        [
            ECHO,
            {"name": "files/read.v2", "inputSchema": {"type": "object"}},
            {"name": "files_read_v2"},
            {"name": "x" * 80, "title": "Long", "inputSchema": "nonsense"},
            {"title": "no name"},
        ]
    )
    assert [(s.name, s.mcp_name) for s in specs] == [
        ("echo", "echo"),
        ("files_read_v2", "files/read.v2"),
        ("files_read_v2_2", "files_read_v2"),
        ("x" * 64, "x" * 80),
    ]
    assert specs[2].input_schema == {"type": "object", "properties": {}} and specs[3].description == "Long"


def test_models_come_from_the_drafting_settings_and_a_json_list() -> None:
    text = json.dumps(
        [
            {
                "name": "claude",
                "api": "anthropic",
                "url": "https://api.anthropic.com/v1",
                "model": "c",
                "api_key": "k",
            },
            {"url": "http://localhost:11434/v1", "model": "llama3.1", "timeout": 30},
        ]
    )
    models = parse_models(text, "http://gw/v1", "gpt-4o", "sk-1")
    assert [(c.key, c.api, c.model, c.timeout) for c in models] == [
        ("default", "openai", "gpt-4o", 120.0),
        ("claude", "anthropic", "c", 120.0),
        ("llama3.1", "openai", "llama3.1", 30.0),
    ]
    assert "sk-1" not in repr(models) and "'k'" not in repr(models)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{", "not JSON"),
        ('{"a": 1}', "a JSON list"),
        ('[{"url": "http://x", "model": "m", "api": "bard"}]', "api must be one of"),
        ('[{"url": "ftp://x", "model": "m"}]', "url must start with"),
        ('[{"url": "http://x", "model": "m"}, {"url": "http://y", "model": "m"}]', "used twice"),
        ('[{"url": "http://x", "model": "m", "timeout": 0, "api_key": "sk-9"}]', "timeout"),
    ],
)
def test_a_wrong_model_list_says_which_entry_and_why_without_its_key(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said) as caught:
        parse_models(text)
    assert "sk-9" not in str(caught.value)


def _transport(status: int, body: bytes, kind: str, seen: list[httpx.Request]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status, content=body, headers={"content-type": kind})

    return httpx.MockTransport(handler)


async def test_complete_streams_from_openai_with_the_key_in_its_header_only() -> None:
    seen: list[httpx.Request] = []
    stream = "\n\n".join([_chunk({"content": "Hello"}), _chunk({}, "stop"), "data: [DONE]"]).encode()
    request = ChatRequest("", [Message("user", "hi")], tool_specs([ECHO]))
    reply = await complete(OPENAI, request, transport=_transport(200, stream, "text/event-stream", seen))
    assert reply.text == "Hello" and reply.stop == "end"
    assert str(seen[0].url) == "http://llm.test/v1/chat/completions"
    assert seen[0].headers["authorization"] == "Bearer sk-secret-1"
    assert b"sk-secret-1" not in seen[0].content and json.loads(seen[0].content)["stream"] is True


async def test_complete_reads_a_whole_anthropic_answer_when_the_server_does_not_stream() -> None:
    seen: list[httpx.Request] = []
    answer = {"model": "c-1", "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn"}
    reply = await complete(
        ANTHROPIC,
        ChatRequest("", [Message("user", "hi")], []),
        transport=_transport(200, json.dumps(answer).encode(), "application/json", seen),
    )
    assert (reply.text, reply.stop, reply.model) == ("Hi", "end", "c-1")
    assert seen[0].headers["x-api-key"] == "sk-ant-2" and seen[0].headers["anthropic-version"]


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (401, b'{"error": {"message": "bad key sk-secret-1"}}', "GPT answered HTTP 401: bad key [redacted]"),
        (200, b"<html>gateway</html>", "GPT answered something that is not JSON"),
        (200, b'{"choices": []}', "the answer is not a chat completion"),
        (502, b"upstream down", "GPT answered HTTP 502: upstream down"),
    ],
)
async def test_complete_says_why_there_is_no_answer(status: int, body: bytes, said: str) -> None:
    with pytest.raises(ProviderError) as caught:
        await complete(
            OPENAI, ChatRequest("", [], []), transport=_transport(status, body, "application/json", [])
        )
    assert said in str(caught.value) and "sk-secret-1" not in str(caught.value)


async def test_a_model_that_does_not_answer_in_time_says_so() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(ProviderError, match="did not answer within 5 s"):
        await complete(OPENAI, ChatRequest("", [], []), transport=httpx.MockTransport(handler))


async def test_a_streamed_answer_s_text_is_heard_as_it_grows_in_both_apis() -> None:
    heard: list[str] = []

    async def on_text(text: str) -> None:
        heard.append(text)

    stream = "\n\n".join([_chunk({"content": "Hel"}), _chunk({"tool_calls": []}), _chunk({"content": "lo"})])
    transport = _transport(200, stream.encode(), "text/event-stream", [])
    await complete(OPENAI, ChatRequest("", [], []), transport=transport, on_text=on_text)
    assert heard == ["Hel", "Hello"]

    heard.clear()
    events = [
        ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
        (
            "content_block_start",
            {"index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "echo"}},
        ),
        ("content_block_delta", {"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{}"}}),
        ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": " there"}}),
    ]
    stream = "\n\n".join(f"event: {k}\ndata: {json.dumps({'type': k, **b})}" for k, b in events)
    transport = _transport(200, stream.encode(), "text/event-stream", [])
    reply = await complete(ANTHROPIC, ChatRequest("", [], []), transport=transport, on_text=on_text)
    assert heard == ["Hi", "Hi there"] and reply.tool_calls[0].name == "echo"


async def test_a_stream_that_trickles_past_the_timeout_is_cut() -> None:
    ticks = iter([0.0, 1.0, 6.0, 7.0])
    stream = "\n\n".join([_chunk({"content": "a"}), _chunk({"content": "b"}), _chunk({"content": "c"})])
    transport = _transport(200, stream.encode(), "text/event-stream", [])
    with pytest.raises(ProviderError, match="GPT did not finish its answer within 5 s"):
        await complete(OPENAI, ChatRequest("", [], []), transport=transport, clock=lambda: next(ticks))


async def test_a_model_at_an_address_that_is_not_one_says_so() -> None:
    broken = ModelConfig("b", "Broken", "openai", "http://[::1/v1", "m")
    with pytest.raises(
        ProviderError, match="cannot reach Broken at http://\\[::1/v1/chat/completions: InvalidURL"
    ):
        await complete(broken, ChatRequest("", [], []))


def test_a_sampling_request_that_requires_a_tool_use_makes_both_apis_require_a_call() -> None:
    from sessions.playground.sampling import sampling_request

    params: dict[str, Any] = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Weather?"}}],
        "maxTokens": 50,
        "tools": [{"name": "get.weather", "inputSchema": {"type": "object"}}],
    }
    for mode, openai, anthropic in (("required", "required", {"type": "any"}), ("auto", None, None)):
        request = sampling_request({**params, "toolChoice": {"mode": mode}})
        assert [t.name for t in request.tools] == ["get_weather"]  # named as the APIs allow
        assert _openai.body(OPENAI, request, stream=False).get("tool_choice") == openai
        assert _anthropic.body(ANTHROPIC, request, stream=False).get("tool_choice") == anthropic
    assert sampling_request({**params, "toolChoice": {"mode": "none"}}).tools == []
