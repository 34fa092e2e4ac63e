"""Tasks (2025-11-25) outside the engine: the CLI's task methods, and the session page's Tasks panel.

The engine's task rules are in tests/test_engine_tasks.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli import assert_one_error_line, result_of, run_cli, target

from inspector.cli.arguments import UsageError, parse_args

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
            *target(everything_stdio), "--method", "tools/call", "--tool-name", "simulate-research-query",
            "--tool-arg", "topic=tides", "--task", "60000", "--record", str(record),
        )  # fmt: skip
    )
    assert "Research Report: tides" in result["content"][0]["text"]
    task_id = result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
    frames = [json.loads(line) for line in record.read_text().splitlines()]
    sent = [f["method"] for f in frames if f["kind"] == "message" and f["direction"] == "out"]
    assert sent[:2] == ["initialize", "notifications/initialized"]
    assert sent[2] == "tools/call" and sent[-1] == "tasks/result" and "tasks/get" in sent
    call = next(f for f in frames if f["direction"] == "out" and f["method"] == "tools/call")
    assert json.loads(call["raw"])["params"]["task"] == {"ttl": 60000}
    created = next(f for f in frames if f["direction"] == "in" and f["method"] == "tools/call")
    assert created["note"] == f"task {task_id[:8]}… created (working)"
    # Checked against the schema (--record), the whole exchange is clean.
    assert [(f["seq"], f["verdicts"]) for f in frames if f["verdicts"]] == []


@pytest.mark.slow
def test_the_cli_lists_gets_and_cancels_tasks(everything_stdio: dict) -> None:
    assert result_of(run_cli(*target(everything_stdio), "--method", "tasks/list")) == {"tasks": [], "_meta": {}}
    # A new stdio server knows no task: the server refuses, as the spec says, with -32602.
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        line = assert_one_error_line(run_cli(*target(everything_stdio), "--method", method, "--task-id", "t0"), 1)
        assert f"{method} failed" in line and "-32602" in line
