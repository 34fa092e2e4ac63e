"""Running the one-shot CLI from a test: as a real process (``run_cli``, ``run_replay``), or in this
process (``run_cli_in_process``) for what needs no server, read back the same way."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from support.paths import REPO

TIMEOUT = 30


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m inspector --cli ARGS`` and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "inspector", "--cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_replay(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m inspector replay ARGS`` and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "inspector", "replay", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_cli_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``inspector.cli.main(ARGS)`` here: its exit code and what it printed, as ``run_cli`` returns them."""
    from inspector import cli

    capsys.readouterr()
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["mcp-inspector", "--cli", *args], code, out, err)


def target(spec: dict) -> list[str]:
    return [spec["command"], *spec["args"]]


def result_of(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return json.loads(proc.stdout)


def assert_one_error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]
