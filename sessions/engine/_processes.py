"""A stdio server's whole process tree: marking it at spawn, finding it in /proc, killing all of it.

A server is started in a session of its own, with ``MCP_INSPECTOR_SERVER=<marker>`` in its
environment and (Linux) ``PR_SET_PDEATHSIG(SIGKILL)``, so it dies with the process that started it
even when that process is killed with SIGKILL. What it starts may leave its process group: a child
that calls ``setsid()``, a double-forked daemon that is re-parented to init. They keep the marker
(the environment is inherited), so the tree is found by three ties, to a fixed point: the marker,
membership of the server's session or process group, and parenthood. Every process is named by its
pid *and* its start time (``/proc/<pid>/stat``), and signalled through a pidfd, so a pid that the
kernel reused for someone else is never touched.

Those that left the server's session would outlive a process killed with SIGKILL, which runs no
clean-up: a watchdog does it instead (``watch``). It is one small process per app (not per server),
started at the first server it is told of, in a session of its own and with an empty environment; it
reads the servers' records from a pipe whose other end only this process holds, and when that pipe
ends (this process is gone, however it died) it kills every server tree still on its list. It works
unprivileged and changes nothing a server sees (its user, files, pids, ``/proc``), where a PID
namespace would need a user namespace (and so show other users' files as ``nobody`` and make
set-uid programs powerless) and a cgroup needs a delegation a desktop session or container rarely gives.

Why not make the inspector a child subreaper instead: orphans would then become its children and,
once dead, zombies that nobody waits for (asyncio waits only for the pids it started), which server an
adopted orphan belonged to would still take the marker to tell, and once the inspector is killed its
adopted orphans go to init all the same.

Linux only; elsewhere ``kill_tree`` falls back to the server's process group.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "MARKER",
    "ServerProcess",
    "call_on_exit",
    "die_with_parent",
    "host_key",
    "kill_recorded",
    "kill_tree",
    "kill_trees",
    "new_marker",
    "undumpable",
    "unwatch",
    "watch",
]

MARKER = "MCP_INSPECTOR_SERVER"
"""The environment variable every process of a server's tree inherits."""

_PROC = "/proc"
_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A spawned server, named so it can be found again, by another process too."""

    pid: int
    started: int
    """Its start time, in clock ticks since boot: with the pid, it names one process for good."""
    marker: str
    host: str
    """The machine, boot and pid namespace it runs in (``host_key()``): pids mean nothing elsewhere."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> ServerProcess | None:
        """The record ``as_dict`` made, or None for anything else (an old row, an empty dict)."""
        try:
            return cls(int(data["pid"]), int(data["started"]), str(data["marker"]), str(data["host"]))
        except (KeyError, TypeError, ValueError):
            return None

    @classmethod
    def of(cls, pid: int, marker: str) -> ServerProcess:
        """Name a process this one just started."""
        stat = _stat(pid)
        return cls(pid, stat.started if stat else 0, marker, host_key())


def new_marker() -> str:
    return secrets.token_hex(12)


def host_key() -> str:
    """This boot of this machine and this pid namespace; empty where /proc does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def _load_prctl() -> Callable[..., int] | None:
    if not _LINUX:
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


# Resolved here, not in the child: between fork and exec only async-signal-safe work is wise.
_prctl = _load_prctl()


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when this process dies (Linux).

    The kernel ties it to the *thread* that forks, here the event loop's, which lives as long as
    the process. If this process died between fork and prctl, the child is already an orphan: it
    kills itself rather than run unowned.
    """
    prctl = _prctl
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def undumpable() -> bool:
    """Make this process non-dumpable: only root may then read its ``/proc`` entries, trace it or dump it.

    Its environment (and so the secrets settings came from) stops being readable by the processes of
    its own user, the servers it starts among them. False where the kernel was not asked (not Linux).
    """
    prctl = _prctl
    return prctl is not None and prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) == 0


