"""A stdio server's whole process tree: marking it at spawn, finding it in /proc, killing all of it.

A server is started in a session of its own, with ``MCP_INSPECTOR_SERVER=<marker>`` in its
environment and (Linux) ``PR_SET_PDEATHSIG(SIGKILL)``, so it dies with the process that started it
even when that process is killed with SIGKILL. What it starts may leave its process group: a child
that calls ``setsid()``, a double-forked daemon that is re-parented to init. They keep the marker
(the environment is inherited), so the tree is found by three ties, to a fixed point: the marker,
membership of the server's session or process group, and parenthood. Every process is named by its
pid *and* its start time (``/proc/<pid>/stat``), and signalled through a pidfd, so a pid that the
kernel reused for someone else is never touched.

Why not make the inspector a child subreaper instead: orphans would then become its children and,
once dead, zombies that nobody waits for (asyncio waits only for the pids it started), and which
server an adopted orphan belonged to would still take the marker to tell.

Linux only; elsewhere ``kill_tree`` falls back to the server's process group.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterable
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
    "new_marker",
]

MARKER = "MCP_INSPECTOR_SERVER"
"""The environment variable every process of a server's tree inherits."""

_PROC = "/proc"
_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1


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


def call_on_exit(pid: int, callback: Callable[[], None]) -> bool:
    """Have the running loop call ``callback`` once ``pid`` exits; False where no pidfd says so.

    Unlike asyncio's ``Process.wait()``, it does not wait for the pipes too: a child that left the
    server's session may hold them open for ever.
    """
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


def _has_marker(pid: int, entry: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
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


def _tree(server: ServerProcess) -> dict[int, int]:
    """The server's processes still alive, as pid → start time."""
    processes = _processes()
    entry = f"{MARKER}={server.marker}".encode()
    members = {p.pid: p for p in processes if _has_marker(p.pid, entry)}
    leader = next((p for p in processes if p.pid == server.pid), None)
    if leader is None or leader.started == server.started:
        # The kernel does not reuse a pid while it names a living process group or session,
        # so these are the server's even after the server itself is gone.
        members.update({p.pid: p for p in processes if server.pid in (p.session, p.pgrp)})
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
    if server.host != host_key():
        return []
    deadline = time.monotonic() + timeout
    stopped: dict[int, int] = {}
    try:
        while time.monotonic() < deadline:
            found = {pid: t for pid, t in _tree(server).items() if pid not in stopped}
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
