"""Processes the tests start: free ports, HTTP servers waited on until they listen, and stopping them."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

import pytest

from support.paths import REPO

STARTUP_TIMEOUT = 20.0
STOP_GRACE = 5.0


@functools.cache
def modes_of(script: Path) -> frozenset[str]:
    """The modes a misbehaving server script offers: its MODES literal, read without importing it."""
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MODES" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    raise LookupError(f"{script} has no MODES")


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_pytest(*args: str, env: Mapping[str, str], timeout: float = 300) -> str:
    """Run pytest on ``args`` in a process of its own, with ``env``, from the project's folder; fail with
    the end of its output unless it passed; return its output."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def _log_tail(log: IO[bytes], limit: int = 4000) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:]


def stop_process(proc: subprocess.Popen, grace: float = STOP_GRACE) -> None:
    """Terminate `proc`, then kill it if it is still alive after `grace` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)


@contextlib.contextmanager
def start_http_server(
    argv: Sequence[str],
    port: int,
    env: Mapping[str, str] | None = None,
    timeout: float = STARTUP_TIMEOUT,
) -> Iterator[subprocess.Popen]:
    """Start `argv` as a subprocess and wait until 127.0.0.1:`port` accepts connections.

    `env` entries are added to the current environment. The server's stdout and stderr go to a temporary
    file whose tail is shown if the server exits or does not listen within `timeout` seconds. On exit the
    process is terminated, then killed after a grace period.
    """
    full_env = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=full_env
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"server {list(argv)} did not listen on port {port} within {timeout}s; "
                        f"output:\n{_log_tail(log)}"
                    )
                try:  # doubles as the poll interval and the "did it die?" check
                    code = proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    continue
                pytest.fail(
                    f"server {list(argv)} exited with code {code} before listening; output:\n{_log_tail(log)}"
                )
            try:
                yield proc
            except BaseException:
                # A test that failed against the server shows what the server said meanwhile.
                print(f"server {list(argv)} output:\n{_log_tail(log)}", file=sys.stderr)
                raise
        finally:
            stop_process(proc)


@dataclasses.dataclass(frozen=True)
class HttpsServer:
    url: str
    ca_file: str
    """The PEM of the private CA that signed the server's certificate (nobody else trusts it)."""
