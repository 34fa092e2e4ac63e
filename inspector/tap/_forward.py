"""The tap's forwarding: start the server, pump bytes both ways and stderr, pass signals, end as it ends.

Standard library only, and little of it: this runs before the server starts. Each pump hands what it
read to the spool thread's queue, then writes it on: handing over a reference costs a fraction of a
microsecond, and done first it keeps the frames in the order things happened (a request is queued
before the server can have read it, so before its answer).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from inspector.tap._options import TapOptions

__all__ = ["run"]

_CHUNK = 1 << 16
_DRAIN_AFTER_EXIT = 2.0
"""Seconds to wait, once the server has exited, for its stdout and stderr to end (a child of its may
hold them open; the watchdog kills what it left when the tap ends)."""
_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_MARKER = "MCP_INSPECTOR_SERVER"
"""The engine's process marker (``sessions.engine._processes.MARKER``), named here so the engine
loads after the server starts."""

Item = tuple[str, object, float, float]
"""What the pumps hand the spool thread: (what, payload, wall time, monotonic time)."""


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the server when the tap dies, even by SIGKILL.

    The engine's ``die_with_parent``, written again here because importing the engine takes a tenth of
    a second the server would wait for.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the tap died between fork and prctl: do not run unowned
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Shut:
    """The gate of a stream no breakpoint or fault touches (stderr): never open."""

    active = False


def _pump(
    source: int, target: int | None, what: str, items: queue.SimpleQueue[Item | None], gate: Any = _Shut
) -> None:
    """Copy ``source`` to ``target`` until the source ends; each chunk goes to the spool first.

    A target that is gone (the host closed its end, the server its stdin) stops the writing, never the
    reading: the other side is still drained and what it sends is still recorded. While breakpoints or
    faults are set, the chunk goes to the direction's gate instead (``_gate``), which decides each line.
    """
    last = b"\n"
    while True:
        try:
            chunk = os.read(source, _CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            break
        if gate.active:
            gate.take(chunk, last)
            last = b"\n"
            continue
        items.put((what, chunk, time.time(), time.monotonic()))
        if target is not None:
            try:
                _write_all(target, chunk)
            except OSError:
                target = None
        last = chunk
    if gate is not _Shut:
        gate.end()
    items.put((what, b"", time.time(), time.monotonic()))


def _hang_up(*fds: int) -> None:
    """Close the connection (a fault): each end reads its end of input, the descriptors stay valid."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        for fd in fds:
            os.dup2(null, fd)
        os.close(null)


def _close_on_end(fd: int) -> Callable[[], None]:
    def close() -> None:
        with contextlib.suppress(OSError):
            os.close(fd)

    return close


def _thread(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


def run(options: TapOptions) -> int:
    """Run the server behind the tap until it exits; return its exit code (128+N for signal N)."""
    # Forwarding threads wait for the interpreter lock while the spool thread works: let them in sooner.
    sys.setswitchinterval(0.0001)
    env = dict(os.environ)
    marker = env[_MARKER] = os.urandom(12).hex()
    started = time.time(), time.monotonic()
    try:
        process = subprocess.Popen(
            [options.command, *options.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            bufsize=0,
            start_new_session=True,  # the host's Ctrl-C reaches the server once, through the tap
            preexec_fn=_die_with_parent(),
        )
    except OSError as exc:
        why = exc.strerror or str(exc)
        with contextlib.suppress(OSError):
            os.write(2, f"mcp-inspector tap: cannot start {options.command!r}: {why}\n".encode())
        _record_failure(options, f"cannot start {options.command!r}: {why}")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    items: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
    items.put(("spawned", (process.pid, marker), *started))

    from inspector.tap._gate import Traffic
    from inspector.tap._spool import Spool

    server_in = process.stdin.fileno()
    traffic = Traffic(items, server_in, 1)
    traffic.server_label = f"{options.name} {options.command}"
    traffic.on_close.append(lambda: _hang_up(server_in, 1))
    spool = Spool(options, items, traffic)
    spool_thread = _thread(spool.run, "tap-spool")

    def host_to_server() -> None:
        _pump(0, server_in, "client", items, traffic.gates["out"])
        _close_on_end(server_in)()  # the host's end of input is the server's

    _thread(host_to_server, "tap-stdin")
    server_out = _thread(
        lambda: _pump(process.stdout.fileno(), 1, "server", items, traffic.gates["in"]),  # type: ignore[union-attr]
        "tap-stdout",
    )
    server_err = _thread(lambda: _pump(process.stderr.fileno(), 2, "stderr", items), "tap-stderr")  # type: ignore[union-attr]

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signum)

    for sig in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, forward)
    code = process.wait()
    deadline = time.monotonic() + _DRAIN_AFTER_EXIT
    for pump in (server_out, server_err):
        pump.join(max(0.0, deadline - time.monotonic()))
    items.put(("exit", code, time.time(), time.monotonic()))
    items.put(None)
    # Every frame is written before the tap ends, however far behind a loaded machine left the spool:
    # a host's signal from now on (its SIGTERM after closing our input) waits for that; a second one
    # ends the tap at once.
    for sig in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, _then_at_once)
    spool_thread.join()
    return code


def _then_at_once(_signum: int, _frame: object) -> None:
    for sig in _SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_DFL)


def _record_failure(options: TapOptions, note: str) -> None:
    """The server never started: the spool and the record still say so."""
    items: queue.SimpleQueue[Item | None] = queue.SimpleQueue()
    items.put(("failed", note, time.time(), time.monotonic()))
    items.put(None)
    from inspector.tap._spool import Spool

    Spool(options, items).run()


def end_process(code: int) -> None:
    """End the tap as its server ended: by the same signal, or with the same code."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    if code < 0:
        sig = -code
        with contextlib.suppress(OSError, ValueError):
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        code = 128 + sig
    os._exit(code)
