"""A recording of the stateless revision (2026-07-28) replayed: it opens with server/discover, each request
carries the replaying client's own ``_meta``, and a call the server answered ``input_required`` is one step
whose retries carry the recorded client's input responses (elicitation, sampling, roots)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import result_of, run_cli, run_replay
from support.paths import SERVERS

pytestmark = pytest.mark.slow

TIMEOUT = 60
STATELESS = [sys.executable, str(SERVERS / "sdk_stateless.py"), "stdio"]
CONVERSATION = {
    "steps": [
        {"method": "tools/list"},
        {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        {"method": "tools/call", "params": {"name": "confirm_name", "arguments": {"greeting": "Hi"}}},
        {"method": "tools/call", "params": {"name": "two_rounds", "arguments": {}}},
        {"method": "tools/call", "params": {"name": "roots_and_llm", "arguments": {}}},
        {"method": "prompts/get", "params": {"name": "greet", "arguments": {"name": "Ada"}}},
    ]
}


def sent(path: Path, method: str) -> list[dict[str, Any]]:
    """The params of each request of ``method`` the client sent, in a recording."""
    frames = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        json.loads(f["raw"]).get("params") or {}
        for f in frames
        if f["kind"] == "message" and f["direction"] == "out" and f.get("method") == method
    ]


def test_a_stateless_recording_with_input_required_rounds_replays_unchanged(tmp_path: Path) -> None:
    collection, recorded, replayed = (
        tmp_path / "c.json",
        tmp_path / "recorded.jsonl",
        tmp_path / "replayed.jsonl",
    )
    elicited, sampled, report = (
        tmp_path / "elicited.json",
        tmp_path / "sampled.json",
        tmp_path / "report.json",
    )
    collection.write_text(json.dumps(CONVERSATION))
    elicited.write_text(json.dumps({"action": "accept", "content": {"name": "Ada"}}))
    sampled.write_text(
        json.dumps({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"})
    )
    ran = result_of(
        run_cli(
            *STATELESS, "--protocol-version", "2026-07-28", "--collection", str(collection),
            "--elicitation", f"@{elicited}", "--sampling", f"@{sampled}", "--root", "file:///tmp/work",
            "--record", str(recorded), timeout=TIMEOUT,
        )
    )  # fmt: skip
    assert ran["failed"] == 0
    # The replay has no answers of its own to give (no --elicitation, --sampling nor --root): the
    # recording's are the ones sent, or the calls would have come out otherwise.
    proc = run_replay(
        str(recorded), *STATELESS, "--no-latency", "--json", str(report), "--record", str(replayed),
        timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1:] == [
        "step 0 server/discover: unchanged",
        "step 1 tools/list: unchanged",
        "step 2 tools/call add: unchanged",
        "step 3 tools/call confirm_name: unchanged",
        "step 4 tools/call two_rounds: unchanged",
        "step 5 tools/call roots_and_llm: unchanged",
        "step 6 prompts/get greet: unchanged",
        "7 steps, 0 changed",
    ]
    calls = sent(replayed, "tools/call")
    retries = [params for params in calls if "inputResponses" in params]
    assert [params["name"] for params in retries] == [
        "confirm_name",
        "two_rounds",
        "two_rounds",
        "roots_and_llm",
    ]
    assert retries[0]["inputResponses"] == {"name": {"action": "accept", "content": {"name": "Ada"}}}
    assert retries[-1]["inputResponses"]["roots"] == {"roots": [{"uri": "file:///tmp/work"}]}
    assert retries[-1]["inputResponses"]["llm"]["content"] == {"type": "text", "text": "4"}
    # Each request carries the replay's own stamp once, with the recorded client's info and capabilities.
    meta = calls[0]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcp-inspector-cli"
    assert sent(replayed, "server/discover") and not sent(replayed, "initialize")
    data = json.loads(report.read_text())
    assert data["notes"] == [] and data["changed"] == 0
