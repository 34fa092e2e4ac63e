"""The tap's frames: what the pumps forwarded, as the engine's judged frames, in JSON Lines.

One thread takes what the pumps queued, cuts it into lines, has the engine's ``TapObserver`` number
and judge them, and appends each frame (the CLI's ``--record`` format: ``Frame.to_dict()`` a line) to
the spool file, and to ``--record``'s file when given. The spool is ``<data folder>/taps/<run>.jsonl``:
the folder is the owner's alone (0700) and the file too (0600), so only the user who runs both the
tap and the inspector can write frames into a tap session or read them. The inspector takes them
from there whenever it runs (``sessions/runtime/taps.py``); a tap never waits for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import secrets
import time
from typing import TYPE_CHECKING, Any

from inspector.tap._options import TapOptions

if TYPE_CHECKING:
    from inspector.tap._control import ControlServer
    from inspector.tap._gate import Change, Traffic
    from sessions.engine import Frame, LineSplitter, TapObserver

__all__ = ["Spool", "open_private", "spool_dir"]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest line kept whole (the engine's default ``max_message_bytes``); longer ones keep their head."""


def spool_dir() -> str:
    """``<data folder>/taps``: where taps leave their frames for the inspector (made private)."""
    from inspector.paths import data_dir, private_dir

    path = data_dir() / "taps"
    private_dir(path)
    return str(path)


