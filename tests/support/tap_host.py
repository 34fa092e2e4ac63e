"""A raw host for the tap's tests: a script that writes JSON-RPC lines to ``mcp-inspector tap`` and
reads its answers with a deadline of its own (``select``), as a host with a timeout would."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import time
from typing import Any

TAP = [sys.executable, "-m", "inspector", "tap"]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-host", "version": "1"},
    },
}


def echo(rpc_id: int, text: str) -> dict[str, Any]:
    params = {"name": "echo", "arguments": {"message": text}}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


class Host:
    """A raw host: writes JSON-RPC lines to the tap, reads its answers with a deadline of its own."""

    def __init__(self, env: dict[str, str], name: str, everything: dict[str, Any]) -> None:
        self.process = subprocess.Popen(
            [*TAP, "--name", name, "--", everything["command"], *everything["args"]],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.buffer = b""

    def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def read(self, timeout: float) -> dict[str, Any] | None:
        """The next line the host gets within ``timeout`` seconds, or None."""
        assert self.process.stdout is not None
        fd, deadline = self.process.stdout.fileno(), time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def answer(self, rpc_id: int, timeout: float = 20.0) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while (message := self.read(deadline - time.monotonic())) is not None:
            if message.get("id") == rpc_id and "method" not in message:
                return message
        return None

    def start(self) -> None:
        self.write(INITIALIZE)
        assert self.answer(1) is not None
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        self.process.wait(15)
        self.process.stdout.close()
