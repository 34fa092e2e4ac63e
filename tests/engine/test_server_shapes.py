"""The server's misses the schema lets through: nested elicitation schemas, tool-enabled sampling without
``sampling.tools``, unsafe icons, blobs that are not base64, odd tool names, updates nobody subscribed
to, and request ids that are fractional numbers. Each beside its well-behaved variant.

Scripted in memory (``sessions.engine.testing.ScriptedTransport``): no process, no socket, no sleeping.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from inspector.cli.answers import Policy, handlers
from sessions.engine import ClientCapabilities, ClientOptions, ClientSession, Frame, PendingRequest
from sessions.engine._rules import check_stateless_result, refused
from sessions.engine.testing import ManualClock, Recorder, ScriptedTransport, Sent

FLAT = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "age": {"type": "integer", "minimum": 0},
        "ok": {"type": "boolean", "default": True},
        "color": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "L"}]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        # Python SDK servers send optional fields like this.
        "nick": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["name"],
}
NESTED = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "address": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
SAMPLING = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}


def flagged(frame: Frame, code: str) -> list[str]:
    return [v.severity for v in frame.verdicts if v.code == code]


@contextlib.asynccontextmanager
async def connected(
    client: ClientCapabilities | None = None, protocol: str = "2025-11-25", **handshake: Any
) -> AsyncIterator[tuple[ClientSession, ScriptedTransport, Recorder]]:
    server = ScriptedTransport(handshake={"protocolVersion": protocol, **handshake})
    options = ClientOptions(
        protocol_version=protocol,
        capabilities=client or ClientCapabilities(),
        validate=False,
        clock=ManualClock(),
    )
    session = ClientSession(server, options)
    recorder = Recorder(session)  # from the start: the handshake's frames too
    async with session:
        yield session, server, recorder


def handshake_frame(recorder: Recorder) -> Frame:
    """The frame of the server's initialize result."""
    return next(f for f in recorder.frames if f.direction == "in" and f.method == "initialize")


def request(request_id: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def elicit(request_id: int, schema: Any) -> dict[str, Any]:
    return request(request_id, "elicitation/create", {"message": "Who?", "requestedSchema": schema})


async def answered(session: ClientSession, server: ScriptedTransport, method: str, result: Any) -> Frame:
    """The frame of the server's answer ``result`` to a ``method`` request the client sends."""
    await session.start_request(method, {"uri": "file:///a"} if method == "resources/read" else None)
    sent = await server.next_sent(method)
    return server.answer(sent, result)


# --- an elicitation whose requestedSchema nests objects ----------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        NESTED,
        {"type": "object", "properties": {"where": {"type": "array", "items": {"type": "object"}}}},
        {"type": "object", "properties": {"grid": {"type": "array", "items": {"type": "array"}}}},
        {"type": "object", "properties": {"maybe": {"anyOf": [{"type": "object"}, {"type": "null"}]}}},
        {  # how pydantic nests a model
            "type": "object",
            "properties": {"home": {"$ref": "#/$defs/Address"}},
            "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}}}},
        },
        {"type": "array", "items": {"type": "string"}},
    ],
)
async def test_a_nested_elicitation_schema_is_flagged_and_refused_before_anyone_is_asked(schema: Any) -> None:
    async with connected() as (session, server, recorder):
        asked = server.server_sends(elicit(7, schema))
        refusal = await server.next_sent()
    assert flagged(asked, "elicitation-schema") == ["error"]
    assert refusal.message["id"] == 7 and refusal.message["error"]["code"] == -32602
    assert "flat" in refusal.message["error"]["message"] or "object" in refusal.message["error"]["message"]
    assert refusal.frame.pair_seq == asked.seq
    assert session.waiting == [] and not [e for e in recorder.events if isinstance(e, PendingRequest)]


async def test_a_flat_elicitation_schema_waits_for_a_person() -> None:
    async with connected() as (session, server, recorder):
        asked = server.server_sends(elicit(7, FLAT))
        pending = await recorder.pending("elicitation/create")
        session.respond(pending.key, {"action": "decline"})
        answer = await server.next_sent()
    assert asked.verdicts == []
    assert answer.message == {"jsonrpc": "2.0", "id": 7, "result": {"action": "decline"}}


