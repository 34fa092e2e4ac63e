"""What a tap adds to one request's round trip: a host sending tools/call echo to server-everything
over stdio, directly and through ``mcp-inspector tap``, and over Streamable HTTP, directly and through
``mcp-inspector tap --listen``, in the same run (``python -m bench.tap``).

The host is a plain script (a line out, the answering line back; over HTTP one keep-alive httpx client
POSTing each call and reading its SSE reply to its end), so what differs is the tap alone. Each side
runs four rounds of 200 calls, each after a warm-up of 20, the sides taking turns (after one untimed
round each); the p50 and p95 of each are printed, and the p50 difference is the tap's cost.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx

from bench.servers import EVERYTHING_JS, everything_http, free_port, http_server, node

CALLS = 200
WARM_UP = 20
ROUNDS = 4
"""Rounds per side: with two, one slow moment of the machine moved the HTTP line by a millisecond."""


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


def http_round_trips(url: str) -> list[float]:
    """Milliseconds per tools/call echo POSTed to ``url``, one after the other, on one connection."""
    accept = {"Accept": "application/json, text/event-stream"}
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    }
    times = []
    with httpx.Client(timeout=30) as host:
        opened = host.post(
            url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}, headers=accept
        )
        session = {**accept, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
        session["MCP-Protocol-Version"] = "2025-06-18"
        host.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        for i in range(1, WARM_UP + CALLS + 1):
            call = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"message": f"m{i}"}},
            }
            start = time.perf_counter()
            answer = host.post(url, json=call, headers=session)
            if i > WARM_UP:
                times.append((time.perf_counter() - start) * 1000)
            assert f"Echo: m{i}" in answer.text, answer.text
        host.delete(url, headers=session)
    return times


def summary(results: dict[str, list[float]], direct: str, tapped: str, target: float) -> dict[str, Any]:
    """p50 and p95 of each side, and what the tap adds at p50 against ``target`` ms."""
    row: dict[str, Any] = {"target_ms": target}
    for side, name in (("direct", direct), ("tap", tapped)):
        times = results[name]
        row[side] = {"p50": statistics.median(times), "p95": statistics.quantiles(times, n=20)[18]}
        row["calls"] = len(times)
    row["added_ms"] = row["tap"]["p50"] - row["direct"]["p50"]
    return row


def run() -> dict[str, Any]:
    """Both taps, each against its direct path in the same run."""
    return {"stdio": stdio(), "http": http()}


def judge(results: dict[str, Any]) -> bool:
    ok = True
    for row in results.values():
        row["pass"] = row["added_ms"] <= row["target_ms"]
        ok &= row["pass"]
    return ok


def print_table(results: dict[str, Any]) -> None:
    print("\n15. what a tap adds to one tools/call round trip (ms, p50; same run; target: the added p50)")
    head = f"{'direct p50':>11}{'tap p50':>9}{'direct p95':>11}{'tap p95':>9}{'added':>8}"
    print(f"   {'transport':<10}{head}  verdict")
    for name, row in results.items():
        d, t = row["direct"], row["tap"]
        verdict = "PASS" if row.get("pass") else "FAIL"
        print(
            f"   {name:<10}{d['p50']:>11.3f}{t['p50']:>9.3f}{d['p95']:>11.3f}{t['p95']:>9.3f}"
            f"{row['added_ms']:>8.3f}  {verdict} (≤ {row['target_ms']:g})"
        )


def main() -> None:
    results = run()
    judge(results)
    print_table(results)


def http() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data, everything_http() as url:
        port = free_port()
        tap = [
            sys.executable,
            "-m",
            "inspector",
            "tap",
            "--listen",
            f"127.0.0.1:{port}",
            "--name",
            "bench",
            url,
        ]
        with http_server(tap, port, env={"INSPECTOR_DATA_DIR": data}):
            tapped = f"http://127.0.0.1:{port}/mcp"
            # One untimed round each first: the tap loads its recorder in the background as it starts
            # (a start cost, not a request's), and the server warms its own paths.
            http_round_trips(url)
            http_round_trips(tapped)
            results: dict[str, list[float]] = {}
            for _ in range(ROUNDS):  # alternate, so neither side always runs on a warmer machine
                for name, target in (("http direct", url), ("http tap", tapped)):
                    results.setdefault(name, []).extend(http_round_trips(target))
    return summary(results, "http direct", "http tap", 2)


def stdio() -> dict[str, Any]:
    server = [node(), str(EVERYTHING_JS)]
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "INSPECTOR_DATA_DIR": data}
        tap = [sys.executable, "-m", "inspector", "tap", "--name", "bench", "--", *server]
        results: dict[str, list[float]] = {}
        for _ in range(ROUNDS):  # alternate, so neither side always runs on a warmer machine
            for name, argv in (("direct", server), ("tap", tap)):
                results.setdefault(name, []).extend(round_trips(argv, env))
    return summary(results, "direct", "tap", 1)


if __name__ == "__main__":
    main()
