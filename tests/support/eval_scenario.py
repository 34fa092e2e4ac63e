"""The evals' proof: a suite of five tests over server-everything, and the scripts of two scripted
models (tests/servers/scripted_llm.py) that pass it, but for one planted regression: the second run of
``sum`` with ``claude`` adds the wrong numbers."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from support.paths import SERVERS
from support.processes import free_port, start_http_server

KEY = "sk-scripted-eval-key"

SUITE: dict[str, Any] = {
    "name": "everything",
    "system": "Use the server's tools.",
    "tests": [
        {
            "name": "echo",
            "prompt": "Echo the word hello",
            "expect": {
                "calls": [{"tool": "echo", "arguments": {"message": "hello"}}],
                "answer_contains": "hello",
            },
        },
        {
            "name": "sum",
            "prompt": "Add 2 and 3",
            "expect": {
                "calls": [{"tool": "get-sum", "arguments": {"a": 2, "b": 3}}],
                "answer_matches": r"\b5\b",
                "max_turns": 3,
            },
        },
        {
            "name": "echo-then-sum",
            "prompt": "Echo one, then add 1 and 1",
            "expect": {
                "calls": ["echo", {"tool": "get-sum", "arguments": {"a": 1, "b": 1}}],
                "order": "exact",
            },
        },
        {
            "name": "no-tools",
            "prompt": "Just say hi",
            "expect": {"calls": [], "order": "exact", "answer_contains": "hi"},
        },
        {
            "name": "greeting",
            "prompt": "Echo a greeting",
            "expect": {
                "calls": [{"tool": "echo", "arguments": {"message": {"$regex": "^(hi|hello)"}}}],
                "max_turns": 2,
            },
        },
    ],
}


def _call(id_: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": id_, "name": name, "arguments": arguments}]


def steps(regression: bool) -> list[dict[str, Any]]:
    """A model that passes every test, every run; with ``regression``, its second ``sum`` adds 2 and 2."""
    good_sum = {
        "match": "Add 2 and 3",
        "text": "Adding.",
        "tool_calls": _call("s1", "get-sum", {"a": 2, "b": 3}),
    }
    planted = []
    if regression:
        # Steps without repeat are taken once, in order: the first run's sum, then the second's.
        planted = [good_sum, {**good_sum, "tool_calls": _call("s2", "get-sum", {"a": 2, "b": 2})}]
    return [
        *planted,
        {
            "match": "Echo the word hello",
            "tool_calls": _call("e1", "echo", {"message": "hello"}),
            "repeat": True,
        },
        {"match": "Echo: hello", "text": "The server said hello.", "repeat": True},
        {**good_sum, "repeat": True},
        {"match": "The sum of 2 and 3 is 5", "text": "It is 5.", "repeat": True},
        {"match": "The sum of 2 and 2 is 4", "text": "It is 4.", "repeat": True},
        {"match": "Echo one", "tool_calls": _call("e2", "echo", {"message": "one"}), "repeat": True},
        {"match": "Echo: one", "tool_calls": _call("s3", "get-sum", {"a": 1, "b": 1}), "repeat": True},
        {"match": "The sum of 1 and 1 is 2", "text": "Echoed one; 1 + 1 = 2.", "repeat": True},
        {"match": "Just say hi", "text": "Hi there!", "repeat": True},
        {
            "match": "Echo a greeting",
            "tool_calls": _call("g1", "echo", {"message": "hi there"}),
            "repeat": True,
        },
        {"match": "Echo: hi there", "text": "Greeted.", "repeat": True},
    ]


@contextlib.contextmanager
def scripted_model(folder: Path, name: str, regression: bool = False) -> Iterator[str]:
    """A scripted model server with the scenario's steps; yields its base URL."""
    script, log = folder / f"{name}.json", folder / f"{name}-requests.jsonl"
    script.write_text(json.dumps({"key": KEY, "steps": steps(regression)}))
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)], port
    ):
        yield f"http://127.0.0.1:{port}/v1"


def models(gpt_url: str, claude_url: str, **extra: str) -> str:
    """INSPECTOR_LLM_MODELS for the two scripted models (``extra``: name → URL of more OpenAI ones)."""
    listed = [
        {"name": "gpt", "url": gpt_url, "model": "gpt-scripted", "api_key": KEY},
        {"name": "claude", "api": "anthropic", "url": claude_url, "model": "claude-scripted", "api_key": KEY},
    ]
    listed += [{"name": n, "url": u, "model": "x", "api_key": KEY, "timeout": 1} for n, u in extra.items()]
    return json.dumps(listed)