async def test_the_cli_refuses_a_nested_elicitation_instead_of_accepting_its_defaults() -> None:
    form_only = ClientCapabilities(roots=False, sampling=False, elicitation_form=True, elicitation_url=False)
    async with connected(form_only) as (session, server, recorder):
        session.handlers.update(handlers(Policy("accept-defaults"), None))
        nested = server.server_sends(elicit(1, NESTED))
        refusal = await server.next_sent()
        flat = server.server_sends(elicit(2, FLAT))
        accepted = await server.next_sent()
    assert flagged(nested, "elicitation-schema") == ["error"]
    assert refusal.message["error"]["code"] == -32602 and "result" not in refusal.message
    assert flagged(flat, "elicitation-schema") == []
    assert accepted.message["result"] == {
        "action": "accept",
        "content": {"name": "x", "ok": True, "nick": None},
    }


async def test_a_nested_input_request_of_a_stateless_result_is_flagged() -> None:
    frame = Frame("message", "in")
    result = {
        "resultType": "input_required",
        "inputRequests": {
            "who": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": NESTED}}
        },
    }
    check_stateless_result("tools/call", result, frame, "", {"elicitation": {"form": {}}})
    assert flagged(frame, "elicitation-schema") == ["error"]


# --- tool-enabled sampling without sampling.tools ---------------------------------------------------------


@pytest.mark.parametrize(
    "asked", [{"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}, {"toolChoice": {"mode": "auto"}}]
)
async def test_tool_enabled_sampling_without_sampling_tools_is_refused_like_an_undeclared_mode(
    asked: dict[str, Any],
) -> None:
    async with connected() as (session, server, recorder):
        sampling = server.server_sends(request(3, "sampling/createMessage", {**SAMPLING, **asked}))
        refusal = await server.next_sent()
    assert flagged(sampling, "undeclared-capability") == ["error"]
    assert "sampling.tools" in sampling.verdicts[0].message
    assert refusal.message["id"] == 3 and refusal.message["error"]["code"] == -32602
    assert not [e for e in recorder.events if isinstance(e, PendingRequest)]


async def test_plain_sampling_waits_for_a_person() -> None:
    async with connected() as (session, server, recorder):
        sampling = server.server_sends(request(3, "sampling/createMessage", SAMPLING))
        await recorder.pending("sampling/createMessage")
    assert sampling.verdicts == []


def test_tool_enabled_sampling_is_taken_from_a_client_that_declared_sampling_tools() -> None:
    params = {**SAMPLING, "tools": []}
    assert refused("sampling/createMessage", params, {"sampling": {"tools": {}}}) is None
    refusal = refused("sampling/createMessage", params, {"sampling": {}})
    assert refusal is not None and refusal[0] == "undeclared-capability" and refusal[1].code == -32602


def test_sampling_tools_is_declared_from_2025_11_25_when_switched_on_and_a_replay_reads_it_back() -> None:
    from sessions.replay._drive import capabilities
    from sessions.servers import build_options

    on = ClientCapabilities(sampling_tools=True)
    assert on.to_wire("2025-06-18")["sampling"] == {}
    for version in ("2025-11-25", "2026-07-28"):
        assert on.to_wire(version)["sampling"] == {"tools": {}}
        assert ClientCapabilities().to_wire(version)["sampling"] == {}  # the CLI's, and the default
        assert capabilities(on.to_wire(version), version).sampling_tools
    # The web's sessions declare it unless the connect form's switch is off.
    assert build_options({"capabilities": {}}).capabilities.to_wire("2025-11-25")["sampling"] == {"tools": {}}
    off = build_options({"capabilities": {"sampling_tools": False}}).capabilities
    assert off.to_wire("2025-11-25")["sampling"] == {}


USE = {"type": "tool_use", "id": "u1", "name": "t", "input": {}}
RESULT = {"type": "tool_result", "toolUseId": "u1", "content": []}
TEXT = {"type": "text", "text": "hi"}


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "user", "content": TEXT}], None),
        ([{"role": "assistant", "content": [TEXT, USE]}, {"role": "user", "content": [RESULT]}], None),
        ([{"role": "assistant", "content": USE}, {"role": "user", "content": RESULT}], None),
        ([{"role": "assistant", "content": [USE]}], "messages[0]'s tool use 'u1' has no tool result"),
        (
            [
                {"role": "assistant", "content": [USE]},
                {"role": "user", "content": [{**RESULT, "toolUseId": "u2"}]},
            ],
            "messages[0]'s tool use 'u1' has no tool result",
        ),
        (
            [{"role": "assistant", "content": [USE]}, {"role": "user", "content": [RESULT, TEXT]}],
            "messages[1] mixes tool results with other content",
        ),
        ("not a list", None),
    ],
)
def test_tool_uses_and_their_results_balance_in_a_sampling_request(
    messages: Any, problem: str | None
) -> None:
    from sessions.engine._shapes import tool_results_problem

    found = tool_results_problem(messages)
    assert (found is None) if problem is None else (found is not None and found.startswith(problem))