def open_private(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


class Spool:
    """The thread that turns what the pumps forwarded into frames and writes them down."""

    def __init__(
        self, options: TapOptions, items: queue.SimpleQueue[Any], traffic: Traffic | None = None
    ) -> None:
        self.options = options
        self.items = items
        self.traffic = traffic
        self.control: ControlServer | None = None
        self.spool_fd: int | None = None
        self.record_fd: int | None = None
        self.path = ""

    def run(self) -> None:
        # Loaded here, off the forwarding path: the server is already starting meanwhile.
        from sessions.engine import LineSplitter, TapObserver

        observer = TapObserver(max_message_bytes=MAX_MESSAGE_BYTES)
        splitters = {what: LineSplitter(MAX_MESSAGE_BYTES) for what in ("client", "server", "stderr")}
        self._open()
        self._listen()
        try:
            while True:
                item = self.items.get()
                batch = list(item) if isinstance(item, list) else [item]
                with contextlib.suppress(queue.Empty):
                    while batch[-1] is not None:
                        item = self.items.get_nowait()
                        if isinstance(item, list):
                            batch.extend(item)
                        else:
                            batch.append(item)
                frames: list[Frame] = []
                for one in batch:
                    if one is None:
                        break
                    frames.extend(self._frames(observer, splitters, *one))
                self._write(frames)
                if batch[-1] is None:
                    return
        finally:
            if self.control is not None:
                self.control.close()
            self._close_files()

    def _close_files(self) -> None:
        for fd in (self.spool_fd, self.record_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _frames(
        self,
        observer: TapObserver,
        splitters: dict[str, LineSplitter],
        what: str,
        payload: Any,
        wall: float,
        mono: float,
    ) -> list[Frame]:
        if what == "spawned":
            pid, marker = payload
            return [self._spawned(observer, pid, marker, wall, mono)]
        if what == "failed":
            return [observer.failed(str(payload))]
        if what == "exit":
            return observer.exited(int(payload), wall, mono)
        if what == "tap":
            return self._changed(observer, payload, wall, mono)
        splitter = splitters[what]
        lines = splitter.feed(payload) if payload else []
        last = b"" if payload else splitter.rest()
        frames: list[Frame] = []
        if what == "client":
            for line in [*lines, last] if last else lines:
                frames.extend(observer.client_line(line, wall, mono))
        elif what == "server":
            for line in lines:
                frames.extend(observer.server_line(line, wall, mono))
            if last:
                frames.extend(observer.server_end(last, wall, mono))
        else:
            frames.extend(observer.stderr_line(line, wall, mono) for line in [*lines, last] if line)
        return frames

    @staticmethod
    def _changed(observer: TapObserver, change: Change, wall: float, mono: float) -> list[Frame]:
        """What the tap did to a message: the fault, the original bytes, what was sent, the tap's answer."""
        frames: list[Frame] = []
        seqs: dict[str, int] = {}
        if change.fault is not None:
            frames.append(observer.local("fault", change.fault_note, {"fault": change.fault}, wall, mono))
            seqs["fault"] = frames[-1].seq
        original: Frame | None = None
        if change.original is not None:
            original = observer.aside(
                change.original.rstrip(b"\r\n"), change.direction, change.original_note, wall, mono
            )
            frames.append(original)
            seqs["original"] = original.seq
        if change.sent is not None:
            line = change.sent.rstrip(b"\r\n")
            if change.direction == "out":
                made = observer.client_line(line, wall, mono)
            else:
                made = observer.server_line(line, wall, mono)
            made[0].note = change.sent_note or made[0].note
            seqs["sent"] = made[0].seq
            if original is not None:
                made[0].transport["tap"] = {"original": original.seq}
                original.transport["tap"] = {"forwarded_as": made[0].seq}
            frames.extend(made)
        if change.reply is not None:
            answer = "in" if change.direction == "out" else "out"
            frames.append(observer.aside(change.reply.rstrip(b"\n"), answer, change.reply_note, wall, mono))
            seqs["reply"] = frames[-1].seq
        if change.seqs is not None:
            change.seqs.put(seqs)
        return frames

    def _listen(self) -> None:
        """Take breakpoint and fault commands on ``<run>.sock``, next to the spool."""
        if self.traffic is None or self.spool_fd is None:
            return
        from inspector.tap._control import ControlServer

        self.control = ControlServer(self.path.removesuffix(".jsonl") + ".sock", self.traffic)
        problem = self.control.start()
        if problem:
            self.control = None
            self._warn(problem)

    def _spawned(self, observer: TapObserver, pid: int, marker: str, wall: float, mono: float) -> Frame:
        """The server started: its frame names it and the tap, and the watchdog learns of it."""
        from sessions.engine import ServerProcess, watch

        server = ServerProcess.of(pid, marker)
        # Whatever the server starts dies with the tap, even what leaves its session or process group.
        watch(server)
        tap = ServerProcess.of(os.getpid(), "")
        frame = observer.spawned(
            pid, self.options.command, self.options.args, cwd=os.getcwd(), process=server.as_dict()
        )
        frame.wall, frame.mono = wall, mono
        frame.transport["tap"] = {
            "name": self.options.name,
            "run": os.path.basename(self.path).removesuffix(".jsonl"),
            "pid": tap.pid,
            "started": tap.started,
            "host": tap.host,
        }
        return frame

    def _open(self) -> None:
        """Open the spool file (and the record's); a tap that cannot write them still forwards."""
        name = f"{int(time.time() * 1000):013d}-{os.getpid()}-{secrets.token_hex(4)}.jsonl"
        try:
            self.path = os.path.join(spool_dir(), name)
            self.spool_fd = open_private(self.path, os.O_EXCL | os.O_APPEND)
        except OSError as exc:
            self._warn(f"cannot keep frames for the inspector in {self.path or 'the data folder'}: {exc}")
        if self.options.record is not None:
            try:
                self.record_fd = os.open(
                    self.options.record, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600
                )
            except OSError as exc:
                self._warn(f"cannot write --record file {self.options.record}: {exc.strerror or exc}")

    def _write(self, frames: list[Frame]) -> None:
        self._append(self, frames)

    def _append(self, files: Any, frames: list[Frame]) -> None:
        """Write ``frames`` to the spool and record files of ``files`` (this spool, or one of its parts)."""
        if not frames:
            return
        data = "".join(json.dumps(f.to_dict(), ensure_ascii=False) + "\n" for f in frames).encode()
        for which in ("spool_fd", "record_fd"):
            fd = getattr(files, which)
            if fd is None:
                continue
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as exc:
                setattr(files, which, None)
                self._warn(f"stopped writing frames ({exc.strerror or exc})")

    @staticmethod
    def _warn(message: str) -> None:
        with contextlib.suppress(OSError):
            os.write(2, f"mcp-inspector tap: {message}\n".encode())
