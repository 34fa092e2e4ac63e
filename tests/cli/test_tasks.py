"""Tasks (2025-11-25) outside the engine: the CLI's task methods, and the session page's Tasks panel.

The engine's task rules are in tests/engine/test_engine_tasks.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_one_error_line, result_of, run_cli, target
from support.web import (
    live_runtime,
    logged_in_client,
    make_user,
    session_communicator,
    start_session,
    stdio_config,
    wait_until,
)

from inspector.cli.arguments import UsageError, parse_args
from sessions.models import TimelineFrame
from sessions.timeline.listings import latest_result

# --- the CLI ---------------------------------------------------------------------------------------------


def test_the_cli_parses_task_methods_and_options() -> None:
    assert parse_args(["srv", "--method", "tasks/get", "--task-id", "t1"]).task_id == "t1"
    assert parse_args(["srv", "--method", "tasks/list"]).method == "tasks/list"
    call = ["srv", "--method", "tools/call", "--tool-name", "research"]
    assert parse_args([*call, "--task"]).task == {}
    assert parse_args([*call, "--task", "60000"]).task == {"ttl": 60000}
    assert parse_args(call).task is None
    for wrong, why in [
        (["srv", "--method", "tasks/result"], "tasks/result needs --task-id"),
        (["srv", "--method", "tasks/list", "--task"], "--task goes with --method tools/call"),
        ([*call, "--task", "soon"], "invalid --task 'soon'"),
    ]:
        with pytest.raises(UsageError, match=why):
            parse_args(wrong)


@pytest.mark.slow
def test_the_cli_runs_a_tool_as_a_task_and_prints_its_result(everything_stdio: dict, tmp_path: Path) -> None:
    record = tmp_path / "frames.jsonl"
    result = result_of(
        run_cli(
            *target(everything_stdio),
            "--method",
            "tools/call",
            "--tool-name",
            "simulate-research-query",
            "--tool-arg",
            "topic=tides",
            "--task",
            "60000",
            "--record",
            str(record),
        )  # fmt: skip
    )
    assert "Research Report: tides" in result["content"][0]["text"]
    task_id = result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
    frames = [json.loads(line) for line in record.read_text().splitlines()]
    sent = [f["method"] for f in frames if f["kind"] == "message" and f["direction"] == "out"]
    assert sent[:2] == ["initialize", "notifications/initialized"]
    # --record lists the tools first, to hold the result to the tool's outputSchema.
    assert sent[2:4] == ["tools/list", "tools/call"] and sent[-1] == "tasks/result" and "tasks/get" in sent
    call = next(f for f in frames if f["direction"] == "out" and f["method"] == "tools/call")
    assert json.loads(call["raw"])["params"]["task"] == {"ttl": 60000}
    created = next(f for f in frames if f["direction"] == "in" and f["method"] == "tools/call")
    assert created["note"] == f"task {task_id[:8]}… created (working)"
    # Checked against the schema (--record), the whole exchange is clean.
    assert [(f["seq"], f["verdicts"]) for f in frames if f["verdicts"]] == []


@pytest.mark.slow
def test_the_cli_lists_gets_and_cancels_tasks(everything_stdio: dict) -> None:
    assert result_of(run_cli(*target(everything_stdio), "--method", "tasks/list")) == {
        "tasks": [],
        "_meta": {},
    }
    # A new stdio server knows no task: the server refuses, as the spec says, with -32602.
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        line = assert_one_error_line(
            run_cli(*target(everything_stdio), "--method", method, "--task-id", "t0"), 1
        )
        assert f"{method} failed" in line and "-32602" in line


def test_tasks_are_declared_with_the_answering_policies_unless_no_tasks() -> None:
    assert parse_args(["srv", "--method", "tools/list", "--sampling", "reject"]).tasks is True
    assert parse_args(["srv", "--method", "tools/list", "--sampling", "reject", "--no-tasks"]).tasks is False


@pytest.mark.slow
def test_the_cli_answers_a_sampling_task_by_its_policy(everything_stdio: dict, tmp_path: Path) -> None:
    reply = tmp_path / "reply.json"
    sampled = {"role": "assistant", "content": {"type": "text", "text": "canned"}, "model": "m"}
    reply.write_text(json.dumps(sampled))
    record = tmp_path / "frames.jsonl"
    call = [
        *target(everything_stdio), "--method", "tools/call", "--tool-name", "trigger-sampling-request-async",
        "--tool-arg", "prompt=hi", "--sampling", f"@{reply}",
    ]  # fmt: skip
    text = result_of(run_cli(*call, "--record", str(record)))["content"][0]["text"]
    assert text.startswith("[COMPLETED]") and "canned" in text
    frames = [json.loads(line) for line in record.read_text().splitlines()]
    asked = {f["method"] for f in frames if f["direction"] == "in" and f["rpc_kind"] == "request"}
    assert {"sampling/createMessage", "tasks/get", "tasks/result"} <= asked
    assert [(f["seq"], f["verdicts"]) for f in frames if f["verdicts"]] == []
    # Without the capability the server does not offer the tool.
    refused = result_of(run_cli(*call, "--no-tasks"))
    assert refused["isError"] is True and "not found" in refused["content"][0]["text"]


# --- the Tasks panel and the Tools panel's "run as task" ------------------------------------------------


async def _listed(everything_stdio: dict) -> tuple[Any, Any, Any, str]:
    alice = await make_user()
    session = await start_session(alice, stdio_config(everything_stdio["command"], everything_stdio["args"]))
    client = await logged_in_client(alice)
    base = f"/s/{session.public_id}/"
    assert (await client.post(base + "tools/list", {"page": "first"})).status_code == 200
    await wait_until(lambda: latest_result(session, "tools/list"), what="stored tools/list")
    return alice, session, client, base


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_tool_run_as_a_task_shows_live_in_the_tasks_panel_with_its_result(
    everything_stdio: dict,
) -> None:
    async with live_runtime():
        alice, session, client, base = await _listed(everything_stdio)
        form = (await client.get(base + "tools/form", {"name": "simulate-research-query"})).content.decode()
        assert 'name="as_task" value="1" checked' in form and "taskSupport: required" in form
        plain = (await client.get(base + "tools/form", {"name": "echo"})).content.decode()
        assert "taskSupport: forbidden" in plain and 'name="as_task" value="1">' in plain

        panel = (await client.get(base + "panel/tasks")).content.decode()
        assert "No task in this session yet." in panel and "List tasks</button>" in panel
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
        assert (await communicator.connect(timeout=10))[0]

        bad = await client.post(
            base + "tools/call",
            {
                "name": "simulate-research-query",
                "mode": "form",
                "arg.topic": "x",
                "as_task": "1",
                "task_ttl": "soon",
            },
        )
        assert bad.status_code == 422 and "whole number of milliseconds" in bad.content.decode()
        card = await client.post(
            base + "tools/call",
            {"name": "simulate-research-query", "mode": "form", "arg.topic": "<b>tides</b>", "as_task": "1",
             "task_ttl": "60000"},
        )  # fmt: skip
        html = card.content.decode()
        assert card.status_code == 200 and "Task created: <code>" in html

        # The card answers before the recorder has stored the request (stored=False): wait for it.
        def sent_call() -> TimelineFrame | None:
            last = TimelineFrame.objects.filter(session=session, method="tools/call", direction="out").last()
            return last if last is not None and b"simulate-research-query" in bytes(last.raw) else None

        sent = await wait_until(sent_call, what="the task-augmented call stored")
        assert json.loads(bytes(sent.raw))["params"]["task"] == {"ttl": 60000}
        task_id = html.split("Task created: <code>")[1].split("</code>")[0]

        # The server's status notifications reach the open page: the list follows them to completed.
        seen = ""
        async with asyncio.timeout(30):
            while f'data-task-id="{task_id}" data-status="completed"' not in seen:
                seen += await communicator.receive_from(timeout=30)
        assert (
            'id="task-list" class="task-list" aria-label="Tasks" aria-live="polite" hx-swap-oob="true"'
            in seen
        )
        await communicator.disconnect()

        panel = (await client.get(base + "panel/tasks")).content.decode()
        assert f'data-task-id="{task_id}" data-status="completed"' in panel
        assert "<code>simulate-research-query</code>" in panel and "Fetch result</button>" in panel
        result = await client.post(base + "tasks/result", {"task_id": task_id})
        assert (
            result.status_code == 200
            and "Research Report: &lt;b&gt;tides&lt;/b&gt;" in result.content.decode()
        )
        await wait_until(
            lambda: TimelineFrame.objects.filter(
                session=session, method="tasks/result", direction="in"
            ).exists(),
            what="stored tasks/result",
        )
        panel = (await client.get(base + "panel/tasks")).content.decode()
        assert "<summary>Result</summary>" in panel and "&lt;b&gt;tides&lt;/b&gt;" in panel
        assert "<b>tides</b>" not in panel

        # A second task, cancelled from the panel; tasks/list lists both.
        card = await client.post(
            base + "tools/call",
            {"name": "simulate-research-query", "mode": "form", "arg.topic": "y", "as_task": "1"},
        )
        second = card.content.decode().split("Task created: <code>")[1].split("</code>")[0]
        cancelled = await client.post(base + "tasks/cancel", {"task_id": second})
        assert cancelled.status_code == 200 and "&quot;cancelled&quot;" in cancelled.content.decode()
        listed = (await client.post(base + "tasks/list")).content.decode()
        assert f'data-task-id="{second}" data-status="cancelled"' in listed
        assert f'data-task-id="{task_id}" data-status="completed"' in listed

        assert (await client.post(base + "tasks/delete", {"task_id": second})).status_code == 400
        assert (await client.post(base + "tasks/get", {})).status_code == 400
        verdicts = await TimelineFrame.objects.filter(session=session).exclude(verdicts=[]).acount()
        assert verdicts == 0