def call_on_exit(pid: int, callback: Callable[[], None]) -> bool:
    """Have the running loop call ``callback`` once ``pid`` exits; False where no pidfd says so.

    Unlike asyncio's ``Process.wait()``, it does not wait for the pipes too: a child that left the
    server's session may hold them open for ever.
    """
    import asyncio  # here: the watchdog runs this module as a script, and needs no event loop

    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        loop.call_soon(callback)
        return True
    except (OSError, AttributeError):
        return False

    def exited() -> None:
        loop.remove_reader(fd)
        os.close(fd)
        callback()

    loop.add_reader(fd, exited)
    return True


@dataclass(frozen=True, slots=True)
class _Stat:
    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    started: int


def _stat(pid: int) -> _Stat | None:
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name sits in parentheses and may hold anything, parentheses included.
    fields = data[data.rindex(b")") + 2 :].split()
    return _Stat(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _has_marker(pid: int, entries: frozenset[bytes]) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as f:
            return not entries.isdisjoint(f.read().split(b"\0"))
    except OSError:
        return False


def _processes() -> list[_Stat]:
    """Every living process of this user that /proc shows (zombies are already dead)."""
    uid, found = os.getuid(), []
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        try:
            if uid and os.stat(f"{_PROC}/{name}").st_uid != uid:
                continue
        except OSError:
            continue
        stat = _stat(int(name))
        if stat is not None and stat.state not in ("Z", "X"):
            found.append(stat)
    return found


def _tree(servers: Sequence[ServerProcess]) -> dict[int, int]:
    """The servers' processes still alive, as pid → start time."""
    processes = _processes()
    entries = frozenset(f"{MARKER}={server.marker}".encode() for server in servers)
    # Only a process started since the first server can be one of theirs: the others' environments
    # are not read (a look at every process on a busy machine is what makes a kill slow).
    earliest = min(server.started for server in servers)
    members = {p.pid: p for p in processes if p.started >= earliest and _has_marker(p.pid, entries)}
    by_pid = {p.pid: p for p in processes}
    # The kernel does not reuse a pid while it names a living process group or session, so those
    # of a server's pid are the server's even after the server itself is gone.
    leaders = {s.pid for s in servers if (leader := by_pid.get(s.pid)) is None or leader.started == s.started}
    members.update({p.pid: p for p in processes if p.session in leaders or p.pgrp in leaders})
    children: dict[int, list[_Stat]] = {}
    for p in processes:
        children.setdefault(p.ppid, []).append(p)
    todo = list(members.values())
    while todo:
        for child in children.get(todo.pop().pid, []):
            if child.pid not in members:
                members[child.pid] = child
                todo.append(child)
    members.pop(os.getpid(), None)
    return {pid: p.started for pid, p in members.items()}


def _signal(pid: int, started: int, sig: signal.Signals) -> None:
    """Signal ``pid`` only if it is still the process that started at ``started``."""
    fd = -1
    with contextlib.suppress(OSError):
        # A pidfd holds on to one process: once its start time is checked, a reuse cannot intervene.
        fd = os.pidfd_open(pid)
    try:
        stat = _stat(pid)
        if stat is None or stat.started != started:
            return
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    finally:
        if fd >= 0:
            os.close(fd)


def _alive(pid: int, started: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat.started == started and stat.state not in ("Z", "X")


def kill_tree(server: ServerProcess, timeout: float = 3.0) -> list[int]:
    """SIGKILL every process of the server's tree and wait (bounded) until they are gone.

    Each round stops what it finds, so a process that keeps forking cannot outrun the search;
    then all are killed together. Returns the pids it killed. Another machine's server is not ours
    to touch (and its pids mean nothing here): nothing is done.
    """
    if not _LINUX or not os.path.isdir(_PROC):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(server.pid, signal.SIGKILL)
        return []
    return kill_trees([server], timeout)


def kill_trees(servers: Iterable[ServerProcess], timeout: float = 3.0) -> list[int]:
    """``kill_tree`` for several servers at once, with one look at /proc a round (Linux)."""
    here = host_key()
    ours = [server for server in servers if server.host == here]
    if not ours:
        return []
    deadline = time.monotonic() + timeout
    stopped: dict[int, int] = {}
    try:
        while time.monotonic() < deadline:
            found = {pid: t for pid, t in _tree(ours).items() if pid not in stopped}
            if not found:
                break
            for pid, started in found.items():
                _signal(pid, started, signal.SIGSTOP)
            stopped.update(found)
    finally:
        for pid, started in stopped.items():
            _signal(pid, started, signal.SIGKILL)
    _wait_gone(stopped.items(), deadline)
    return sorted(stopped)


def kill_recorded(records: Iterable[Any]) -> None:
    """``kill_tree`` for each server recorded by ``as_dict`` (others, and empty records, are skipped)."""
    for record in records:
        server = ServerProcess.from_dict(record)
        if server is not None:
            kill_tree(server)


def _wait_gone(processes: Iterable[tuple[int, int]], deadline: float) -> None:
    left = list(processes)
    while left and time.monotonic() < deadline:
        left = [(pid, started) for pid, started in left if _alive(pid, started)]
        if left:
            time.sleep(0.005)  # polling process state: there is nothing to wait on for a non-child


class _Watchdog:
    """This process's watchdog, and the pipe end that tells it of servers (and, closed, of our end)."""

    def __init__(self, records: Iterable[str]) -> None:
        read, self.fd = os.pipe()
        # What fits in the pipe is written before the watchdog exists, so an app killed the moment
        # after the spawn still leaves it its list; the rest follows the spawn.
        payload = "".join(line + "\n" for line in records).encode()
        try:
            os.set_blocking(self.fd, False)
            with contextlib.suppress(BlockingIOError):
                payload = payload[os.write(self.fd, payload) :]
            os.set_blocking(self.fd, True)
            self.pid = os.posix_spawn(
                sys.executable,
                # Isolated, no site: only the standard library, whatever the environment says.
                [sys.executable, "-I", "-S", os.path.abspath(__file__)],
                {},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                # Out of our process group, so a Ctrl-C that stops us does not stop it first.
                setsid=True,
            )
        except BaseException:
            os.close(self.fd)
            raise
        finally:
            os.close(read)
        self.owner = os.getpid()
        self.watched: dict[str, ServerProcess] = {}
        self.started = self.send_bytes(payload)

    def send_bytes(self, data: bytes) -> bool:
        try:
            while data:
                data = data[os.write(self.fd, data) :]
        except OSError:
            return False
        return True

    def send(self, line: str) -> bool:
        return self.send_bytes(line.encode() + b"\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


_watchdog: _Watchdog | None = None
_watchdog_lock = threading.Lock()


def _record(server: ServerProcess) -> str:
    return "+" + json.dumps(server.as_dict(), separators=(",", ":"))


def watch(server: ServerProcess) -> bool:
    """Have the watchdog kill the server's tree once this process is gone, even if killed with SIGKILL.

    Returns False where there can be no watchdog (not Linux, no interpreter to start it with).
    """
    global _watchdog
    if not _LINUX or not sys.executable or not os.path.isfile(__file__):
        return False
    with _watchdog_lock:
        dog = _watchdog if _watchdog is not None and _watchdog.owner == os.getpid() else None
        if dog is not None and dog.send(_record(server)):
            dog.watched[server.marker] = server
            return True
        # None yet (or it died, or this is a forked child's copy): start one and tell it everything.
        watched = {**(dog.watched if dog else {}), server.marker: server}
        if dog is not None:
            dog.close()
        try:
            dog = _Watchdog(_record(s) for s in watched.values())
        except OSError:
            _watchdog = None
            return False
        dog.watched = watched
        _watchdog = dog
        return dog.started


def unwatch(server: ServerProcess) -> None:
    """Take a server off the watchdog's list (its tree is dead)."""
    with _watchdog_lock:
        dog = _watchdog
        if dog is not None and dog.owner == os.getpid() and dog.watched.pop(server.marker, None) is not None:
            dog.send("-" + server.marker)


def _watchdog_main() -> None:
    """Keep the list of servers our parent sends; once its end of the pipe closes, kill their trees."""
    servers: dict[str, ServerProcess] = {}
    for line in sys.stdin.buffer:
        if line.startswith(b"+"):
            server = ServerProcess.from_dict(json.loads(line[1:]))
            if server is not None:
                servers[server.marker] = server
        elif line.startswith(b"-"):
            servers.pop(line[1:].strip().decode(), None)
    kill_trees(list(servers.values()))


if __name__ == "__main__":
    _watchdog_main()
