"""The stdio transport: a child process speaking newline-delimited JSON-RPC."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from ._errors import ConnectionClosed, TransportError
from ._frames import HEAD_BYTES, Frame, head_of, too_large
from ._oversize import OversizedLine, tail_of
from ._processes import (
    MARKER,
    ServerProcess,
    call_on_exit,
    die_with_parent,
    kill_tree,
    new_marker,
    unwatch,
    watch,
)
from ._sandbox import Launch, prepare_workdir, sandbox_problem, sandboxed
from ._targets import StdioTarget
from ._transport import FrameSink

__all__ = ["StdioTarget", "StdioTransport", "read_messages"]

_CHUNK = 1 << 20


async def read_messages(stream: asyncio.StreamReader, sink: FrameSink) -> None:
    """Deliver each newline-delimited message on ``stream`` to ``sink``, until the stream ends.

    A line longer than ``sink.options.max_message_bytes`` is not kept: its head is recorded, flagged
    ``message-too-large``, as soon as the limit is passed, and the rest is skipped up to the next newline.
    If it is a reply, its request fails at once, or at the line's end when its id is written last.
    """
    limit = sink.options.max_message_bytes
    # Chunks of a line still being received; joined once, so a 50 MB line is not copied per chunk.
    parts: list[bytes] = []
    size = 0
    skipping: OversizedLine | None = None  # the line that went over the limit
    while True:
        chunk = await stream.read(_CHUNK)
        if not chunk:
            break
        if skipping is not None:
            end = chunk.find(b"\n")
            if end < 0:
                skipping.more(chunk)
                continue
            skipping.more(chunk[:end].removesuffix(b"\r"))
            skipping.end()
            chunk, skipping = chunk[end + 1 :], None
        if b"\n" in chunk:
            parts.append(chunk)
            *lines, tail = b"".join(parts).split(b"\n")
            parts, size = ([tail], len(tail)) if tail else ([], 0)
            for line in lines:
                line = line.removesuffix(b"\r")
                if len(line) > limit:
                    OversizedLine(sink, sink.record(too_large(line, limit)), line[:HEAD_BYTES], line).end()
                elif line:
                    sink.receive(Frame("message", "in", line))
        elif chunk:
            parts.append(chunk)
            size += len(chunk)
        if size > limit:
            head = head_of(parts)
            skipping = OversizedLine(sink, sink.record(too_large(head, limit)), head, tail_of(parts))
            parts, size = [], 0
    if parts:
        # An unterminated last line is still what the server wrote: record it.
        frame = Frame("message", "in", b"".join(parts))
        frame.flag("unterminated-line", "warning", "stdout ended without a newline after this message")
        sink.receive(frame)


class StdioTransport:
    """Spawn the server and move lines over its stdin and stdout; stderr lines become frames too."""

    name = "stdio"

    def __init__(self, target: StdioTarget) -> None:
        self.target = target
        self.process: asyncio.subprocess.Process | None = None
        self.server_process: ServerProcess | None = None
        """The spawned server, named so that its whole tree can be found and killed, by others too."""
        self.returncode: int | None = None
        self._sink: FrameSink | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self._gone: asyncio.Event | None = None
        self._exited = asyncio.Event()
        self._home: str | None = None
        self._spawned_at = 0.0

    async def spawn(self) -> None:
        """Start the server process now; ``open`` adopts it (a warm start) or starts it itself.

        Until ``open``, nothing reads its pipes: what it writes waits in them, so none of it is lost.
        """
        if self.process is not None:
            return
        target = self.target
        # Whether the sandbox runs here is found once per process (bwrap is run): in a thread.
        sandbox = target.sandbox
        if sandbox is not None and (problem := await asyncio.to_thread(sandbox_problem, sandbox)):
            raise TransportError(sandbox.refusal(problem))
        env = dict(os.environ) if target.inherit_env else {}
        env.update(target.env)
        if target.fresh_home or target.sandbox is not None:
            self._home = tempfile.mkdtemp(prefix="mcp-server-home-")
            if target.fresh_home:
                env["HOME"] = self._home
        # Everything the server starts inherits the marker, even what leaves its session.
        marker = env[MARKER] = new_marker()
        # Taken before the process is asked for: it may run (and write) before the call returns.
        self._spawned_at = time.monotonic()
        try:
            if target.sandbox is None and not _found(target.command, env, target.cwd):
                # Found as exec would look for it: no fork of this (large) process for a missing program.
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), target.command)
            with self._launch(env, marker) as launch:
                self.process = await asyncio.create_subprocess_exec(
                    *launch.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    # Its own process group, so a shutdown reaches the grandchildren (npx, shells) too.
                    start_new_session=True,
                    # And it dies with us, even if we are killed with SIGKILL.
                    preexec_fn=die_with_parent(),
                    **launch.spawn_options(),
                )
        except OSError as exc:
            await self._remove_home()
            raise TransportError(f"cannot start {target.command!r}: {exc.strerror or exc}") from exc
        self.server_process = ServerProcess.of(self.process.pid, marker)
        if target.watchdog:
            watch(self.server_process)
        gone = asyncio.Event()
        if call_on_exit(self.process.pid, gone.set):
            self._gone = gone

    async def open(self, sink: FrameSink) -> None:
        self._sink = sink
        warm = self.process is not None
        await self.spawn()
        assert self.process is not None and self.server_process is not None
        stdio: dict[str, Any] = {
            "pid": self.process.pid,
            "command": self.target.command,
            "process": self.server_process.as_dict(),
        }
        note = f"started process {self.process.pid}"
        if warm:
            stdio["warm_start"] = round(time.monotonic() - self._spawned_at, 3)
            note += f", {stdio['warm_start']:.2f} s before connecting (a warm start)"
        sink.record(
            Frame(
                "state",
                "local",
                transport={"state": "spawned", "stdio": stdio},
                note=note,
            )
        )
        self._tasks = [
            asyncio.create_task(self._read_stdout(), name="mcp-stdio-stdout"),
            asyncio.create_task(self._read_stderr(), name="mcp-stdio-stderr"),
        ]
        self._tasks.append(asyncio.create_task(self._watch_exit(), name="mcp-stdio-exit"))

    @contextlib.contextmanager
    def _launch(self, env: dict[str, str], marker: str) -> Iterator[Launch]:
        target = self.target
        if target.sandbox is None:
            yield Launch([target.command, *target.args], env=env, cwd=target.cwd)
            return
        assert self._home is not None
        prepare_workdir(target.sandbox, self._home)
        with sandboxed(
            target.sandbox,
            target.command,
            target.args,
            env=env,
            workdir=self._home,
            cwd=target.cwd,
            outer_env={MARKER: marker},
        ) as launch:
            yield launch

    def set_protocol_version(self, version: str) -> None:
        pass

    async def send(self, raw: bytes, message: Any) -> Frame:
        assert self._sink is not None and self.process is not None and self.process.stdin is not None
        frame = self._sink.record(Frame("message", "out", raw, message=message))
        if self.process.returncode is not None or self._closing:
            raise ConnectionClosed("the server process has exited", exit_code=self.process.returncode)
        try:
            self.process.stdin.write(raw + b"\n")
            await self.process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed("the server closed its stdin", exit_code=self.process.returncode) from exc
        return frame

    async def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None and self._sink is not None
        try:
            await read_messages(self.process.stdout, self._sink)
        except Exception as exc:  # a bug must not leave a "ready" session that hears nothing
            self._sink.connection_lost(TransportError(f"reading the server's stdout failed: {exc!r}"))
            raise

    async def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None and self._sink is not None
        stream, sink = self.process.stderr, self._sink
        pending = b""
        while True:
            chunk = await stream.read(_CHUNK)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                sink.record(Frame("stderr", "in", line.removesuffix(b"\r")))
        if pending:
            sink.record(Frame("stderr", "in", pending))

    async def _watch_exit(self) -> None:
        assert self.process is not None and self._sink is not None
        await self._server_gone()
        # What the server left behind goes with it: a child that left its session may hold its
        # stdout open, and until that closes asyncio reports no exit and the readers never end.
        await asyncio.to_thread(self.kill)
        code = await self.process.wait()
        # Let the readers drain what the process wrote before it died, so the exit comes last.
        await asyncio.gather(*self._tasks[:2], return_exceptions=True)
        self.returncode = code
        detail: dict[str, Any] = {"returncode": code}
        if code < 0:
            detail["signal"] = signal.Signals(-code).name
            note = f"process exited by signal {detail['signal']}"
        else:
            note = f"process exited with code {code}"
        self._sink.record(Frame("exit", "local", transport={"stdio": detail}, note=note))
        self._exited.set()
        if not self._closing:
            self._sink.connection_lost(ConnectionClosed(f"the server {note}", exit_code=code))

    async def close(self) -> None:
        process = self.process
        if process is None or self._closing:
            return
        self._closing = True
        if process.returncode is None:
            if process.stdin is not None:
                process.stdin.close()
            if not await self._wait_exit(self.target.close_grace):
                self._signal(signal.SIGTERM)
                if not await self._wait_exit(self.target.term_grace):
                    self._signal(signal.SIGKILL)
                    await self._wait_exit(None)
        # Then whatever it left behind (daemons, setsid children): they may hold its stdout open.
        await asyncio.to_thread(self.kill)
        # The exit watcher records the exit frame; give it its turn before the readers go.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._exited.wait(), 5)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._remove_home()

    async def discard(self) -> None:
        """Kill a spawned server that was never opened (a warm start nobody connected to)."""
        if self.process is None or self._sink is not None:
            return
        await asyncio.to_thread(self.kill)
        await self._wait_exit(5)
        # asyncio's own wait too: its exit callback closes the process's transport, which a loop that
        # ends first would leave to the garbage collector (a ResourceWarning in whatever runs then).
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.process.wait(), 5)
        await self._remove_home()

    async def _remove_home(self) -> None:
        # After the whole tree is dead, so nothing writes there any more; in a thread: it may be big.
        home, self._home = self._home, None
        if home is not None:
            await asyncio.to_thread(shutil.rmtree, home, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the server and every process it started, wherever they went (blocks briefly)."""
        if self.server_process is not None:
            kill_tree(self.server_process)
            unwatch(self.server_process)

    async def _server_gone(self) -> None:
        """Until the server process itself has exited, whoever else still holds its pipes."""
        assert self.process is not None
        if self._gone is not None:
            await self._gone.wait()
        else:  # no pidfd: asyncio's wait, which also waits for the pipes to close
            await asyncio.shield(self.process.wait())

    async def _wait_exit(self, timeout: float | None) -> bool:
        try:
            await asyncio.wait_for(self._server_gone(), timeout)
        except TimeoutError:
            return False
        return True

    def _signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)


def _found(command: str, env: dict[str, str], cwd: str | None) -> bool:
    """Whether exec, in a child with ``env`` and ``cwd``, would find ``command`` as a program: a path
    (from ``cwd`` if relative), else in each of its ``PATH``'s folders (a relative one from ``cwd``)."""
    base = cwd or os.getcwd()
    places = [command] if os.sep in command else [os.path.join(d, command) for d in os.get_exec_path(env)]
    for place in places:
        path = os.path.join(base, place)  # an absolute place stays as it is
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return True
    return False
