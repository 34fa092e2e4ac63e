"""What a tap adds to one request's round trip: a host sending tools/call echo to server-everything
over stdio, directly and through ``mcp-inspector tap``, in the same run (``python -m bench.tap``).

The host is a plain script (a line out, the answering line back), so what differs is the tap alone.
Each side runs 200 calls after a warm-up of 20; the p50 and p95 of each are printed, and the p50
difference is the tap's cost.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.servers import EVERYTHING_JS, node

CALLS = 200
WARM_UP = 20


def round_trips(argv: list[str], env: dict[str, str]) -> list[float]:
    """Milliseconds per tools/call echo, one after the other, against the server ``argv`` starts."""
    host = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert host.stdin is not None and host.stdout is not None
    stdin, stdout = host.stdin, host.stdout

    def ask(message: dict[str, object]) -> None:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()
        while "id" in message:
            if json.loads(stdout.readline()).get("id") == message["id"]:
                return

    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    }
    ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for i in range(1, WARM_UP + CALLS + 1):
        call = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": f"m{i}"}},
        }
        start = time.perf_counter()
        ask(call)
        if i > WARM_UP:
            times.append((time.perf_counter() - start) * 1000)
    stdin.close()
    host.wait(30)
    stdout.close()
    return times


def main() -> None:
    server = [node(), str(EVERYTHING_JS)]
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "INSPECTOR_DATA_DIR": data}
        tap = [sys.executable, "-m", "inspector", "tap", "--name", "bench", "--", *server]
        results = {}
        for _ in range(2):  # alternate, so neither side always runs on a warmer machine
            for name, argv in (("direct", server), ("tap", tap)):
                results.setdefault(name, []).extend(round_trips(argv, env))
    for name, times in results.items():
        quantiles = statistics.quantiles(times, n=20)
        p50, p95 = statistics.median(times), quantiles[18]
        print(f"{name:>6}: p50 {p50:.3f} ms, p95 {p95:.3f} ms ({len(times)} calls)")
    added = statistics.median(results["tap"]) - statistics.median(results["direct"])
    print(f"the tap adds {added:.3f} ms to a round trip at p50 (target: at most 1 ms)")


if __name__ == "__main__":
    main()
