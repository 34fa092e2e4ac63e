"""The replay's proof against two builds of our own server that differ in planted ways
(tests/servers/planted.py): recorded against build A with ``--record``, replayed against build B, each
planted change is reported once, at its step and path, and nothing else; replayed against A, nothing.
The same at the stateless revision (2026-07-28), which opens with server/discover."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.cli import result_of, run_cli, run_replay, target

pytestmark = pytest.mark.slow

TIMEOUT = 60

CONVERSATION = {
    "steps": [
        {"method": "tools/list"},
        {"method": "tools/call", "params": {"name": "hello", "arguments": {}}},
        {
            "method": "tools/call",
            "params": {"name": "greet", "arguments": {"name": "Ada", "greeting": "hey"}},
        },
        {"method": "tools/call", "params": {"name": "picture", "arguments": {}}},
        {"method": "tools/call", "params": {"name": "divide", "arguments": {"a": 6, "b": 3}}},
        {"method": "tools/call", "params": {"name": "wait", "arguments": {}}},
    ]
}

PLANTED = [
    (0, "initialize", "$.result.capabilities.prompts", "removed"),
    (1, "tools/list", '$.result.tools[?(@.name=="greet")].inputSchema.required', "required changed"),
    (1, "tools/list", '$.result.tools[?(@.name=="retired")]', "removed"),
    (1, "tools/list", '$.result.tools[?(@.name=="fresh")]', "added"),
    (2, "tools/call", "$.result.content[0].text", "value changed"),
    (4, "tools/call", "$.result.content", "content types changed"),
    (5, "tools/call", "$.result.isError", "isError changed"),
    (6, "tools/call", "latency_ms", "slower"),
]


REVISIONS = [pytest.param("2025-11-25", id="handshake"), pytest.param("2026-07-28", id="stateless")]


def record(planted: dict, folder: Path, revision: str) -> Path:
    """The conversation above, recorded against build A with ``--record`` at ``revision``."""
    collection, recorded = folder / "conversation.json", folder / "recorded.jsonl"
    collection.write_text(json.dumps(CONVERSATION))
    ran = result_of(
        run_cli(
            *target(planted), "--protocol-version", revision, "--collection", str(collection),
            "--record", str(recorded), timeout=TIMEOUT,
        )
    )  # fmt: skip
    assert ran["failed"] == 0
    return recorded


def replay(
    recorded: Path, folder: Path, *build: str, slower: int | None
) -> tuple[subprocess.CompletedProcess[str], Any]:
    """A replay with every rule on (latency too); once more if the machine's load alone made a step other
    than the ``slower`` one planted slower (the rule is about the server; the report says what each run
    measured)."""
    report = folder / "report.json"
    for _ in range(2):
        proc = run_replay(str(recorded), *build, "--json", str(report), timeout=TIMEOUT)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        data = json.loads(report.read_text())
        noise = [
            d
            for s in data["report"]
            for d in s["differences"]
            if d["rule"] == "slower" and d["step"] != slower
        ]
        if not noise:
            break
    return proc, data


@pytest.mark.parametrize("revision", REVISIONS)
def test_each_planted_change_is_reported_once_at_its_step_and_path_and_nothing_else(
    planted_stdio: dict, tmp_path: Path, revision: str
) -> None:
    recorded = record(planted_stdio, tmp_path, revision)
    proc, data = replay(recorded, tmp_path, *target(planted_stdio), "--build", "B", slower=6)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == ""
    found = [(d["step"], d["method"], d["path"], d["rule"]) for s in data["report"] for d in s["differences"]]
    opening = "server/discover" if revision == "2026-07-28" else "initialize"
    assert found == [
        (step, opening if step == 0 else method, path, rule) for step, method, path, rule in PLANTED
    ]
    # Each with both values.
    changes = {(d["step"], d["rule"]): d for s in data["report"] for d in s["differences"]}
    assert changes[0, "removed"]["recorded"] == {"listChanged": False}
    assert changes[0, "removed"]["absent"] == "replayed"
    assert (changes[1, "required changed"]["recorded"], changes[1, "required changed"]["replayed"]) == (
        ["name"],
        ["name", "greeting"],
    )
    assert changes[1, "added"]["replayed"]["name"] == "fresh" and changes[1, "added"]["absent"] == "recorded"
    assert (changes[2, "value changed"]["recorded"], changes[2, "value changed"]["replayed"]) == (
        "hello, world",
        "hello, world!",
    )
    types = changes[4, "content types changed"]
    assert (types["recorded"], types["replayed"]) == (["text"], ["image"])
    assert (changes[5, "isError changed"]["recorded"], changes[5, "isError changed"]["replayed"]) == (
        False,
        True,
    )
    slower = changes[6, "slower"]
    assert slower["replayed"] >= 500 > 2 * slower["recorded"]
    assert [s["changed"] for s in data["report"]] == [True, True, True, False, True, True, True]
    assert data["changed"] == 6 and proc.stdout.splitlines()[-1] == "7 steps, 6 changed"
    assert "step 3 tools/call greet: unchanged" in proc.stdout.splitlines()


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_build_it_was_recorded_against_replays_unchanged(
    planted_stdio: dict, tmp_path: Path, revision: str
) -> None:
    recorded = record(planted_stdio, tmp_path, revision)
    proc, data = replay(recorded, tmp_path, *target(planted_stdio), "--build", "A", slower=None)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert data["changed"] == 0 and proc.stdout.splitlines()[-1] == "7 steps, 0 changed"
    assert data["report"][0]["method"] == ("server/discover" if revision == "2026-07-28" else "initialize")
