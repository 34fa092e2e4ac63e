"""The client as a task receiver (2025-11-25): task-augmented sampling and elicitation, and tasks/*.

The server is scripted in memory (``ScriptedTransport``) and plays the requestor; schema checks are on,
so what it sends is held to the published 2025-11-25 schema, and time is a ``ManualClock``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessions.engine import ClientCapabilities, ClientOptions, ClientSession, McpError, PendingRequest
from sessions.engine.testing import ManualClock, Recorder, ScriptedTransport, Sent

RELATED = "io.modelcontextprotocol/related-task"
FULL = {
    "list": {},
    "cancel": {},
    "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


@contextlib.asynccontextmanager
async def connected(**options: Any) -> AsyncIterator[tuple[ClientSession, ScriptedTransport, ManualClock]]:
    clock = ManualClock()
    server = ScriptedTransport(handshake={"capabilities": {"tools": {}}})
    options.setdefault("validate", True)
    async with ClientSession(server, ClientOptions(clock=clock, **options)) as session:
        yield session, server, clock


class Requestor:
    """The scripted server's side of the tasks: it sends requests and reads the client's replies."""

    def __init__(self, server: ScriptedTransport) -> None:
        self.server = server
        self.ids = iter(range(100, 10_000))
        self.replies: dict[int | str, Sent] = {}

    def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = next(self.ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.server.server_sends(message)
        return request_id

    async def reply(self, request_id: int) -> dict[str, Any]:
        """The client's response to one of the server's requests (result or error), whole."""
        while request_id not in self.replies:
            sent = await self.server.next_sent()
            if isinstance(sent.message, dict) and "method" not in sent.message:
                self.replies[sent.message["id"]] = sent
        message = self.replies[request_id].message
        assert isinstance(message, dict)
        return message

    async def ask(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.reply(self.send(method, params))

    async def sample(self, ttl: int | None = 60_000) -> str:
        """A task-augmented sampling/createMessage; return the task id of the CreateTaskResult."""
        task = {} if ttl is None else {"ttl": ttl}
        params = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
        created = await self.ask("sampling/createMessage", {**params, "task": task})
        task_id = created["result"]["task"]["taskId"]
        assert isinstance(task_id, str)
        return task_id


def told(server: ScriptedTransport) -> list[dict[str, Any]]:
    """The status notifications the client sent so far."""
    return [s.params for s in server.sent if s.method == "notifications/tasks/status"]


def error_code(reply: dict[str, Any]) -> int:
    code = reply["error"]["code"]
    assert isinstance(code, int)
    return code


# --- declaring --------------------------------------------------------------------------------------


def test_tasks_are_declared_for_the_request_kinds_whose_capability_is_declared() -> None:
    assert ClientCapabilities().to_wire("2025-11-25")["tasks"] == FULL
    no_sampling = ClientCapabilities(sampling=False).to_wire("2025-11-25")["tasks"]
    assert no_sampling["requests"] == {"elicitation": {"create": {}}}
    no_elicitation = ClientCapabilities(elicitation_form=False).to_wire("2025-11-25")["tasks"]
    assert no_elicitation["requests"] == {"sampling": {"createMessage": {}}}
    assert "tasks" not in ClientCapabilities(sampling=False, elicitation_form=False).to_wire("2025-11-25")
    assert "tasks" not in ClientCapabilities(tasks=False).to_wire("2025-11-25")


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2026-07-28"])
def test_revisions_without_the_tasks_capability_do_not_declare_it(version: str) -> None:
    assert "tasks" not in ClientCapabilities().to_wire(version)


async def test_the_handshake_declares_tasks() -> None:
    async with connected() as (_, server, _clock):
        initialize = next(s for s in server.sent if s.method == "initialize")
    assert initialize.params["capabilities"]["tasks"] == FULL


# --- serving a task -----------------------------------------------------------------------------------


async def test_a_task_augmented_sampling_request_becomes_a_task_a_person_answers() -> None:
    async with connected() as (session, server, _clock):
        log = Recorder(session)
        requestor = Requestor(server)
        created = await requestor.ask(
            "sampling/createMessage",
            {"messages": [], "maxTokens": 5, "task": {"ttl": 60_000}},
        )
        task = created["result"]["task"]
        assert task["status"] == "working" and task["ttl"] == 60_000
        assert {"taskId", "createdAt", "lastUpdatedAt", "pollInterval"} <= set(task)
        task_id = task["taskId"]
        # The person is asked as for any sampling request, after the CreateTaskResult went out.
        pending = await log.pending("sampling/createMessage")
        assert (await requestor.ask("tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
        fetching = requestor.send("tasks/result", {"taskId": task_id})
        session.respond(pending.key, SAMPLED)
        result = (await requestor.reply(fetching))["result"]
        assert result == {**SAMPLED, "_meta": {RELATED: {"taskId": task_id}}}
        assert [(n["taskId"], n["status"]) for n in told(server)] == [(task_id, "completed")]
        done = (await requestor.ask("tasks/get", {"taskId": task_id}))["result"]
        assert done["status"] == "completed" and done["createdAt"] == task["createdAt"]
        listed = (await requestor.ask("tasks/list"))["result"]
        assert [t["taskId"] for t in listed["tasks"]] == [task_id] and "nextCursor" not in listed
        assert session.served_tasks[task_id].result == SAMPLED
        # tasks/result of a task already ended answers at once, again.
        again = (await requestor.ask("tasks/result", {"taskId": task_id}))["result"]
        assert again == result
    created_frame = next(f for f in log.frames if f.direction == "out" and f.rpc_id == created["id"])
    assert created_frame.note == f"task {task_id} created (working)"
    assert [(f.seq, v.code, v.message) for f in log.frames for v in f.verdicts] == []


async def test_a_handler_answers_the_task_and_its_refusal_is_what_tasks_result_returns() -> None:
    async with connected() as (session, server, _clock):
        asked: list[PendingRequest] = []

        async def refuse(request: PendingRequest) -> dict[str, Any]:
            asked.append(request)
            raise McpError(-1, "no sampling today")

        session.handlers["sampling/createMessage"] = refuse
        requestor = Requestor(server)
        task_id = await requestor.sample()
        reply = await requestor.ask("tasks/result", {"taskId": task_id})
        assert [(n["status"], n["statusMessage"]) for n in told(server)] == [("failed", "no sampling today")]
        assert reply["error"] == {"code": -1, "message": "no sampling today"}
        assert asked[0].params["task"] == {"ttl": 60_000}


async def test_an_elicitation_task_is_answered_like_a_plain_elicitation() -> None:
    async with connected() as (session, server, _clock):
        log = Recorder(session)
        requestor = Requestor(server)
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        created = await requestor.ask(
            "elicitation/create", {"message": "Who?", "requestedSchema": schema, "task": {"ttl": 1000}}
        )
        task_id = created["result"]["task"]["taskId"]
        pending = await log.pending("elicitation/create")
        session.respond(pending.key, {"action": "accept", "content": {"name": "Ada"}})
        result = (await requestor.ask("tasks/result", {"taskId": task_id}))["result"]
        assert result["action"] == "accept" and result["content"] == {"name": "Ada"}


async def test_a_request_the_client_refuses_is_refused_at_once_not_made_a_task() -> None:
    async with connected(capabilities=ClientCapabilities(elicitation_url=False)) as (session, server, _clock):
        requestor = Requestor(server)
        reply = await requestor.ask(
            "elicitation/create",
            {"mode": "url", "message": "Go", "url": "https://x.test/", "elicitationId": "e", "task": {}},
        )
        assert error_code(reply) == -32602
        assert (await requestor.ask("tasks/list"))["result"]["tasks"] == []


# --- cancelling, expiring, finding ---------------------------------------------------------------------


async def test_tasks_cancel_withdraws_the_question_and_a_terminal_task_cannot_be_cancelled() -> None:
    async with connected() as (session, server, _clock):
        log = Recorder(session)
        requestor = Requestor(server)
        task_id = await requestor.sample()
        await log.pending("sampling/createMessage")
        fetching = requestor.send("tasks/result", {"taskId": task_id})
        cancelled = (await requestor.ask("tasks/cancel", {"taskId": task_id}))["result"]
        assert cancelled["status"] == "cancelled"
        await log.wait_for(lambda e: getattr(e, "outcome", None) == "withdrawn")
        assert session.waiting == []
        assert error_code(await requestor.reply(fetching)) == -32603
        assert error_code(await requestor.ask("tasks/cancel", {"taskId": task_id})) == -32602
        assert (await requestor.ask("tasks/get", {"taskId": task_id}))["result"]["status"] == "cancelled"


async def test_unknown_task_ids_and_cursors_are_invalid_params() -> None:
    async with connected() as (_, server, _clock):
        requestor = Requestor(server)
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert error_code(await requestor.ask(method, {"taskId": "nobody"})) == -32602
        assert error_code(await requestor.ask("tasks/list", {"cursor": "not-ours"})) == -32602


async def test_a_task_expires_after_its_ttl_on_the_session_clock() -> None:
    async with connected() as (session, server, clock):
        log = Recorder(session)
        requestor = Requestor(server)
        task_id = await requestor.sample(ttl=30_000)
        await log.pending("sampling/createMessage")
        fetching = requestor.send("tasks/result", {"taskId": task_id})
        clock.advance(29)
        assert (await requestor.ask("tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
        clock.advance(1)
        expired = await requestor.ask("tasks/get", {"taskId": task_id})
        assert error_code(expired) == -32602 and "expired" in expired["error"]["message"]
        assert "expired" in (await requestor.reply(fetching))["error"]["message"]
        await log.wait_for(lambda e: getattr(e, "outcome", None) == "withdrawn")
        assert (await requestor.ask("tasks/list"))["result"]["tasks"] == []
        # A ttl of 0 still gets its CreateTaskResult, and the task is gone as soon as time moves.
        brief = await requestor.sample(ttl=0)
        clock.advance(0)
        assert error_code(await requestor.ask("tasks/get", {"taskId": brief})) == -32602


async def test_tasks_list_pages_with_an_opaque_cursor() -> None:
    async with connected() as (session, server, _clock):

        async def answer(request: PendingRequest) -> dict[str, Any]:
            return SAMPLED

        session.handlers["sampling/createMessage"] = answer
        requestor = Requestor(server)
        ids = [await requestor.sample() for _ in range(51)]
        first = (await requestor.ask("tasks/list"))["result"]
        assert len(first["tasks"]) == 50
        second = (await requestor.ask("tasks/list", {"cursor": first["nextCursor"]}))["result"]
        assert "nextCursor" not in second
        assert [t["taskId"] for t in first["tasks"] + second["tasks"]] == ids


async def test_the_server_withdrawing_tasks_result_stops_the_wait_not_the_task() -> None:
    async with connected() as (session, server, _clock):
        log = Recorder(session)
        requestor = Requestor(server)
        task_id = await requestor.sample()
        pending = await log.pending("sampling/createMessage")
        fetching = requestor.send("tasks/result", {"taskId": task_id})
        server.server_sends(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": fetching}}
        )
        session.respond(pending.key, SAMPLED)
        result = (await requestor.ask("tasks/result", {"taskId": task_id}))["result"]
        assert result["model"] == "m"
        assert fetching not in requestor.replies


# --- not declared ---------------------------------------------------------------------------------------


async def test_without_the_tasks_capability_a_task_augmented_request_is_answered_normally() -> None:
    async with connected(capabilities=ClientCapabilities(tasks=False)) as (session, server, _clock):
        log = Recorder(session)
        requestor = Requestor(server)
        request_id = requestor.send("sampling/createMessage", {"messages": [], "maxTokens": 5, "task": {}})
        session.respond((await log.pending("sampling/createMessage")).key, SAMPLED)
        assert (await requestor.reply(request_id))["result"] == SAMPLED
        assert error_code(await requestor.ask("tasks/list")) == -32601


# --- against server-everything, which sends task-augmented requests to a client that declares tasks -----

ASYNC_TOOLS = {"trigger-sampling-request-async", "trigger-elicitation-request-async"}


async def everything_tools(spec: dict[str, Any], capabilities: ClientCapabilities) -> set[str]:
    from support.engine import EventLog, wait_for_tool

    from sessions.engine import StdioTarget, connect

    session = connect(StdioTarget(spec["command"], spec["args"]), ClientOptions(capabilities=capabilities))
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "trigger-sampling-request")
        return {t["name"] for t in await session.list_all("tools/list", "tools")}


@pytest.mark.slow
async def test_server_everything_shows_its_task_based_tools_to_a_client_that_declares_tasks(
    everything_stdio: dict,
) -> None:
    # Every other capability declared too, as the official inspector does: 19 tools against 17.
    declared = await everything_tools(everything_stdio, ClientCapabilities(elicitation_url=True))
    plain = await everything_tools(everything_stdio, ClientCapabilities(elicitation_url=True, tasks=False))
    assert declared - plain == ASYNC_TOOLS
    assert len(declared) == 19 and len(plain) == 17


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> Any:
    from sessions.engine import HttpTarget, StdioTarget

    if request.param == "stdio":
        spec = request.getfixturevalue("everything_stdio")
        return StdioTarget(spec["command"], spec["args"])
    return HttpTarget(request.getfixturevalue("everything_http"), transport="http")


@pytest.mark.slow
async def test_server_everything_gets_our_handlers_answers_through_its_tasks(everything: Any) -> None:
    from support.engine import EventLog, wait_for_tool

    from sessions.engine import connect

    async def sample(request: PendingRequest) -> dict[str, Any]:
        return {**SAMPLED, "content": {"type": "text", "text": "from our handler"}}

    async def elicit(request: PendingRequest) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada"}}

    session = connect(everything, ClientOptions(timeout=30, validate=True))
    session.handlers.update({"sampling/createMessage": sample, "elicitation/create": elicit})
    log = EventLog(session)
    async with session:
        await wait_for_tool(session, log, "trigger-elicitation-request-async")
        sampled = await session.call_tool("trigger-sampling-request-async", {"prompt": "tides"})
        elicited = await session.call_tool("trigger-elicitation-request-async", {})
    text = sampled["content"][0]["text"]
    assert text.startswith("[COMPLETED]") and "from our handler" in text
    texts = [c["text"] for c in elicited["content"]]
    assert texts[0] == "[COMPLETED] User provided the requested information!"
    assert "User inputs:" in texts[1] and "Ada" in texts[1]
    # The server polled our tasks and fetched their results; no frame of either side is faulted.
    asked = {f.method for f in log.messages("in")}
    assert {"tasks/get", "tasks/result"} <= asked
    assert [(f.seq, f.method, v.code, v.message) for f in log.frames for v in f.verdicts] == []
