"""A tap that dies without a word (SIGKILL, a crash): its session ends as lost, or, when it wrote no whole
frame yet, there is no session to make; either way its spool and its control socket do not stay behind,
and the ingester stops looking at them. The tap's process is a real one, killed and reaped here."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer

from sessions.engine import ServerProcess, TapObserver
from sessions.models import McpSession
from sessions.runtime import tap_control, taps

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def data_dir(settings: Any) -> Iterator[Path]:
    """A data folder of the test's own, short enough for a socket's address."""
    folder = Path(tempfile.mkdtemp(prefix="tap-gone-"))
    settings.DATA_DIR = folder
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _dead_process() -> ServerProcess:
    """A process that lived and is gone (reaped): its number names nothing now."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    named = ServerProcess.of(child.pid, "")
    child.kill()
    child.wait(timeout=10)
    return named


def _run_name(pid: int) -> str:
    return f"{int(time.time() * 1000):013d}-{pid}-{secrets.token_hex(4)}"


@contextlib.contextmanager
def _spool_of(run: str, content: bytes) -> Iterator[tuple[Path, Path]]:
    """The run's spool in the taps folder, and the control socket its tap left (bound, then closed)."""
    folder = taps.spool_folder()
    folder.mkdir(mode=0o700, exist_ok=True)
    spool = folder / f"{run}.jsonl"
    spool.write_bytes(content)
    spool.chmod(0o600)
    control = tap_control.socket_path(run)
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(control))
    try:
        yield spool, control
    finally:
        for path in (spool, control):
            with contextlib.suppress(OSError):
                os.unlink(path)


async def _scan_until(ingester: taps.TapIngester, done: Callable[[], bool], seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the ingester never got there"
        await ingester.scan()


async def test_a_tap_killed_before_its_first_frame_leaves_no_spool_and_no_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(taps, "GONE_CHECK", 0.0)  # look for the tap at every quiet scan
    ingester = taps.TapIngester(get_channel_layer())
    alive = _run_name(os.getpid())  # a tap still loading the engine: its spool is empty too
    dead = _run_name(_dead_process().pid)
    with (
        _spool_of(alive, b"") as (alive_spool, alive_socket),
        _spool_of(dead, b'{"half a line') as (spool, control),
    ):
        await _scan_until(ingester, lambda: not spool.exists())
        assert not control.exists(), "the dead tap's socket stayed"
        assert f"{dead}.jsonl" not in ingester.runs
        for _ in range(3):
            await ingester.scan()
        assert alive_spool.exists() and alive_socket.exists(), "a living tap's files were taken"
        assert f"{alive}.jsonl" in ingester.runs
    assert not await McpSession.objects.filter(transport_name=taps.TAP_TRANSPORT).aexists()


async def test_a_tap_killed_mid_session_ends_it_as_lost_and_leaves_no_spool_and_no_socket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(taps, "GONE_CHECK", 0.0)
    tap = _dead_process()
    run = _run_name(tap.pid)
    observer = TapObserver()
    spawned = observer.spawned(4242, "fake-server", [], cwd="/tmp")
    spawned.transport["tap"] = {"name": "killed", "run": run, "control": run, **tap.as_dict()}
    frames = [spawned, *observer.client_line(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}')]
    content = "".join(json.dumps(f.to_dict()) + "\n" for f in frames).encode()
    ingester = taps.TapIngester(get_channel_layer())
    with _spool_of(run, content) as (spool, control):
        await _scan_until(ingester, lambda: not spool.exists())
        assert not control.exists(), "the dead tap's socket stayed"
    session = await McpSession.objects.aget(transport_name=taps.TAP_TRANSPORT, name="killed")
    assert session.status == McpSession.Status.LOST and session.ended is not None
    assert session.status_note == "the tap stopped before its server's exit was recorded"
    assert session.last_seq == len(frames), "every frame the tap wrote is stored"
    assert not ingester.runs
