"""The hosted sandbox with real processes: what a sandboxed server can read, and that nothing it starts
outlives the process that started it.

tests/servers/snoop.py reports what it could read: /proc/<pid>/environ of every pid it sees, folders
and files it is given. It runs on the system's Python (stdlib only), which the sandbox shows; the
tests' own Python may live where the sandbox's user cannot reach.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO, SERVERS

from sessions.engine import ClientSession, Sandbox, StdioTarget, make_transport
from sessions.engine._sandbox import NOBODY

pytestmark = pytest.mark.slow

SNOOP = str(SERVERS / "snoop.py")
DAEMONIZING = str(SERVERS / "daemonizing.py")
SANDBOX = Sandbox(read_only=(str(SERVERS),))
PATH = "/usr/local/bin:/usr/bin:/bin"
SECRET = "snoop-file-secret-7c1e"
WAIT = 20.0
NO_SUCH = "refused: No such file or directory"


def system_python() -> str:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.fail("no python3 in /usr/bin or /bin: the sandboxed test servers run on the system's Python")
    return python


def target(script: str, *args: str, sandbox: Sandbox | None = SANDBOX) -> StdioTarget:
    return StdioTarget(
        system_python(),
        [script, *args],
        env={"PATH": PATH},
        inherit_env=False,
        fresh_home=True,
        sandbox=sandbox,
        close_grace=0.2,
        term_grace=0.2,
    )


@asynccontextmanager
async def running(server: StdioTarget) -> AsyncIterator[ClientSession]:
    session = ClientSession(make_transport(server))
    async with asyncio.timeout(WAIT):
        await session.open()
        try:
            await session.initialize()
            yield session
        finally:
            await session.aclose()


async def snoop(session: ClientSession, paths: list[str], pids: list[int]) -> dict[str, Any]:
    result = await session.call_tool("snoop", {"paths": paths, "pids": pids})
    found: dict[str, Any] = json.loads(result["content"][0]["text"])
    return found


@pytest.fixture
def machine(tmp_path: Path) -> dict[str, str]:
    """A worker's working folder with a secret file, and a data folder, as a worker has them."""
    worker, data = tmp_path / "worker", tmp_path / "data"
    worker.mkdir()
    data.mkdir()
    (worker / "secrets.env").write_text(f"DB_PASSWORD={SECRET}\n")
    (data / "inspector.sqlite3").write_text(f"rows {SECRET}\n")
    return {"worker": str(worker), "data": str(data)}


async def test_unsandboxed_the_snoop_reads_the_secrets_the_sandbox_keeps_from_it(
    machine: dict[str, str],
) -> None:
    """The control: the same server, unsandboxed, reads the worker's files and its environment."""
    async with running(target(SNOOP, sandbox=None)) as session:
        found = await snoop(session, [machine["worker"], machine["data"]], [os.getpid()])
    assert SECRET in json.dumps(found)
    assert not found["environ"][str(os.getpid())].startswith("refused")


async def test_a_sandboxed_server_sees_only_its_own_processes_and_none_of_the_machines_files(
    machine: dict[str, str],
) -> None:
    async with running(target(SNOOP)) as first, running(target(SNOOP)) as second:
        mine = await snoop(first, [], [])
        home = mine["me"]["home"]
        found = await snoop(
            second,
            [machine["worker"], machine["data"], f"{machine['worker']}/secrets.env", home, "/root", "/etc"],
            [os.getpid(), os.getppid(), 1],
        )
    report = json.dumps(found)
    assert SECRET not in report and "the note of server" not in report
    for path in (machine["worker"], machine["data"], home, "/root"):
        assert "refused: No such file or directory" in json.dumps(found["paths"][path]), path
    # Its own PID namespace: the sandbox's first process and the server's own tree, nothing else.
    assert found["visible_pids"] == [1, found["me"]["pid"]]
    # The pids of the worker and its parent name nothing in there.
    assert found["environ"][str(os.getpid())] == found["environ"][str(os.getppid())] == NO_SUCH
    # Its own directory, not the worker's; an unprivileged user when the worker is root.
    assert found["me"]["cwd"] == found["me"]["home"] != home
    if os.geteuid() == 0:
        assert found["me"]["uid"] == NOBODY
    # Only chosen files of /etc: nothing of a deployment's own configuration.
    assert "shadow" not in found["paths"]["/etc"]["listing"]
    assert {"resolv.conf", "ssl", "passwd"} <= set(found["paths"]["/etc"]["listing"])