async def test_an_unbalanced_tool_enabled_sampling_request_is_flagged_and_still_put_to_a_person() -> None:
    messages = [{"role": "assistant", "content": [USE]}, {"role": "user", "content": [TEXT]}]
    params = {**SAMPLING, "messages": messages, "tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    async with connected(ClientCapabilities(sampling_tools=True)) as (session, server, recorder):
        sampling = server.server_sends(request(3, "sampling/createMessage", params))
        await recorder.pending("sampling/createMessage")
    assert flagged(sampling, "sampling-tool-results") == ["error"]


# --- icons ---------------------------------------------------------------------------------------------


def icons(*sources: str) -> list[dict[str, Any]]:
    return [{"src": src, "mimeType": "image/png"} for src in sources]


SAFE = icons("https://example.com/a.png", "data:image/png;base64,iVBORw0KGgo=")


async def test_an_icon_with_an_unsafe_scheme_is_flagged_icon_uri_wherever_it_is() -> None:
    unsafe = icons("javascript:alert(1)", " java\tscript:alert(2)", "file:///etc/passwd", "ms-settings:x")
    async with connected(serverInfo={"name": "s", "version": "1", "icons": unsafe}) as (
        session,
        server,
        recorder,
    ):
        handshake = handshake_frame(recorder)
        tools = await answered(
            session,
            server,
            "tools/list",
            {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "icons": unsafe}]},
        )
        prompts = await answered(
            session, server, "prompts/list", {"prompts": [{"name": "p", "icons": unsafe[:1]}]}
        )
        resources = await answered(
            session,
            server,
            "resources/list",
            {"resources": [{"uri": "file:///a", "name": "a", "icons": unsafe[:1]}]},
        )
        templates = await answered(
            session,
            server,
            "resources/templates/list",
            {
                "resourceTemplates": [
                    {"uriTemplate": "file:///{x}", "name": "x", "icons": icons("ftp://x/y.png")}
                ]
            },
        )
        link = {"type": "resource_link", "uri": "file:///a", "name": "a", "icons": icons("ws://x/")}
        call = await answered(session, server, "tools/call", {"content": [link]})
        not_quite = await answered(
            session,
            server,
            "prompts/list",
            {"prompts": [{"name": "p", "icons": icons("http://x/i.png", "./mcp.svg")}]},
        )
    assert flagged(handshake, "icon-uri") == ["error"] * 4
    assert flagged(tools, "icon-uri") == ["error"] * 4
    assert "MUST reject" in tools.verdicts[0].message and "'javascript:'" in tools.verdicts[0].message
    assert [flagged(f, "icon-uri") for f in (prompts, resources, templates, call)] == [["error"]] * 4
    # Plain http, or relative to the server's URL (the TypeScript SDK's example server): warnings.
    assert flagged(not_quite, "icon-uri") == ["warning", "warning"]


async def test_https_and_data_icons_draw_no_verdict() -> None:
    async with connected(serverInfo={"name": "s", "version": "1", "icons": SAFE}) as (
        session,
        server,
        recorder,
    ):
        handshake = handshake_frame(recorder)
        tools = await answered(
            session,
            server,
            "tools/list",
            {"tools": [{"name": "t", "inputSchema": {"type": "object"}, "icons": SAFE}]},
        )
    assert handshake.verdicts == [] and tools.verdicts == []


# --- blobs that are not base64 -------------------------------------------------------------------------


