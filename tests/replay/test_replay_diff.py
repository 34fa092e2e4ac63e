"""What a replay counts as a change (sessions/replay), in pure functions: each rule, the list methods'
items, the values that differ from run to run, ignore paths, and the conversation a recording holds."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from sessions.replay import (
    ABSENT,
    Conversation,
    Links,
    PathError,
    Pattern,
    RecordingProblem,
    compare_answers,
    compare_asked,
    compare_latency,
    frames_of,
)


def found(method: str, recorded: dict[str, Any], replayed: dict[str, Any], **options: Any) -> list[tuple]:
    """(path, rule, recorded, replayed) of each difference."""
    return [
        (d.path, d.rule, d.recorded, d.replayed)
        for d in compare_answers(3, method, recorded, replayed, **options)
    ]


def text(value: str) -> dict[str, Any]:
    return {"result": {"content": [{"type": "text", "text": value}]}}


# --- the rules ----------------------------------------------------------------------------------------------


def test_equal_answers_have_no_differences() -> None:
    assert found("tools/call", text("hi"), text("hi")) == []


def test_an_error_where_a_result_was_is_one_difference_at_the_root() -> None:
    error = {"error": {"code": -32602, "message": "Unknown tool"}}
    assert found("tools/call", text("hi"), error) == [
        ("$", "now an error", {"content": [{"type": "text", "text": "hi"}]}, error["error"])
    ]
    assert found("tools/call", error, text("hi"))[0][:2] == ("$", "no longer an error")


def test_an_errors_code_and_message_are_compared() -> None:
    was = {"error": {"code": -32602, "message": "Unknown tool"}}
    now = {"error": {"code": -32601, "message": "Unknown tool"}}
    assert found("tools/call", was, now) == [("$.error.code", "value changed", -32602, -32601)]


def test_is_error_turning_true_is_its_own_rule() -> None:
    was = text("ok")
    now = {"result": {"content": [{"type": "text", "text": "ok"}], "isError": True}}
    assert found("tools/call", was, now) == [("$.result.isError", "isError changed", False, True)]


def test_a_tool_now_failing_is_one_difference_though_its_text_says_why() -> None:
    now = {"result": {"content": [{"type": "text", "text": "out of order"}], "isError": True}}
    assert found("tools/call", text("2.0"), now) == [("$.result.isError", "isError changed", False, True)]
    assert found("tools/call", now, text("2.0")) == [("$.result.isError", "isError changed", True, False)]


def _tool(required: list[str]) -> dict[str, Any]:
    properties = {"name": {"type": "string"}, "greeting": {"type": "string"}, "tone": {"type": "string"}}
    schema = {"type": "object", "properties": properties, "required": required}
    return {"result": {"tools": [{"name": "greet", "inputSchema": schema}]}}


def test_a_schemas_required_names_are_a_set_and_a_field_made_required_is_one_difference() -> None:
    assert found("tools/list", _tool(["name", "tone"]), _tool(["tone", "name"])) == []
    path = '$.result.tools[?(@.name=="greet")].inputSchema.required'
    # Inserted before the last name: by place, that would have read as two changes.
    assert found("tools/list", _tool(["name", "tone"]), _tool(["name", "greeting", "tone"])) == [
        (path, "required changed", ["name", "tone"], ["name", "greeting", "tone"])
    ]
    ignored = [Pattern("$..required")]
    assert found("tools/list", _tool(["name"]), _tool(["name", "tone"]), ignore=ignored) == []


def test_a_list_named_required_outside_a_schema_is_compared_by_place() -> None:
    was, now = {"result": {"required": ["a", "b"]}}, {"result": {"required": ["b", "a"]}}
    assert [f[:2] for f in found("tools/call", was, now)] == [
        ("$.result.required[0]", "value changed"),
        ("$.result.required[1]", "value changed"),
    ]


def test_a_value_of_another_json_type_is_a_type_change() -> None:
    was = {"result": {"structuredContent": {"n": 3}}}
    now = {"result": {"structuredContent": {"n": "3"}}}
    assert found("tools/call", was, now) == [("$.result.structuredContent.n", "type changed", 3, "3")]


def test_an_integer_and_a_float_of_the_same_value_are_the_same_number() -> None:
    assert found("tools/call", {"result": {"n": 3}}, {"result": {"n": 3.0}}) == []


def test_keys_added_and_removed_are_named_with_their_values() -> None:
    was = {"result": {"structuredContent": {"a": 1, "b": 2}}}
    now = {"result": {"structuredContent": {"a": 1, "c": 3}}}
    assert found("tools/call", was, now) == [
        ("$.result.structuredContent.b", "removed", 2, ABSENT),
        ("$.result.structuredContent.c", "added", ABSENT, 3),
    ]


def test_content_items_of_other_types_are_one_difference_naming_the_types() -> None:
    was = {"result": {"content": [{"type": "text", "text": "a"}, {"type": "image", "data": "x"}]}}
    now = {"result": {"content": [{"type": "text", "text": "a"}]}}
    assert found("tools/call", was, now) == [
        ("$.result.content", "content types changed", ["text", "image"], ["text"])
    ]


def test_content_items_of_the_same_types_are_compared_item_by_item() -> None:
    assert found("tools/call", text("Echo: hi"), text("Echo: hello")) == [
        ("$.result.content[0].text", "value changed", "Echo: hi", "Echo: hello")
    ]


def test_a_step_is_slower_only_past_twice_its_time_and_50_ms_more() -> None:
    assert compare_latency(2, "tools/call", 1.0, 40.0) == []  # 40 times, but 39 ms
    assert compare_latency(2, "tools/call", 100.0, 190.0) == []  # 90 ms more, but not twice
    [slower] = compare_latency(2, "tools/call", 100.0, 250.0)
    assert (slower.path, slower.rule, slower.recorded, slower.replayed) == (
        "latency_ms",
        "slower",
        100.0,
        250.0,
    )
    assert compare_latency(2, "tools/call", None, 250.0) == []
    assert compare_latency(2, "tasks/result", 100.0, 2500.0) == []  # it waits for its task to end


def test_a_difference_says_its_step_and_method_and_reads_as_json() -> None:
    [difference] = compare_answers(4, "tools/call", {"result": {"a": 1}}, {"result": {}})
    assert difference.to_dict() == {
        "step": 4,
        "method": "tools/call",
        "path": "$.result.a",
        "rule": "removed",
        "recorded": 1,
        "replayed": None,
        "absent": "replayed",
    }
    json.dumps(difference.to_dict())


# --- the list methods ---------------------------------------------------------------------------------------


def tools(*items: dict[str, Any]) -> dict[str, Any]:
    return {"result": {"tools": list(items)}}


ADD = {"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}}}
ECHO = {"name": "echo", "inputSchema": {"type": "object"}}


def test_list_items_are_matched_by_name_whatever_their_order() -> None:
    assert found("tools/list", tools(ADD, ECHO), tools(ECHO, ADD)) == []


def test_a_listed_item_added_or_removed_is_named_by_its_key() -> None:
    shout = {"name": "shout", "inputSchema": {"type": "object"}}
    assert found("tools/list", tools(ADD, ECHO), tools(ADD, shout)) == [
        ('$.result.tools[?(@.name=="echo")]', "removed", ECHO, ABSENT),
        ('$.result.tools[?(@.name=="shout")]', "added", ABSENT, shout),
    ]


def test_a_changed_item_says_which_paths_of_its_schema_changed() -> None:
    changed = json.loads(json.dumps(ADD))
    changed["inputSchema"]["properties"]["a"]["type"] = "string"
    changed["inputSchema"]["properties"]["b"] = {"type": "integer"}
    assert found("tools/list", tools(ADD), tools(changed)) == [
        (
            '$.result.tools[?(@.name=="add")].inputSchema.properties.a.type',
            "value changed",
            "integer",
            "string",
        ),
        ('$.result.tools[?(@.name=="add")].inputSchema.properties.b', "added", ABSENT, {"type": "integer"}),
    ]


def test_resources_are_matched_by_uri_and_templates_by_their_uri_template() -> None:
    was = {"result": {"resources": [{"uri": "a://1", "name": "one"}, {"uri": "a://2", "name": "two"}]}}
    now = {"result": {"resources": [{"uri": "a://2", "name": "two"}, {"uri": "a://1", "name": "uno"}]}}
    assert found("resources/list", was, now) == [
        ('$.result.resources[?(@.uri=="a://1")].name', "value changed", "one", "uno")
    ]
    templates = {"result": {"resourceTemplates": [{"uriTemplate": "g://{n}", "name": "g"}]}}
    renamed = {"result": {"resourceTemplates": [{"uriTemplate": "g://{name}", "name": "g"}]}}
    assert [f[:2] for f in found("resources/templates/list", templates, renamed)] == [
        ('$.result.resourceTemplates[?(@.uriTemplate=="g://{n}")]', "removed"),
        ('$.result.resourceTemplates[?(@.uriTemplate=="g://{name}")]', "added"),
    ]


def test_prompts_are_matched_by_name() -> None:
    was = {"result": {"prompts": [{"name": "greet", "arguments": [{"name": "who", "required": True}]}]}}
    now = {"result": {"prompts": [{"name": "greet", "arguments": [{"name": "who", "required": False}]}]}}
    assert found("prompts/list", was, now) == [
        ('$.result.prompts[?(@.name=="greet")].arguments[0].required', "value changed", True, False)
    ]


def test_the_initialize_result_is_compared_field_by_field() -> None:
    was = {"result": {"protocolVersion": "2025-11-25", "serverInfo": {"name": "s", "version": "1.0.0"}}}
    now = {
        "result": {
            "protocolVersion": "2025-06-18",
            "serverInfo": {"name": "s", "version": "1.1.0"},
            "capabilities": {"tools": {}},
            "instructions": "Use it well.",
        }
    }
    assert [f[:2] for f in found("initialize", was, now)] == [
        ("$.result.protocolVersion", "value changed"),
        ("$.result.serverInfo.version", "value changed"),
        ("$.result.capabilities", "added"),
        ("$.result.instructions", "added"),
    ]


# --- values that differ from run to run ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("was", "now"),
    [
        ("2026-11-29T17:34:59.625Z", "2026-11-30T08:01:02.003Z"),
        ("2026-11-29T17:34:59+01:00", "2026-11-29T18:00:00+02:00"),
        ("2026-11-29 17:34:59", "2027-01-01 00:00:00"),
        ("3cc8c175-814d-5581-c594-53f29c7cc73b", "9E107D9D-372B-4B6D-8A27-9E45B1A8F0C2"),
        ("created at 2026-11-29T17:34:59Z by job 3cc8c175-814d-5581-c594-53f29c7cc73b",
         "created at 2026-12-01T00:00:00Z by job 11111111-2222-3333-4444-555555555555"),
        ("a blob created at 8:42:30 PM", "a blob created at 10:01:59 AM"),
        ("at 20:42:30.125", "at 07:00:01.5"),
    ],
)  # fmt: skip
def test_timestamps_and_uuids_are_recognised_without_being_told(was: str, now: str) -> None:
    assert found("tools/call", text(was), text(now)) == []


def test_a_timestamp_that_became_another_kind_of_text_is_still_a_change() -> None:
    assert found("tools/call", text("at 2026-11-29T17:34:59Z"), text("at noon"))[0][1] == "value changed"
    assert found("tools/call", text("id 1"), text("id 2"))[0][1] == "value changed"


def test_a_base64_blob_holding_text_is_compared_as_its_text() -> None:
    def blob(data: bytes) -> dict[str, Any]:
        item = {"type": "resource", "resource": {"uri": "x://1", "blob": base64.b64encode(data).decode()}}
        return {"result": {"content": [item]}}

    # server-everything's blob resource says when it was made, to the second.
    assert found("tools/call", blob(b"created at 8:42:30 PM"), blob(b"created at 8:44:02 PM")) == []
    changed = found("tools/call", blob(b"created at 8:42:30 PM"), blob(b"deleted at 8:44:02 PM"))
    assert changed[0][:2] == ("$.result.content[0].resource.blob", "value changed")
    assert found("tools/call", blob(b"\xff\x00 at 8:42:30 PM"), blob(b"\xff\x00 at 8:44:02 PM"))[0][1] == (
        "value changed"  # bytes that are not text are compared as they are
    )


def test_a_mapped_id_compares_as_unchanged() -> None:
    was = {"result": {"task": {"taskId": "abc123", "status": "working"}}}
    now = {"result": {"task": {"taskId": "def456", "status": "working"}}}
    assert found("tools/call", was, now)[0][:2] == ("$.result.task.taskId", "value changed")
    assert found("tools/call", was, now, mapped={"abc123": "def456"}) == []


def test_ignore_paths_cover_what_they_name_and_everything_below_it() -> None:
    was = {
        "result": {
            "content": [{"type": "text", "text": "a"}],
            "meta": {"timestamp": 1, "x": {"timestamp": 2}},
        }
    }
    now = {
        "result": {
            "content": [{"type": "text", "text": "b"}],
            "meta": {"timestamp": 5, "x": {"timestamp": 6}},
        }
    }
    assert len(found("tools/call", was, now)) == 3
    ignore = [Pattern("$.result.content[*].text"), Pattern("$..timestamp")]
    assert found("tools/call", was, now, ignore=ignore) == []
    assert found("tools/call", was, now, ignore=[Pattern("$.result.meta")]) == [
        ("$.result.content[0].text", "value changed", "a", "b")
    ]


def test_an_ignore_pattern_with_a_star_covers_listed_items_too() -> None:
    changed = {"name": "add", "inputSchema": {**ADD["inputSchema"], "description": "new"}}
    ignore = [Pattern("$.result.tools[*].inputSchema.description")]
    assert found("tools/list", tools(ADD), tools(changed), ignore=ignore) == []
    assert found("tools/list", tools(ADD), tools(changed), ignore=[Pattern("$.result['tools'][0]")]) != []


@pytest.mark.parametrize("bad", ["result.content", "$.result[", "$.result[?(@.a)]", "$..", "$.a b"])
def test_an_ignore_path_outside_the_subset_is_refused_saying_so(bad: str) -> None:
    with pytest.raises(PathError):
        Pattern(bad)


# --- the conversation in a recording ------------------------------------------------------------------------


def frame(seq: int, direction: str, message: dict[str, Any], **fields: Any) -> bytes:
    rpc_kind = fields.pop("rpc_kind", None) or (
        "request" if "id" in message and "method" in message else
        "notification" if "method" in message else
        "error" if "error" in message else "result"
    )  # fmt: skip
    record = {
        "seq": seq,
        "kind": "message",
        "direction": direction,
        "wall": 1_700_000_000.0 + seq,
        "mono": float(seq),
        "raw": json.dumps(message),
        "rpc_kind": rpc_kind,
        "method": message.get("method"),
        "rpc_id": message.get("id"),
        **fields,
    }
    return json.dumps(record).encode() + b"\n"


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}}, "clientInfo": {"name": "c"}},
}


def recording() -> list[bytes]:
    return [
        b'{"seq": 1, "kind": "state", "direction": "local", "transport": {"state": "connecting"}}\n',
        frame(2, "out", INITIALIZE),
        frame(3, "in", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25"}}, pair_seq=2),
        frame(4, "out", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        frame(5, "out", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        frame(6, "in", {"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "nextCursor": "p2"}}, pair_seq=5,
              latency_ms=3.5),
        frame(7, "out", {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "p2"}}),
        frame(8, "in", {"jsonrpc": "2.0", "id": 0, "method": "roots/list"}),
        frame(9, "out", {"jsonrpc": "2.0", "id": 0, "result": {"roots": [{"uri": "file:///w"}]}}, pair_seq=8,
              method="roots/list"),
        frame(10, "in", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "bad cursor"}},
              pair_seq=7),
        frame(11, "out", {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": 3}}}),
        frame(12, "out", {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 3, "reason": "timed out"}}),
    ]  # fmt: skip


def test_a_recording_reads_as_the_initialize_the_steps_and_the_answers_to_the_server() -> None:
    conversation = Conversation.of(frames_of(recording()))
    assert conversation.initialize == INITIALIZE["params"]
    assert conversation.initialized == {"result": {"protocolVersion": "2025-11-25"}}
    assert [(s.number, s.method) for s in conversation.steps] == [
        (1, "tools/list"), (2, "tools/list"), (3, "tools/call"), (None, "notifications/cancelled"),
    ]  # fmt: skip
    first, second, call, cancel = conversation.steps
    assert first.answer == {"result": {"tools": [], "nextCursor": "p2"}} and first.latency_ms == 3.5
    assert second.answer == {"error": {"code": -32602, "message": "bad cursor"}}
    assert conversation.answers == {"roots/list": [{"result": {"roots": [{"uri": "file:///w"}]}}]}
    # The recording session's progress token is its own: the replay asks for progress with its own.
    assert call.params == {"name": "slow", "arguments": {}} and call.progress
    assert call.answer is None and cancel.cancels == 2


def test_each_step_waits_for_the_answers_the_recorded_client_had_when_it_sent_it() -> None:
    first, second, call, cancel = Conversation.of(frames_of(recording())).steps
    assert first.after == [] and second.after == [0]
    assert call.after == [1]  # the second list's error came before the call
    assert cancel.after == []  # the call was not answered when it was cancelled
    assert second.gap == pytest.approx(1.0)  # recorded one second after the answer it waited for


def test_a_cursor_and_a_task_id_from_recorded_answers_are_sent_as_the_new_servers() -> None:
    links = Links()
    links.learn({"result": {"tools": [], "nextCursor": "p2"}}, {"result": {"tools": [], "nextCursor": "q9"}})
    links.learn({"result": {"task": {"taskId": "t-old"}}}, {"result": {"task": {"taskId": "t-new"}}})
    assert links.params({"cursor": "p2"}) == {"cursor": "q9"}
    assert links.params({"taskId": "t-old", "_meta": {"x": {"taskId": "t-old"}}}) == {
        "taskId": "t-new",
        "_meta": {"x": {"taskId": "t-new"}},
    }
    # A resource URI is the client's to choose: it stays as recorded, even where it equals an id.
    assert links.params({"uri": "p2", "cursor": "unknown"}) == {"uri": "p2", "cursor": "unknown"}
    assert links.mapped == {"p2": "q9", "t-old": "t-new"}


def test_tasks_listed_are_mapped_in_their_order() -> None:
    links = Links()
    links.learn(
        {"result": {"tasks": [{"taskId": "a"}, {"taskId": "b"}]}},
        {"result": {"tasks": [{"taskId": "x"}, {"taskId": "y"}]}},
    )
    assert links.mapped == {"a": "x", "b": "y"}


def test_the_servers_questions_belong_to_the_newest_request_in_flight() -> None:
    lines = [
        *recording()[1:4],
        frame(5, "out", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}}),
        frame(6, "in", {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {}}),
        frame(7, "in", {"jsonrpc": "2.0", "id": 8, "method": "roots/list"}),  # whenever the server pleases
        frame(8, "in", {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, pair_seq=5),
        frame(
            9, "in", {"jsonrpc": "2.0", "id": 9, "method": "elicitation/create", "params": {}}
        ),  # none in flight
    ]
    [call] = Conversation.of(frames_of(lines)).steps
    assert call.asked == ["sampling/createMessage"]


def test_a_server_that_asks_otherwise_during_a_step_is_a_change() -> None:
    assert compare_asked(4, "tools/call", ["sampling/createMessage"], ["sampling/createMessage"]) == []
    [difference] = compare_asked(4, "tools/call", ["sampling/createMessage"], [])
    assert (difference.path, difference.rule) == ("server requests", "server requests changed")
    assert (difference.recorded, difference.replayed) == (["sampling/createMessage"], [])


def test_a_recording_without_initialize_cannot_be_replayed() -> None:
    with pytest.raises(RecordingProblem, match="no initialize"):
        Conversation.of(frames_of(recording()[4:]))


STAMP = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
ELICIT = {"method": "elicitation/create", "params": {"message": "Who?", "requestedSchema": {}}}


def stateless_recording() -> list[bytes]:
    """server/discover, then a call answered input_required twice (an elicitation, then roots and a
    sampling request) before its result, each retry carrying the client's input responses."""

    def call(rpc_id: int, **more: Any) -> dict[str, Any]:
        params = {"name": "ask", "arguments": {"x": 1}, **more, "_meta": {**STAMP, "progressToken": rpc_id}}
        return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}

    def needs(rpc_id: int, asked: dict[str, Any], state: str) -> dict[str, Any]:
        result = {"resultType": "input_required", "inputRequests": asked, "requestState": state}
        return {"jsonrpc": "2.0", "id": rpc_id, "result": result}

    discovered = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    sampled = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
    asked = {"roots": {"method": "roots/list"}, "llm": {"method": "sampling/createMessage", "params": {}}}
    return [
        frame(1, "out", {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": STAMP}}),
        frame(2, "in", {"jsonrpc": "2.0", "id": 0, "result": discovered}, pair_seq=1),
        frame(20, "out", {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                          "params": {"notifications": {}, "_meta": STAMP}}),
        frame(3, "out", call(1)),
        frame(4, "in", needs(1, {"who": ELICIT}, "s1"), pair_seq=3),
        frame(5, "out", call(2, inputResponses={"who": {"action": "accept", "content": {"n": "Ada"}}},
                             requestState="s1")),
        frame(6, "in", needs(2, asked, "s2"), pair_seq=5),
        frame(7, "out", call(3, inputResponses={"roots": {"roots": []}, "llm": sampled}, requestState="s2")),
        frame(8, "in", {"jsonrpc": "2.0", "id": 3, "result": {"resultType": "complete", "content": []}},
              pair_seq=7, latency_ms=2.5),
        frame(9, "out", {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": STAMP}}),
        frame(10, "in", {"jsonrpc": "2.0", "id": 4, "result": {"tools": []}}, pair_seq=9),
    ]  # fmt: skip


def test_a_stateless_recording_opens_with_discovery_and_what_its_requests_declared() -> None:
    conversation = Conversation.of(frames_of(stateless_recording()))
    assert conversation.stateless and conversation.opening == "server/discover"
    assert conversation.initialize == {
        "protocolVersion": "2026-07-28",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "c", "version": "1"},
    }
    assert conversation.initialized == {
        "result": {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
    }
    # The replaying session stamps its own revision, info and capabilities into each request's _meta,
    # and opens its own listen stream as it connects.
    assert [(s.number, s.method, s.params) for s in conversation.steps] == [
        (1, "tools/call", {"name": "ask", "arguments": {"x": 1}}),
        (2, "tools/list", {}),
    ]


def test_a_retry_after_input_required_is_part_of_its_step_and_its_responses_answer_the_server() -> None:
    call, listed = Conversation.of(frames_of(stateless_recording())).steps
    # The step's answer is the final one; the server's questions asked during it are the step's.
    assert call.answer == {"result": {"resultType": "complete", "content": []}} and call.latency_ms == 2.5
    assert call.asked == ["elicitation/create", "sampling/createMessage"] and call.progress
    assert listed.after == [0]
    assert Conversation.of(frames_of(stateless_recording())).answers == {
        "elicitation/create": [{"result": {"action": "accept", "content": {"n": "Ada"}}}],
        "roots/list": [{"result": {"roots": []}}],
        "sampling/createMessage": [
            {"result": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}}
        ],
    }


def test_a_discovery_that_failed_before_the_handshake_is_a_handshake_recording() -> None:
    failed = {"jsonrpc": "2.0", "id": 9, "error": {"code": -32601, "message": "Method not found"}}
    lines = [
        frame(1, "out", {"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": STAMP}}),
        frame(2, "in", failed, pair_seq=1),
        frame(3, "out", INITIALIZE),
        frame(4, "in", {"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": "2025-11-25"}}, pair_seq=3),
    ]
    conversation = Conversation.of(frames_of(lines))
    assert not conversation.stateless and conversation.initialize == INITIALIZE["params"]
    assert conversation.initialized == {"result": {"protocolVersion": "2025-11-25"}}


@pytest.mark.parametrize(
    ("line", "why"),
    [(b"not json\n", "line 1: not JSON"), (b'{"seq": 0, "kind": "message"}\n', "line 1: not a frame")],
)
def test_a_line_that_is_not_a_frame_is_named(line: bytes, why: str) -> None:
    with pytest.raises(RecordingProblem, match=why):
        list(frames_of([line]))


# --- a baseline ---------------------------------------------------------------------------------------------


def test_a_baseline_explains_a_difference_at_or_below_its_path_in_its_step_only() -> None:
    from sessions.replay import Baseline, Difference, StepReport

    varying = Difference(2, "tools/call", "$.result.content[0]", "value changed", "a", "b")
    baseline = Baseline([varying])
    below = Difference(2, "tools/call", "$.result.content[0].text", "value changed", "x", "y")
    sibling = Difference(2, "tools/call", "$.result.content[0]extra", "added", ABSENT, 1)
    elsewhere = Difference(3, "tools/call", "$.result.content[0].text", "value changed", "x", "y")
    above = Difference(2, "tools/call", "$.result", "type changed", {}, [])
    assert baseline.explains(below) is varying
    assert [baseline.explains(d) for d in (sibling, elsewhere, above)] == [None, None, None]
    steps = [StepReport(2, "tools/call", [below, above]), StepReport(3, "tools/call", [elsewhere])]
    dropped = baseline.sift(steps)
    assert [s.differences for s in steps] == [[above], [elsewhere]]
    assert [(d["path"], d["because"], d["varies"]) for d in dropped] == [
        ("$.result.content[0].text", "baseline", {"path": "$.result.content[0]", "rule": "value changed"})
    ]


def test_progress_is_counted_by_its_token_and_log_lines_not_at_all() -> None:
    def note(seq: int, method: str, params: dict[str, Any]) -> bytes:
        return frame(seq, "in", {"jsonrpc": "2.0", "method": method, "params": params})

    progress, log = "notifications/progress", "notifications/message"
    lines = [
        *recording()[1:4],
        frame(5, "out", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "slow", "_meta": {"progressToken": "t1"}}}),
        frame(6, "out", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo"}}),
        note(7, progress, {"progressToken": "t1", "progress": 1}),  # the slow call's, by its token
        note(8, log, {"level": "info", "data": "echo"}),  # nothing ties a log line to a request
        note(9, "notifications/tools/list_changed", {}),  # whenever the server pleases: not counted
        frame(10, "in", {"jsonrpc": "2.0", "id": 2, "result": {"content": []}}, pair_seq=6),
        note(11, progress, {"progressToken": "t1", "progress": 2}),
        note(12, log, {"level": "debug", "data": "slow"}),
        frame(13, "in", {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, pair_seq=5),
        note(14, progress, {"progressToken": "t1", "progress": 3}),  # after its answer: not counted
    ]  # fmt: skip
    slow, echo = Conversation.of(frames_of(lines)).steps
    assert slow.notified == {progress: 2} and echo.notified == {}


def test_notifications_counted_otherwise_are_a_change_per_method() -> None:
    from sessions.replay import compare_notified

    progress, log = "notifications/progress", "notifications/message"
    assert compare_notified(3, "tools/call", {progress: 2}, {progress: 2}) == []
    found = compare_notified(3, "tools/call", {progress: 2, log: 1}, {progress: 5})
    assert [(d.path, d.rule, d.recorded, d.replayed) for d in found] == [
        ('notifications["notifications/message"]', "notifications changed", 1, 0),
        ('notifications["notifications/progress"]', "notifications changed", 2, 5),
    ]


def test_a_stored_replay_is_paired_with_its_recording_request_by_request() -> None:
    from sessions.replay import paired

    def conversation(answers: list[dict[str, Any]]) -> Conversation:
        lines = recording()[1:4]
        for n, answer in enumerate(answers, start=1):
            call = {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": f"t{n}"}}
            reply = {"jsonrpc": "2.0", "id": n, **answer}
            lines += [
                frame(10 * n, "out", call),
                frame(10 * n + 1, "in", reply, pair_seq=10 * n, latency_ms=1.0),
            ]
        return Conversation.of(frames_of(lines))

    recorded = conversation([text("a"), text("b"), text("c")])
    live = conversation([text("a"), text("B")])
    steps, sides, waiting = paired(recorded, live, complete=False)
    assert [(s.number, s.method, [d.path for d in s.differences]) for s in steps] == [
        (0, "initialize", []),
        (1, "tools/call", []),
        (2, "tools/call", ["$.result.content[0].text"]),
        (3, "tools/call", []),  # not sent yet: not a change while the replay is live
    ]
    assert waiting == {3} and sides[2].replayed.startswith("{") and '"B"' in sides[2].replayed
    assert (sides[3].replayed, sides[3].replayed_seq, sides[3].recorded_seq) == ("(not sent yet)", None, 30)
    steps, _, waiting = paired(recorded, live, complete=True)
    assert waiting == set() and [d.rule for d in steps[3].differences] == ["not answered"]