# A stand-in for an engine worker: it starts the sandboxed server, says where, and waits to be killed.
OWNER = """
import asyncio, json, sys
from sessions.engine import ClientSession, Sandbox, StdioTarget, make_transport

async def main():
    python, script, servers = sys.argv[1:4]
    target = StdioTarget(python, [script, "pids.json"], env={"PATH": "/usr/bin:/bin"}, inherit_env=False,
                         fresh_home=True, sandbox=Sandbox(read_only=(servers,)))
    transport = make_transport(target)
    session = ClientSession(transport)
    await session.open()
    await session.initialize()
    print(json.dumps({"pid": transport.server_process.pid, "home": transport._home}), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def descendants(root: int) -> set[int]:
    """``root`` and every process below it, from /proc."""
    parents: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                data = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            parents[int(name)] = int(data[data.rindex(b")") + 2 :].split()[1])
    found, todo = {root}, [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                todo.append(pid)
    return found


def alive(pid: int) -> bool:
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_for(condition: Any, timeout: float, what: Any) -> None:
    """Wait for ``condition``; ``what`` (a text, or a function giving one) says why it did not come."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.01)


def test_a_sandboxed_servers_setsid_child_and_daemon_die_within_seconds_of_a_sigkill_of_its_owner() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, system_python(), DAEMONIZING, str(SERVERS)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    tree: set[int] = set()
    try:
        assert owner.stdout is not None
        started = json.loads(owner.stdout.readline())
        # The server writes its pids once it has forked both: then the whole tree is there.
        wait_for(lambda: Path(started["home"], "pids.json").exists(), WAIT, "the server never wrote its pids")
        tree = descendants(started["pid"])
        # bwrap, the sandbox's first process, the server, its setsid child and its daemon at least.
        assert len(tree) >= 5, tree
        owner.kill()
        owner.wait(timeout=WAIT)
        # The watchdog stops and kills at once; the bound leaves room for a loaded machine's scheduling.
        wait_for(
            lambda: not any(alive(pid) for pid in tree),
            5.0,
            lambda: f"still alive: {[p for p in tree if alive(p)]}",
        )
    finally:
        if owner.stdout is not None:
            owner.stdout.close()
        for pid in tree:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_closing_a_sandboxed_session_ends_everything_its_server_started() -> None:
    server = target(DAEMONIZING, "pids.json")
    transport = make_transport(server)
    session = ClientSession(transport)
    async with asyncio.timeout(WAIT):
        await session.open()
        await session.initialize()
        home = transport._home  # type: ignore[attr-defined]
        await asyncio.to_thread(wait_for, lambda: Path(home, "pids.json").exists(), WAIT, "no pids written")
        tree = descendants(transport.server_process.pid)  # type: ignore[attr-defined]
        await session.aclose()
    assert len(tree) >= 5
    assert not any(alive(pid) for pid in tree)
    assert not Path(home).exists()  # its directory goes with it


# Holds a secret in its environment until its stdin ends; made non-dumpable first when asked.
HOLDER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("processes", sys.argv[1])
module = sys.modules["processes"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
if sys.argv[2] == "hide":
    assert module.undumpable()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize(("how", "readable"), [("show", True), ("hide", False)])
def test_a_non_dumpable_process_hides_its_environment_from_processes_of_its_own_user(
    how: str, readable: bool
) -> None:
    # Both of one unprivileged user (root may read anything): the servers of an unsandboxed worker.
    user = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}
    processes = str(REPO / "sessions/engine/_processes.py")
    holder = subprocess.Popen(
        [system_python(), "-c", HOLDER, processes, how],
        env={"HELD_SECRET": "held-secret-3f9"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        **user,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        read = subprocess.run(
            [system_python(), "-c", f"print(open('/proc/{holder.pid}/environ').read())"],
            capture_output=True,
            text=True,
            timeout=WAIT,
            **user,
        )
        assert ("held-secret-3f9" in read.stdout) is readable, read.stderr
        assert readable or "Permission denied" in read.stderr
    finally:
        holder.kill()
        holder.communicate(timeout=WAIT)