async def test_a_resource_blob_that_is_not_base64_is_flagged_invalid_base64() -> None:
    bad = {"uri": "file:///a", "mimeType": "image/png", "blob": "not base64!"}
    good = {"uri": "file:///b", "mimeType": "image/png", "blob": "iVBORw0KGgo="}
    async with connected() as (session, server, recorder):
        read = await answered(session, server, "resources/read", {"contents": [good, bad]})
        call = await answered(
            session, server, "tools/call", {"content": [{"type": "resource", "resource": bad}]}
        )
        prompt = await answered(
            session,
            server,
            "prompts/get",
            {
                "messages": [
                    {"role": "user", "content": {"type": "resource", "resource": {**bad, "blob": "abc"}}}
                ]
            },
        )
        fine = await answered(session, server, "resources/read", {"contents": [good, {**good, "blob": ""}]})
    assert flagged(read, "invalid-base64") == ["error"] and "contents[1].blob" in read.verdicts[0].message
    assert (
        flagged(call, "invalid-base64") == ["error"]
        and "content[0].resource.blob" in call.verdicts[0].message
    )
    assert flagged(prompt, "invalid-base64") == ["error"]
    assert fine.verdicts == []


# --- tool names ----------------------------------------------------------------------------------------


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


@pytest.mark.parametrize(("protocol", "expected"), [("2025-11-25", ["warning"] * 4), ("2025-06-18", [])])
async def test_tool_names_outside_the_allowed_characters_are_warned_of_from_2025_11_25(
    protocol: str, expected: list[str]
) -> None:
    odd = [tool("has space"), tool("comma,name"), tool(""), tool("x" * 129)]
    fine = [tool("get_weather"), tool("Admin.Tools-v2"), tool("x" * 128)]
    async with connected(protocol=protocol) as (session, server, recorder):
        listed = await answered(session, server, "tools/list", {"tools": odd + fine})
    assert flagged(listed, "tool-name") == expected


# --- resource updates nobody subscribed to --------------------------------------------------------------


async def test_an_update_of_a_resource_never_subscribed_is_flagged_unsubscribed_update() -> None:
    capabilities = {"resources": {"subscribe": True}}

    def updated(uri: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}

    async with connected(capabilities=capabilities) as (session, server, recorder):
        stray = server.server_sends(updated("file:///b"))
        await session.start_request("resources/subscribe", {"uri": "file:///a"})
        sent: Sent = await server.next_sent("resources/subscribe")
        server.answer(sent, {})
        subscribed = server.server_sends(updated("file:///a"))
        under = server.server_sends(updated("file:///a/part"))
        still_stray = server.server_sends(updated("file:///b"))
    assert flagged(stray, "unsubscribed-update") == ["warning"]
    assert "never subscribed" in stray.verdicts[0].message
    assert flagged(subscribed, "unsubscribed-update") == [] and subscribed.verdicts == []
    assert flagged(under, "unsubscribed-update") == []
    assert flagged(still_stray, "unsubscribed-update") == ["warning"]


# --- request ids that are no string and no integer -------------------------------------------------------


@pytest.mark.parametrize(
    ("request_id", "echoed", "said"),
    [
        (1.5, 1.5, "1.5 is a fractional number"),
        (None, None, "never null"),
        (True, None, "is a boolean"),
        ([1], None, "is an array"),
    ],
)
async def test_a_request_id_that_is_no_string_or_integer_is_flagged_and_answered_32600(
    request_id: Any, echoed: Any, said: str
) -> None:
    async with connected() as (_, server, _recorder):
        asked = server.server_sends({"jsonrpc": "2.0", "id": request_id, "method": "ping"})
        answer = await server.next_sent()
        fine = server.server_sends({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        pong = await server.next_sent()
    [verdict] = [v for v in asked.verdicts if v.code == "invalid-id"]
    assert verdict.severity == "error" and said in verdict.message and "answered -32600" in verdict.message
    assert request_id is None or "never null" not in verdict.message
    assert answer.message["id"] == echoed and answer.message["error"]["code"] == -32600
    assert said in answer.message["error"]["message"]
    assert fine.verdicts == [] and pong.message == {"jsonrpc": "2.0", "id": 2, "result": {}}


async def test_a_fractional_id_answer_is_paired_with_its_request() -> None:
    async with connected() as (_, server, _recorder):
        asked = server.server_sends(
            request(2.5, "elicitation/create", {"message": "?", "requestedSchema": FLAT})
        )
        answer = await server.next_sent()
    assert answer.message["id"] == 2.5 and answer.frame.pair_seq == asked.seq
    assert b'"id":2.5' in answer.raw
