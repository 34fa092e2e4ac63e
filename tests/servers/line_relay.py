"""A stdio relay that records every line both ways (stdlib only): what a host sends, what its server answers.

Usage: python tests/servers/line_relay.py LOG -- COMMAND [ARGS...]

It starts COMMAND, forwards the host's stdin to it and its stdout to the host, line by line, and
appends each line to LOG as JSON (``{"from": "client" | "server", "line": ...}``) before forwarding
it, so a request is always logged before its answer. Its exit code is COMMAND's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading


def main() -> int:
    log_path, separator, *command = sys.argv[1:]
    if separator != "--" or not command:
        print("usage: line_relay.py LOG -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the relay's whole life

    def record(side: str, line: bytes) -> None:
        with lock:
            log.write(json.dumps({"from": side, "line": line.decode("utf-8", "replace")}) + "\n")
            log.flush()

    def upstream() -> None:
        for line in sys.stdin.buffer:
            record("client", line)
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=upstream, daemon=True).start()
    for line in child.stdout:
        record("server", line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
