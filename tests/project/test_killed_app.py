"""`mcp-inspector` killed with SIGKILL leaves no server process behind: its watchdog kills them.

tests/servers/daemonizing.py leaves a ``setsid()`` child and a double-forked daemon behind, ignores
SIGTERM and the end of its stdin, and writes the three pids to a file.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.app_process import LOGIN_LINE, inspector
from support.hosted import connect, log_in
from support.paths import SERVERS
from support.processes import free_port

pytestmark = pytest.mark.slow

DAEMONIZING = SERVERS / "daemonizing.py"


def alive(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_for(condition: object, timeout: float, what: object) -> None:
    """Wait for ``condition``; ``what`` (a text, or a function giving one) says why it did not come."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.01)


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                data = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            if int(data[data.rindex(b")") + 2 :].split()[1]) == pid:
                found.append(int(name))
    return found


def test_a_server_and_everything_it_left_behind_ends_soon_after_a_sigkill_of_the_app(tmp_path: Path) -> None:
    pidfile, port = tmp_path / "pids.json", free_port()
    left: list[int] = []
    with inspector("--port", str(port), data_dir=tmp_path / "data") as (app, output):
        token = output.wait_for(LOGIN_LINE)["token"]
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as browser:
                headers = log_in(browser, token)
                connect(
                    browser, headers, {"command": sys.executable, "args": [str(DAEMONIZING), str(pidfile)]}
                )
            wait_for(pidfile.exists, 30, "the server never wrote its pids")
            pids = json.loads(pidfile.read_text())
            left += pids.values()

            # The app's own watchdog, which must not outlive its work either (told of the server once
            # it has started, so it may come a moment after the server's pids).
            def watchdogs() -> list[int]:
                return [pid for pid in children(app.pid) if b"_processes.py" in cmdline(pid)]

            wait_for(lambda: len(watchdogs()) == 1, 10, f"no single watchdog among {children(app.pid)}")
            left += watchdogs()
            assert all(alive(pid) for pid in left)
            # The setsid child and the daemon left the server's session: no parent-death signal reaches them.
            assert os.getsid(pids["setsid"]) != os.getsid(pids["server"]) != os.getsid(pids["daemon"])

            app.kill()  # no clean-up of its own can run
            app.wait(timeout=10)
            # The watchdog stops and kills at once; the bound leaves room for a loaded machine's scheduling.
            wait_for(
                lambda: not any(alive(pid) for pid in left),
                5.0,
                lambda: f"still alive: {[p for p in left if alive(p)]}",
            )
        finally:
            for pid in left:
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
