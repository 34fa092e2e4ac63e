"""A host of raw JSON-RPC lines for the tap's tests: it runs the tap (and its server) as a host would,
writes lines to it and reads the server's answers, each wait bounded."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

__all__ = ["RawHost"]


class RawHost:
    """``argv`` (the tap and its server) with pipes; what the server says is read on a thread."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        assert self.proc.stdout is not None
        self.reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self.reader.start()

    def _read(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            if line.strip():
                self.lines.put(json.loads(line))
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, wanted: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> dict[str, Any]:
        """The next line of the server's that ``wanted`` takes (others skipped: notifications, logs)."""
        while True:
            line = self.lines.get(timeout=timeout)
            if line is None:
                raise EOFError("the server's output ended")
            if wanted(line):
                return line

    def ask(self, message: dict[str, Any], timeout: float = 15.0) -> dict[str, Any]:
        """Send a request and return its answer."""
        self.send(message)
        return self.receive(lambda line: line.get("id") == message["id"] and "method" not in line, timeout)

    def close(self, timeout: float = 15.0) -> int:
        """End the host's input (the server's too) and wait for the tap to exit."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout)
            self.proc.stdout.close()
