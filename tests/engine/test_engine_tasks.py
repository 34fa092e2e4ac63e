"""Tasks (2025-11-25): one fast test per task rule, each beside the well-behaved variant.

The server is scripted in memory (``ScriptedTransport``); schema checks are on, so the published
2025-11-25 JSON schema judges what ``mcp-types`` has no model for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessions.engine import ClientCapabilities, ClientOptions, ClientSession, Frame, McpError, TaskChanged
from sessions.engine.testing import ManualClock, Recorder, ScriptedTransport, Sent

TASKS = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
RELATED = "io.modelcontextprotocol/related-task"
RESEARCH = {"name": "research", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}


def flagged(frame: Frame, code: str) -> list[str]:
    return [v.severity for v in frame.verdicts if v.code == code]


def codes(frame: Frame) -> list[str]:
    return [v.code for v in frame.verdicts]


def task(
    task_id: str = "t1", status: str = "working", at: str = "2025-11-25T10:00:00Z", **fields: Any
) -> dict:
    return {
        "taskId": task_id,
        "status": status,
        "createdAt": "2025-11-25T10:00:00Z",
        "lastUpdatedAt": at,
        "ttl": 60000,
        "pollInterval": 500,
        **fields,
    }


def status(**fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task(**fields)}


@contextlib.asynccontextmanager
async def connected(
    capabilities: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[tuple[ClientSession, ScriptedTransport, ManualClock]]:
    clock = ManualClock()
    caps = {"tools": {}, "tasks": TASKS} if capabilities is None else capabilities
    server = ScriptedTransport(handshake={"capabilities": caps})
    options.setdefault("validate", True)
    async with ClientSession(server, ClientOptions(clock=clock, **options)) as session:
        yield session, server, clock


async def call(session: ClientSession, server: ScriptedTransport, method: str, params: Any = None) -> Sent:
    await session.start_request(method, params)
    return await server.next_sent(method)


async def created(session: ClientSession, server: ScriptedTransport, **fields: Any) -> Frame:
    """A task-augmented tools/call answered with a CreateTaskResult."""
    sent = await call(
        session, server, "tools/call", {"name": "research", "arguments": {}, "task": {"ttl": 60000}}
    )
    return server.answer(sent, {"task": task(**fields)})


# --- creating tasks -------------------------------------------------------------------------------


async def test_a_create_task_result_answers_a_task_augmented_call_without_a_verdict() -> None:
    async with connected() as (session, server, _):
        log = Recorder(session)
        sent = await call(
            session, server, "tools/call", {"name": "research", "arguments": {}, "task": {"ttl": 60000}}
        )
        reply = server.answer(sent, {"task": task()})
        plain = server.answer(
            await call(session, server, "tools/call", {"name": "echo"}), {"task": task("t2")}
        )
        assert reply.verdicts == []  # was: schema error, "content: Field required"
        assert reply.note == "task t1 created (working)"
        known = session.tasks["t1"]
        assert (known.status, known.method, known.name, known.ttl, known.poll_interval) == (
            "working", "tools/call", "research", 60000, 500,
        )  # fmt: skip
        changed = await log.wait_for(lambda e: isinstance(e, TaskChanged))
        assert changed.task.task_id == "t1" and changed.previous is None and changed.frame_seq == reply.seq
    # A CreateTaskResult for a request that asked for no task.
    assert flagged(plain, "task-capability") == ["error"]


async def test_a_create_task_result_from_a_server_that_did_not_declare_tasks_is_flagged() -> None:
    async with connected({"tools": {}}) as (session, server, _):
        sent = await call(session, server, "tools/call", {"name": "research", "task": {}})
        reply = server.answer(sent, {"task": task()})
    assert "did not declare tasks.requests" in (sent.frame.note or "")
    assert flagged(reply, "task-capability") == ["error"]


async def test_a_create_task_result_is_held_to_the_published_schema() -> None:
    async with connected() as (session, server, _):
        good = await created(session, server)
        bad = await created(session, server, task_id="t2", ttl="a minute", pollInterval=0.5)
    assert flagged(good, "schema") == []
    [verdict] = [v for v in bad.verdicts if v.code == "schema"]
    assert "CreateTaskResult" in verdict.message and "task.ttl" in verdict.message
    assert "task.pollInterval" in verdict.message


async def test_a_task_created_in_a_status_other_than_working_is_flagged() -> None:
    async with connected() as (session, server, _):
        odd = await created(session, server, status="completed")
        fine = await created(session, server, task_id="t2")
    assert flagged(odd, "task-status") == ["warning"]
    assert flagged(fine, "task-status") == []


async def test_a_tool_that_requires_a_task_must_refuse_a_plain_call() -> None:
    async with connected() as (session, server, _):
        listed = await call(session, server, "tools/list")
        required = {**RESEARCH, "execution": {"taskSupport": "required"}}
        server.answer(listed, {"tools": [required]})
        answered = server.answer(
            await call(session, server, "tools/call", {"name": "research"}), {"content": []}
        )
        refused = server.answer(
            await call(session, server, "tools/call", {"name": "research"}),
            None,
            error={"code": -32601, "message": "needs a task"},
        )
    assert flagged(answered, "task-required") == ["warning"]
    assert flagged(refused, "task-required") == []


async def test_a_task_augmented_call_answered_plainly_by_a_declaring_server_is_flagged() -> None:
    async with connected() as (session, server, _):
        server.answer(await call(session, server, "tools/list"), {"tools": [RESEARCH]})
        sent = await call(session, server, "tools/call", {"name": "research", "task": {}})
        plain = server.answer(sent, {"content": []})
        unlisted = await call(session, server, "tools/call", {"name": "echo", "task": {}})
        server.answer(await call(session, server, "tools/list"), {"tools": [{**RESEARCH, "execution": {}}]})
        forbidden = await call(session, server, "tools/call", {"name": "research", "task": {}})
        refused = server.answer(forbidden, None, error={"code": -32601, "message": "no tasks here"})
    assert flagged(plain, "task-ignored") == ["warning"]
    assert sent.frame.note is None and unlisted.frame.note is None
    assert (
        forbidden.frame.note
        == "task-augmented, but tool 'research' does not support tasks (taskSupport forbidden)"
    )
    assert refused.verdicts == []


# --- status ---------------------------------------------------------------------------------------


async def test_status_notifications_are_in_the_revision_and_checked_against_its_schema() -> None:
    async with connected() as (session, server, _):
        # server-everything announces the task before the CreateTaskResult: it is adopted.
        early = server.server_sends(status())
        await created(session, server)
        later = server.server_sends(status(status="input_required", at="2025-11-25T10:00:01Z"))
        bad = server.server_sends(status(task_id="t2", ttl="long", pollInterval="1s"))
    assert early.verdicts == [] and later.verdicts == []  # was: not-in-revision
    assert later.note == "task t1: input_required"
    assert codes(bad) == ["schema"]
    assert "ttl" in bad.verdicts[0].message and "pollInterval" in bad.verdicts[0].message


async def test_a_terminal_status_that_changes_is_flagged_task_status() -> None:
    async with connected() as (session, server, _):
        log = Recorder(session)
        await created(session, server)
        steps = [
            server.server_sends(status(status=s, at=f"2025-11-25T10:00:0{i}Z"))
            for i, s in enumerate(["input_required", "working", "completed"], start=1)
        ]
        revived = server.server_sends(status(status="working", at="2025-11-25T10:00:09Z"))
        changes = [e for e in log.events if isinstance(e, TaskChanged)]
    assert [codes(f) for f in steps] == [[], [], []]
    assert flagged(revived, "task-status") == ["error"]
    assert [(c.previous, c.task.status) for c in changes] == [
        (None, "working"), ("working", "input_required"), ("input_required", "working"),
        ("working", "completed"), ("completed", "working"),
    ]  # fmt: skip


async def test_an_older_snapshot_is_not_a_transition() -> None:
    async with connected() as (session, server, _):
        await created(session, server)
        server.server_sends(status(status="completed", at="2025-11-25T10:00:05Z"))
        # A tasks/get answered before the task completed, delivered after the notification.
        stale = server.answer(
            await call(session, server, "tasks/get", {"taskId": "t1"}), task(at="2025-11-25T10:00:03Z")
        )
        assert session.tasks["t1"].status == "completed"
    assert stale.verdicts == [] and "older state" in (stale.note or "")


# --- tasks/result, tasks/cancel, tasks/list --------------------------------------------------------


async def test_tasks_result_must_name_its_task_in_meta() -> None:
    async with connected() as (session, server, _):
        await created(session, server)
        content = {"content": [{"type": "text", "text": "done"}]}
        bare = server.answer(await call(session, server, "tasks/result", {"taskId": "t1"}), content)
        wrong = server.answer(
            await call(session, server, "tasks/result", {"taskId": "t1"}),
            {**content, "_meta": {RELATED: {"taskId": "t9"}}},
        )
        fine = server.answer(
            await call(session, server, "tasks/result", {"taskId": "t1"}),
            {**content, "_meta": {RELATED: {"taskId": "t1"}}},
        )
        assert session.tasks["t1"].result == {**content, "_meta": {RELATED: {"taskId": "t1"}}}
    assert flagged(bare, "related-task") == ["error"]
    assert flagged(wrong, "related-task") == ["error"]
    assert fine.verdicts == []


async def test_tasks_result_is_held_to_the_underlying_requests_result() -> None:
    async with connected() as (session, server, _):
        await created(session, server)
        sent = await call(session, server, "tasks/result", {"taskId": "t1"})
        broken = server.answer(sent, {"content": "done", "_meta": {RELATED: {"taskId": "t1"}}})
    [verdict] = [v for v in broken.verdicts if v.code == "schema"]
    assert "CallToolResult" in verdict.message


async def test_an_unknown_task_must_be_refused_with_invalid_params() -> None:
    async with connected() as (session, server, _):
        wrong = server.answer(
            await call(session, server, "tasks/result", {"taskId": "nope"}),
            None,
            error={"code": -32603, "message": "no such task"},
        )
        right = server.answer(
            await call(session, server, "tasks/get", {"taskId": "nope"}),
            None,
            error={"code": -32602, "message": "Task not found"},
        )
    assert flagged(wrong, "task-error") == ["warning"]
    assert right.verdicts == []


async def test_tasks_cancel_must_cancel_and_must_refuse_a_terminal_task() -> None:
    async with connected() as (session, server, _):
        await created(session, server)
        not_cancelled = server.answer(
            await call(session, server, "tasks/cancel", {"taskId": "t1"}), task(at="2025-11-25T10:00:01Z")
        )
        await created(session, server, task_id="t2")
        cancelled = server.answer(
            await call(session, server, "tasks/cancel", {"taskId": "t2"}),
            task("t2", "cancelled", at="2025-11-25T10:00:01Z"),
        )
        again = server.answer(
            await call(session, server, "tasks/cancel", {"taskId": "t2"}),
            task("t2", "cancelled", at="2025-11-25T10:00:01Z"),
        )
        refused = server.answer(
            await call(session, server, "tasks/cancel", {"taskId": "t2"}),
            None,
            error={"code": -32602, "message": "already cancelled"},
        )
    assert flagged(not_cancelled, "task-status") == ["error"]
    assert cancelled.verdicts == []
    assert flagged(again, "task-status") == ["error"]
    assert refused.verdicts == []


async def test_tasks_list_adds_every_task_and_its_schema_is_checked() -> None:
    async with connected() as (session, server, _):
        listed = server.answer(
            await call(session, server, "tasks/list"), {"tasks": [task(), task("t2", "completed")]}
        )
        broken = server.answer(await call(session, server, "tasks/list"), {"tasks": [{"taskId": 3}]})
        assert {t: k.status for t, k in session.tasks.items()} == {"t1": "working", "t2": "completed"}
    assert listed.verdicts == []
    assert codes(broken) == ["schema"]


async def test_tasks_list_to_a_server_without_tasks_list_is_noted_on_the_request() -> None:
    async with connected({"tools": {}}) as (session, server, _):
        sent = await call(session, server, "tasks/list")
    assert sent.frame.note == "the server did not declare tasks.list: it may answer -32601"


async def test_progress_on_a_tasks_token_stays_valid_after_the_create_task_result() -> None:
    async with connected() as (session, server, _):
        reply = await created(session, server)
        token = session.tasks["t1"].request_id
        progress = server.server_sends(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": token, "progress": 1},
            }
        )
        stray = server.server_sends(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 99, "progress": 1},
            }
        )
    assert reply.verdicts == [] and progress.verdicts == []
    assert flagged(stray, "unknown-progress-token") == ["error"]


# --- the engine's API --------------------------------------------------------------------------


async def test_call_tool_as_a_task_then_wait_and_fetch_its_result() -> None:
    async with connected() as (session, server, clock):
        calling = asyncio.ensure_future(session.call_tool("research", {"q": 1}, task={"ttl": 1000}))
        sent = await server.next_sent("tools/call")
        assert sent.params["task"] == {"ttl": 1000}
        server.answer(sent, {"task": task()})
        assert (await calling)["task"]["taskId"] == "t1"
        waiting = asyncio.ensure_future(session.wait_task("t1"))
        server.answer(await server.next_sent("tasks/get"), task())
        await clock.wait_until(lambda armed: clock.now() + 0.5 in armed)
        clock.advance(0.5)  # the task's pollInterval
        server.answer(
            await server.next_sent("tasks/get"), task(status="completed", at="2025-11-25T10:00:02Z")
        )
        assert (await waiting).status == "completed"
        fetching = asyncio.ensure_future(session.task_result("t1"))
        result = {"content": [], "_meta": {RELATED: {"taskId": "t1"}}}
        server.answer(await server.next_sent("tasks/result"), result)
        assert await fetching == result
        cancelling = asyncio.ensure_future(session.cancel_task("t1"))
        server.answer(
            await server.next_sent("tasks/cancel"), None, error={"code": -32602, "message": "terminal"}
        )
        with pytest.raises(McpError):
            await cancelling


# --- the server as requestor ------------------------------------------------------------------------


async def test_task_requests_from_the_server_need_the_clients_tasks_capability() -> None:
    server = ScriptedTransport(handshake={"capabilities": {"tools": {}, "tasks": TASKS}})
    options = ClientOptions(clock=ManualClock(), validate=True, capabilities=ClientCapabilities(tasks=False))
    async with ClientSession(server, options) as session:
        log = Recorder(session)
        asked = server.server_sends(
            {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"taskId": "x"}}
        )
        answer = await server.next_sent()
        sampling = server.server_sends(
            {
                "jsonrpc": "2.0",
                "id": 8,
                "method": "sampling/createMessage",
                "params": {"messages": [], "maxTokens": 5, "task": {"ttl": 1000}},
            }
        )
        pending = await log.pending("sampling/createMessage")
        session.reject(pending.key)
    assert flagged(asked, "undeclared-capability") == ["error"]
    assert answer.message["error"]["code"] == -32601
    assert flagged(sampling, "task-capability") == ["warning"]
    assert flagged(sampling, "schema") == []


# --- against server-everything (a real task-capable server) ------------------------------------------


@pytest.fixture(params=["stdio", "http"])
def everything(request: pytest.FixtureRequest) -> Any:
    from sessions.engine import HttpTarget, StdioTarget

    if request.param == "stdio":
        spec = request.getfixturevalue("everything_stdio")
        return StdioTarget(spec["command"], spec["args"])
    return HttpTarget(request.getfixturevalue("everything_http"), transport="http")


@pytest.mark.slow
async def test_server_everything_runs_a_task_to_its_result_without_a_false_verdict(everything: Any) -> None:
    from support.engine import EventLog

    from sessions.engine import connect

    session = connect(everything, ClientOptions(timeout=30, validate=True))
    log = EventLog(session)
    async with session:
        assert session.server_capabilities["tasks"]["requests"] == {"tools": {"call": {}}}
        tools = {t["name"]: t for t in await session.list_all("tools/list", "tools")}
        assert tools["simulate-research-query"]["execution"] == {"taskSupport": "required"}
        created = await session.call_tool("simulate-research-query", {"topic": "tides"}, task={"ttl": 60000})
        task_id = created["task"]["taskId"]
        assert created["task"]["status"] == "working"
        listed = await session.list_tasks()
        assert task_id in [t["taskId"] for t in listed["tasks"]]
        done = await session.wait_task(task_id)
        assert done.status == "completed" and done.name == "simulate-research-query"
        result = await session.task_result(task_id)
        assert "Research Report: tides" in result["content"][0]["text"]
        assert session.tasks[task_id].result == result
        # A second task, cancelled; cancelling it again is refused as the spec says.
        second = (await session.call_tool("simulate-research-query", {"topic": "x"}, task={}))["task"][
            "taskId"
        ]
        assert (await session.cancel_task(second))["status"] == "cancelled"
        with pytest.raises(McpError) as refused:
            await session.cancel_task(second)
        assert refused.value.code == -32602
    statuses = [e.task.status for e in log.events if isinstance(e, TaskChanged) and e.task.task_id == task_id]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    assert log.messages("in", "notifications/tasks/status")  # the server reports changes
    judged = [(f.seq, f.method, v.code, v.message) for f in log.frames for v in f.verdicts]
    assert judged == []


@pytest.mark.slow
async def test_server_everything_asks_for_input_through_tasks_result(everything_stdio: dict) -> None:
    from support.engine import EventLog

    from sessions.engine import StdioTarget, connect

    target = StdioTarget(everything_stdio["command"], everything_stdio["args"])
    session = connect(target, ClientOptions(timeout=30, validate=True))
    log = EventLog(session)
    async with session:
        created = await session.call_tool(
            "simulate-research-query", {"topic": "python", "ambiguous": True}, task={"ttl": 60000}
        )
        task_id = created["task"]["taskId"]
        assert (await session.wait_task(task_id)).status == "input_required"
        # As the spec says: on input_required, call tasks/result; the question arrives on it.
        fetching = asyncio.ensure_future(session.task_result(task_id))
        pending = await log.pending("elicitation/create")
        assert pending.params["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        session.respond(pending.key, {"action": "accept", "content": {"interpretation": "snake"}})
        result = await asyncio.wait_for(fetching, 30)
        assert "snake" in result["content"][0]["text"]
    judged = [(f.seq, f.method, v.code, v.message) for f in log.frames for v in f.verdicts]
    assert judged == []
