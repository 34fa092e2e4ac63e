"""The stdio tap as a real process between real hosts and real servers: what passes is unchanged, the
exit code and stderr too, the server dies with the tap, and the frames reach the inspector."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli
from support.paths import REPO, SERVERS

pytestmark = pytest.mark.slow

TAP = [sys.executable, "-m", "inspector", "tap"]


def tap_env(data_dir: Path) -> dict[str, str]:
    return {**os.environ, "INSPECTOR_DATA_DIR": str(data_dir)}


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def wait_for(condition: Any, timeout: float = 15.0, what: str = "the condition") -> Any:
    """Poll ``condition`` until it is truthy or the deadline passes (a process's state has no event)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def cli_through_tap(tmp_path: Path, spec: dict, *args: str, record: Path | None = None) -> Any:
    """The CLI's output for ``args`` against the server, with and without the tap in between."""
    direct = run_cli(*args, "--", spec["command"], *spec["args"])
    extra = ["--record", str(record)] if record else []
    os.environ["INSPECTOR_DATA_DIR"] = str(tmp_path)
    try:
        tapped = run_cli(*args, "--", *TAP, "--name", "t", *extra, "--", spec["command"], *spec["args"])
    finally:
        del os.environ["INSPECTOR_DATA_DIR"]
    return direct, tapped


def test_our_cli_gets_the_same_answers_from_server_everything_through_the_tap(
    tmp_path: Path, everything_stdio: dict
) -> None:
    record = tmp_path / "frames.jsonl"
    for args in (
        ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=héllo"],
        ["--method", "prompts/list"],
    ):
        direct, tapped = cli_through_tap(tmp_path, everything_stdio, *args, record=record)
        assert direct.returncode == tapped.returncode == 0, tapped.stderr
        assert tapped.stdout == direct.stdout
    frames = records(record)
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    methods = [(f["direction"], f["method"]) for f in frames if f["kind"] == "message"]
    assert ("out", "initialize") in methods and ("in", "prompts/list") in methods
    assert frames[0]["transport"]["state"] == "spawned" and frames[-1]["transport"]["state"] == "closed"
    answer = next(f for f in frames if f["direction"] == "in" and f["method"] == "initialize")
    assert answer["pair_seq"] and answer["latency_ms"] is not None and answer["verdicts"] == []


def test_the_python_sdk_server_answers_the_same_through_the_tap(tmp_path: Path, sdk_stdio: dict) -> None:
    direct, tapped = cli_through_tap(tmp_path, sdk_stdio, "--method", "tools/list")
    assert direct.returncode == tapped.returncode == 0, tapped.stderr
    assert tapped.stdout == direct.stdout
    assert json.loads(tapped.stdout)["tools"]


def test_the_bytes_pass_unchanged_both_ways_with_stderr_and_the_exit_code(tmp_path: Path) -> None:
    received = tmp_path / "received"
    sent = (
        b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
        b'  {  "jsonrpc" : "2.0" , "id" : 2 , "method" : "ping" }  \n'
        b'{"jsonrpc":"2.0","method":"x","params":{"t":"\\u00e9\\ud83d\\ude00 caf\xc3\xa9"}}\r\n'
        b"\n"
        b"\xff\xfe not utf-8\n"
        b'{"jsonrpc":"2.0","id":3,"method":"ping"}'  # no newline at the end
    )
    record = tmp_path / "frames.jsonl"
    done = subprocess.run(
        [
            *TAP,
            "--record",
            str(record),
            "--",
            sys.executable,
            str(SERVERS / "tap_echo.py"),
            str(received),
            "7",
        ],
        input=sent,
        capture_output=True,
        env=tap_env(tmp_path),
        cwd=REPO,
        timeout=30,
    )
    assert received.read_bytes() == sent
    assert done.stdout == sent
    assert done.stderr == "tap_echo: started, ünïcode on stderr\n".encode()
    assert done.returncode == 7
    frames = records(record)
    out = [f for f in frames if f["kind"] == "message" and f["direction"] == "out"]
    assert len(out) == 5  # the empty line is no message
    assert out[2]["raw"].endswith('café"}}') and out[3]["raw_encoding"] == "latin-1"
    assert [f["transport"]["stdio"]["returncode"] for f in frames if f["kind"] == "exit"] == [7]
    assert [f["raw"] for f in frames if f["kind"] == "stderr"] == ["tap_echo: started, ünïcode on stderr"]


def _children(pid: int) -> list[str]:
    """The tap's child processes (its server, once started; no watchdog before the spool's first frame)."""
    tasks = Path(f"/proc/{pid}/task")
    return [c for task in tasks.iterdir() for c in (task / "children").read_text().split()]


def _read_fifo(path: Path, writer: subprocess.Popen[bytes], timeout: float = 30.0) -> str:
    """What ``writer`` writes into the FIFO until it closes it (nothing if it ends without opening it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a writer waiting in its open goes on now
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            # Readable once there is data, or at the end of a writer that came (none yet: not readable).
            if select.select([fd], [], [], 0.1)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
            elif writer.poll() is not None:
                break
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def test_the_hosts_signal_after_the_server_ended_waits_until_every_frame_is_written(tmp_path: Path) -> None:
    # A host closes the tap by ending its input, then SIGTERM after a grace (the TypeScript SDK: 2 s). On
    # a loaded machine the spool may still be behind then; here a --record FIFO nobody reads holds it.
    record = tmp_path / "record.fifo"
    os.mkfifo(record)
    with subprocess.Popen(
        [
            *TAP,
            "--record",
            str(record),
            "--",
            sys.executable,
            "-c",
            "import sys; sys.stdout.write(sys.stdin.read())",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=tap_env(tmp_path),
        cwd=REPO,
    ) as tap:
        assert tap.stdin is not None and tap.stdout is not None
        ping = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
        tap.stdin.write(ping)
        tap.stdin.close()
        assert tap.stdout.readline() == ping
        wait_for(
            lambda: os.path.exists(f"/proc/{tap.pid}/task") and not _children(tap.pid),
            what="the server's end",
        )
        tap.send_signal(signal.SIGTERM)
        # The frames are read now: every one of them is written, then the tap ends as its server did.
        written = _read_fifo(record, tap)
        assert tap.wait(timeout=30) == 0, tap.stderr.read() if tap.stderr else ""
        frames = [json.loads(line) for line in written.splitlines()]
        kinds = [(f["kind"], f["direction"], f["method"]) for f in frames]
        # The server echoes the ping back: a request of its own.
        assert kinds == [
            ("state", "local", None),
            ("message", "out", "ping"),
            ("message", "in", "ping"),
            ("exit", "local", None),
            ("state", "local", None),
        ]
        assert frames[-1]["transport"]["state"] == "closed"
        (spool,) = (tmp_path / "taps").glob("*.jsonl")
        assert records(spool) == frames


def test_a_server_killed_by_a_signal_ends_the_tap_the_same_way(tmp_path: Path) -> None:
    done = subprocess.run(
        [*TAP, "--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
        capture_output=True,
        env=tap_env(tmp_path),
        timeout=30,
    )
    assert done.returncode == -signal.SIGTERM


def test_a_command_that_cannot_start_is_said_on_stderr_with_the_shells_code(tmp_path: Path) -> None:
    done = subprocess.run(
        [*TAP, "--", "/nonexistent/server"], capture_output=True, env=tap_env(tmp_path), timeout=30
    )
    assert done.returncode == 127
    assert b"cannot start '/nonexistent/server'" in done.stderr


def test_a_tap_killed_with_sigkill_leaves_no_server_behind(tmp_path: Path, everything_stdio: dict) -> None:
    record = tmp_path / "frames.jsonl"
    tap = subprocess.Popen(
        [*TAP, "--record", str(record), "--", everything_stdio["command"], *everything_stdio["args"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=tap_env(tmp_path),
    )
    try:
        spawned = wait_for(lambda: record.exists() and record.read_text(), what="the spawned frame")
        pid = json.loads(spawned.splitlines()[0])["transport"]["stdio"]["pid"]
        assert Path(f"/proc/{pid}").exists()
        tap.kill()
        tap.wait(10)
        wait_for(lambda: not _alive(pid), what=f"server {pid} dying with the tap")
    finally:
        if tap.poll() is None:
            tap.kill()
        assert tap.stdin is not None
        tap.stdin.close()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
