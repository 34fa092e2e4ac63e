"""`mcp-inspector` as a real process, for the tests that start one: its output read line by line."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.processes import stop_process

MCP_INSPECTOR = str(Path(sys.executable).with_name("mcp-inspector"))
STARTUP_TIMEOUT = 30.0
LOGIN_LINE = re.compile(r"Open this URL to log in.*: (?P<url>http://\S+/auth/token\?token=(?P<token>\S+))")


class Output:
    """A process's merged stdout and stderr, read line by line on a thread so waits can time out."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._stream = proc.stdout
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.text = ""
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            self._lines.put(line)
        self._lines.put(None)

    def wait_for(self, pattern: re.Pattern[str], timeout: float = STARTUP_TIMEOUT) -> re.Match[str]:
        """Return the match of the first line that matches pattern; fail at EOF or the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"no line matching {pattern.pattern!r} within {timeout}s; output:\n{self.text}")
            if line is None:
                pytest.fail(f"the process ended before printing {pattern.pattern!r}; output:\n{self.text}")
            self.text += line
            match = pattern.search(line)
            if match:
                return match

    def finish(self) -> str:
        """Collect the rest of the output once the process has exited, and close the pipe."""
        self._thread.join(timeout=10)
        while True:
            line = self._lines.get_nowait() if not self._lines.empty() else None
            if line is None:
                break
            self.text += line
        self._stream.close()
        return self.text


@contextlib.contextmanager
def inspector(*args: str, data_dir: Path) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """Run mcp-inspector with a data dir of its own; terminate it on exit."""
    env = {k: v for k, v in os.environ.items() if k not in ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY")}
    # INFO, so the access log is on: it must still keep the token out.
    env |= {"INSPECTOR_DATA_DIR": str(data_dir), "LOG_LEVEL": "INFO", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [MCP_INSPECTOR, "--no-browser", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    output = Output(proc)
    try:
        yield proc, output
    finally:
        stop_process(proc)
        output.finish()
