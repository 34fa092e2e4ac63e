"""The tap's control channel: how the inspector sets breakpoints and faults on a running tap.

The tap listens on a Unix socket next to its spool, ``<data folder>/taps/<run>.sock``: the folder is
its user's alone (0700) and the socket too (0600), and a connection whose peer (``SO_PEERCRED``) is
another user is closed unanswered. No web page can reach a Unix socket, so only the inspector of the
same user speaks here.

Each side writes one JSON object a line. A command ``{"op": ..., ...}`` is answered with
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``:

- ``state``: the rules, the faults and the held messages (``Traffic.snapshot``);
- ``watch``: the state now and after every change, on this connection, until it closes;
- ``rules`` (``rules``: a list, see ``_match``), ``faults`` (``faults``: see ``_gate``);
- ``fault`` (``action``: close, truncate or corrupt; ``direction``: in or out): a one-shot fault;
- ``release`` (``id``, ``action``: forward, edit, drop, error or delay; ``by``; ``raw``, ``ms``,
  ``code``, ``message`` as the action needs): a held message decided. The answer carries the numbers
  of the frames recorded for it (``seqs``), once the spool has made them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import struct
import threading
from typing import Any

from inspector.tap._gate import Traffic, TrafficError

__all__ = ["MAX_LINE", "ControlServer", "bind_path", "peer_uid"]

MAX_LINE = 40 * 1024 * 1024
"""The longest command line taken (an edited message of the longest size kept, as JSON text)."""
SEQS_WAIT = 2.0
"""Seconds a release waits for the spool to number its frames before answering without them."""
_SUN_PATH = 100


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def bind_path(path: str) -> tuple[str, int | None]:
    """A name for ``path`` that fits a socket address: itself, or through a descriptor of its folder
    (``/proc/self/fd/N/name``) when it is too long; the descriptor to close after, if one was opened."""
    if len(path.encode()) <= _SUN_PATH:
        return path, None
    folder = os.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    return f"/proc/self/fd/{folder}/{os.path.basename(path)}", folder


class ControlServer:
    """Listen on the run's socket and serve each connection from a thread of its own."""

    def __init__(self, path: str, traffic: Traffic) -> None:
        self.path = path
        self.traffic = traffic
        self.sock: socket.socket | None = None
        self.watchers: list[_Connection] = []
        self.watchers_lock = threading.Lock()

    def start(self) -> str | None:
        """Listen; None, or why the tap takes no commands (it forwards all the same)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address, folder = "", None
        try:
            address, folder = bind_path(self.path)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(address)
            sock.bind(address)
            os.chmod(address, 0o600)
            sock.listen(8)
        except OSError as exc:
            sock.close()
            return f"cannot take breakpoint commands at {self.path}: {exc.strerror or exc}"
        finally:
            if folder is not None:
                os.close(folder)
        self.sock = sock
        threading.Thread(target=self._accept, name="tap-control", daemon=True).start()
        threading.Thread(target=self._notify, name="tap-watchers", daemon=True).start()
        return None

    def close(self) -> None:
        """Stop listening and remove the socket."""
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            with contextlib.suppress(OSError):
                address, folder = bind_path(self.path)
                try:
                    os.unlink(address)
                finally:
                    if folder is not None:
                        os.close(folder)

    def _accept(self) -> None:
        assert self.sock is not None
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                if peer_uid(conn) != os.getuid():
                    conn.close()  # another user: no answer at all
                    continue
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_Connection(conn, self).serve, name="tap-command", daemon=True).start()

    def _notify(self) -> None:
        """Send the state to every watcher after each change (changes close together go as one)."""
        while True:
            self.traffic.changed.wait()
            self.traffic.changed.clear()
            state = self.traffic.snapshot()
            with self.watchers_lock:
                watchers = list(self.watchers)
            for watcher in watchers:
                if not watcher.send({"event": "state", "state": state}):
                    with self.watchers_lock, contextlib.suppress(ValueError):
                        self.watchers.remove(watcher)


class _Connection:
    """One connection from the inspector: commands in, answers (and a watcher's states) out."""

    def __init__(self, conn: socket.socket, server: ControlServer) -> None:
        self.conn = conn
        self.server = server
        self.lock = threading.Lock()

    def send(self, answer: dict[str, Any]) -> bool:
        data = json.dumps(answer, ensure_ascii=False).encode() + b"\n"
        try:
            with self.lock:
                self.conn.sendall(data)
        except OSError:
            return False
        return True

    def serve(self) -> None:
        reader = self.conn.makefile("rb")
        try:
            while True:
                line = reader.readline(MAX_LINE + 1)
                if not line:
                    return
                if len(line) > MAX_LINE:
                    self.send({"ok": False, "error": "the command is too long"})
                    return
                if not self.send(self.answer(line)):
                    return
        except OSError:
            return
        finally:
            with self.server.watchers_lock, contextlib.suppress(ValueError):
                self.server.watchers.remove(self)
            with contextlib.suppress(OSError):
                reader.close()
                self.conn.close()

    def answer(self, line: bytes) -> dict[str, Any]:
        try:
            command = json.loads(line)
        except (ValueError, RecursionError):
            return {"ok": False, "error": "a command is one JSON object a line"}
        if not isinstance(command, dict):
            return {"ok": False, "error": "a command is a JSON object"}
        try:
            return {"ok": True, **self.do(command)}
        except TrafficError as exc:
            return {"ok": False, "error": str(exc)}

    def do(self, command: dict[str, Any]) -> dict[str, Any]:
        traffic, op = self.server.traffic, command.get("op")
        if op == "state":
            return {"state": traffic.snapshot()}
        if op == "watch":
            with self.server.watchers_lock:
                self.server.watchers.append(self)
            return {"state": traffic.snapshot()}
        if op == "rules":
            traffic.set_rules(command.get("rules"))
        elif op == "faults":
            traffic.set_faults(command.get("faults"))
        elif op == "fault":
            traffic.once(str(command.get("action")), str(command.get("direction") or ""))
        elif op == "release":
            how = {k: command.get(k) for k in ("raw", "ms", "code", "message")}
            change = traffic.release(command.get("id"), str(command.get("action")), command.get("by"), **how)
            seqs: dict[str, int] = {}
            if change is not None and change.seqs is not None:
                with contextlib.suppress(queue.Empty):
                    seqs = change.seqs.get(timeout=SEQS_WAIT)
            return {"seqs": seqs, "state": traffic.snapshot()}
        else:
            raise TrafficError(f"unknown command {op!r}")
        return {"state": traffic.snapshot()}
