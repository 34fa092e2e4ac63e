"""No stdio server process outlives its session: setsid children, double-forked daemons, a killed owner.

tests/servers/daemonizing.py leaves a ``setsid()`` child and a double-forked daemon behind, ignores
SIGTERM and the end of its stdin, and writes the three pids to a file.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from support.paths import REPO, SERVERS
from support.teams import team_of
from support.web import live_runtime, make_user, start_session, stdio_config, wait_until

from sessions.engine import ClientSession, ServerProcess, StdioTarget, kill_tree, make_transport
from sessions.engine._processes import host_key
from sessions.models import EngineWorker, McpSession
from sessions.runtime import client, workers
from sessions.runtime import messages as m

pytestmark = pytest.mark.slow

DAEMONIZING = SERVERS / "daemonizing.py"
WAIT = 10.0

# A stand-in for an engine worker: it starts the server through the engine, says who it started,
# and waits to be killed.
OWNER = """
import asyncio, json, sys
from sessions.engine import ClientSession, StdioTarget, make_transport

async def main():
    transport = make_transport(StdioTarget(sys.executable, [sys.argv[1], sys.argv[2]]))
    session = ClientSession(transport)
    await session.open()
    await session.initialize()
    print(json.dumps(transport.server_process.as_dict()), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _state(pid: int) -> str:
    """The process's state letter from /proc, or "" once it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return ""
    return data[data.rindex(b")") + 2 :].split()[0].decode()


def alive(pid: int) -> bool:
    return _state(pid) not in ("", "Z", "X")


def wait_dead(pids: dict[str, int], timeout: float = WAIT) -> None:
    """Poll /proc until none of ``pids`` is alive (a zombie is dead), or fail naming the survivors."""
    deadline = time.monotonic() + timeout
    while (left := {name: pid for name, pid in pids.items() if alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not left, f"still alive: {left}"


def read_pids(path: Path, timeout: float = WAIT) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, "the server never wrote its pids"
        time.sleep(0.01)
    pids: dict[str, int] = json.loads(path.read_text())
    return pids


@pytest.fixture
def leftovers() -> list[int]:
    """Pids a test started; any still alive at the end are killed, so a failure leaves nothing behind."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_closing_a_session_kills_the_servers_setsid_child_and_its_double_forked_daemon(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pidfile = tmp_path / "pids.json"
    target = StdioTarget(sys.executable, [str(DAEMONIZING), str(pidfile)], close_grace=0.2, term_grace=0.2)
    transport = make_transport(target)
    session = ClientSession(transport)
    async with asyncio.timeout(WAIT):
        await session.open()
        await session.initialize()
        pids = await asyncio.to_thread(read_pids, pidfile)
        leftovers += pids.values()
        assert all(alive(pid) for pid in pids.values())
        # The setsid child holds the server's stdout open: closing must not wait for it to let go.
        await session.aclose()
    wait_dead(pids)
    assert session.exit_code == -signal.SIGKILL


async def test_a_server_that_exits_is_reported_even_while_its_setsid_child_holds_its_stdout(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pidfile = tmp_path / "pids.json"
    session = ClientSession(make_transport(StdioTarget(sys.executable, [str(DAEMONIZING), str(pidfile)])))
    async with asyncio.timeout(WAIT):
        await session.open()
        await session.initialize()
        pids = await asyncio.to_thread(read_pids, pidfile)
        leftovers += pids.values()
        os.kill(pids["server"], signal.SIGKILL)
        await session.wait_closed()
        wait_dead(pids)
        assert session.exit_code == -signal.SIGKILL
        await session.aclose()


def test_kill_tree_never_touches_a_process_whose_pid_was_reused_or_another_hosts(
    leftovers: list[int],
) -> None:
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    leftovers.append(sleeper.pid)
    real = ServerProcess.of(sleeper.pid, "no-such-marker")
    assert kill_tree(ServerProcess(sleeper.pid, real.started + 1, "no-such-marker", host_key())) == []
    assert kill_tree(ServerProcess(sleeper.pid, real.started, "no-such-marker", "another/host")) == []
    assert sleeper.poll() is None
    assert kill_tree(real) == [sleeper.pid]
    assert sleeper.wait(timeout=WAIT) == -signal.SIGKILL


def _spawn_owner(pidfile: Path) -> tuple[subprocess.Popen[str], ServerProcess, dict[str, int]]:
    root = str(REPO)
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(DAEMONIZING), str(pidfile)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    assert owner.stdout is not None
    server = ServerProcess.from_dict(json.loads(owner.stdout.readline()))
    assert server is not None
    return owner, server, read_pids(pidfile)


@pytest.mark.django_db
@override_settings(INSPECTOR_WORKER_HEARTBEAT=1.0, INSPECTOR_EMBEDDED_RUNTIME=False)
def test_a_sigkilled_workers_server_dies_with_it_and_the_reaper_kills_what_it_left(
    tmp_path: Path, leftovers: list[int]
) -> None:
    owner, server, pids = _spawn_owner(tmp_path / "pids.json")
    leftovers += pids.values()
    try:
        owner.kill()  # no cleanup of its own can run
        owner.wait(timeout=WAIT)
    finally:
        if owner.stdout is not None:
            owner.stdout.close()
    # The server ignores SIGTERM and the end of its stdin: only the kernel's parent-death signal ends it.
    wait_dead({"server": pids["server"]})
    assert alive(pids["setsid"]) and alive(pids["daemon"])  # out of its session: the reaper's job

    user = User.objects.create_user("ivan")
    EngineWorker.objects.create(name="dead:1:a", last_seen=timezone.now() - timedelta(seconds=10))
    lost = McpSession.objects.create(
        owner=user,
        team=team_of(user),
        name="x",
        config={},
        status="ready",
        worker="dead:1:a",
        server_process=server.as_dict(),
    )
    assert [s.pk for s in workers.reap()] == [lost.pk]
    wait_dead(pids)
    lost.refresh_from_db()
    assert lost.status == "lost" and lost.server_process == {}


@pytest.mark.django_db(transaction=True)
async def test_disconnect_leaves_no_server_process_and_the_session_records_its_server_meanwhile(
    tmp_path: Path, leftovers: list[int]
) -> None:
    pidfile = tmp_path / "pids.json"
    async with live_runtime():
        alice = await make_user()
        session = await start_session(alice, stdio_config(sys.executable, [str(DAEMONIZING), str(pidfile)]))
        pids = await asyncio.to_thread(read_pids, pidfile)
        leftovers += pids.values()
        await session.arefresh_from_db()
        recorded = ServerProcess.from_dict(session.server_process)
        assert recorded is not None and recorded.pid == pids["server"]
        await client.call(session, m.Disconnect())
        await wait_until(lambda: McpSession.objects.get(pk=session.pk).status == "closed", timeout=20)
    await asyncio.to_thread(wait_dead, pids)
    await session.arefresh_from_db()
    assert session.server_process == {}


# An app that is killed the moment after it started its watchdog, before another line of its own ran.
KILLED_AT_SPAWN = """
import os, signal, subprocess, sys, time
from sessions.engine import _processes

spawn = os.posix_spawn

def spawn_then_die(*args, **kwargs):
    spawn(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

_processes.os.posix_spawn = spawn_then_die
marker = _processes.new_marker()
server = subprocess.Popen(
    ["sleep", "600"], start_new_session=True, env={**os.environ, _processes.MARKER: marker}
)
print(server.pid, flush=True)
while _processes.ServerProcess.of(server.pid, marker).started == 0:
    time.sleep(0.01)
_processes.watch(_processes.ServerProcess.of(server.pid, marker))
"""


def test_an_app_killed_just_after_starting_its_watchdog_has_told_it_of_the_server(
    leftovers: list[int],
) -> None:
    root = str(REPO)
    app = subprocess.run(
        [sys.executable, "-c", KILLED_AT_SPAWN],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
        timeout=WAIT,
    )
    assert app.returncode == -signal.SIGKILL, app.stderr
    server = int(app.stdout.split()[0])
    leftovers.append(server)
    wait_dead({"server": server})
