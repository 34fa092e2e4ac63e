"""Run every benchmark, print a table with PASS/FAIL against the targets, write results/latest.json.

.venv/bin/python -m bench [--calls 500] [--notifications 100000] [--sessions 20] [--quick] [--no-browser]
    [--load] [--peers-only] [--viewers-only]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import platform
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from bench import bigsession, clients, exports, manysessions, peers, redaction, servers, tap, viewers
from sessions.engine import ClientOptions, Frame, HttpTarget, StdioTarget, connect

LATENCY_TARGET = 1.5  # engine median latency / raw client median latency, at most
RATE_TARGET = 20_000  # notifications recorded per second, at least (and none lost)
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
EVERYTHING_ECHO = {"message": "hello, benchmark"}  # server-everything's echo takes {"message": ...}
SDK_ECHO = {"text": "hello, benchmark"}  # tests/servers/sdk_server.py's echo takes {"text": ...}


# --- 1. per-call latency ---------------------------------------------------------------------------


def percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def latency(
    makers: dict[str, Callable[[], contextlib.AbstractAsyncContextManager[clients.Call]]],
    args: argparse.Namespace,
) -> dict[str, dict[str, Any]]:
    """Time ``args.calls`` calls per client, ``args.repeat`` times over fresh connections; pool the samples.

    Within a repetition every client is open at once and, after ``args.warmup`` untimed calls each, they
    take turns in blocks of ``args.block`` calls (the order rotates every round), so drift and noise land
    on all of them alike. Fresh connections per repetition (fresh server processes over stdio) keep one
    slow process from deciding the result.
    """
    samples: dict[str, list[float]] = {name: [] for name in makers}
    rep_medians: dict[str, list[float]] = {name: [] for name in makers}
    names = list(makers)
    for _ in range(args.repeat):
        async with contextlib.AsyncExitStack() as stack:
            callers = {name: await stack.enter_async_context(make()) for name, make in makers.items()}
            for call in callers.values():
                for _ in range(args.warmup):
                    await call()
            rep: dict[str, list[float]] = {name: [] for name in names}
            gc.collect()
            for round_no in range(math.ceil(args.calls / args.block)):
                shift = round_no % len(names)
                for name in names[shift:] + names[:shift]:
                    call, out = callers[name], rep[name]
                    for _ in range(args.block):
                        started = time.perf_counter()
                        await call()
                        out.append(time.perf_counter() - started)
        for name in names:
            samples[name] += rep[name]
            rep_medians[name].append(round(statistics.median(rep[name]) * 1e6, 1))
    return {
        name: {
            "median_us": statistics.median(s) * 1e6,
            "p99_us": percentile(s, 99) * 1e6,
            "calls": len(s),
            "median_us_per_repetition": rep_medians[name],
        }
        for name, s in samples.items()
    }


def latency_clients(transport: str, where: Any, echo: dict[str, Any]) -> dict[str, Any]:
    """The four clients of one scenario; ``where`` is an argv (stdio) or a URL (http)."""
    if transport == "stdio":
        target: Any = StdioTarget(where[0], where[1:])
        raw = lambda: clients.raw_stdio(where, "echo", echo)  # noqa: E731
    else:
        target = HttpTarget(where)
        raw = lambda: clients.raw_http(where, "echo", echo)  # noqa: E731
    return {
        "raw": raw,
        "engine validate=False": lambda: clients.engine(target, False, "echo", echo),
        "engine validate=True": lambda: clients.engine(target, True, "echo", echo),
        "mcp SDK": lambda: clients.sdk(where, "echo", echo),
    }


# --- 2. notification ingestion ---------------------------------------------------------------------


async def flood_engine(count: int, validate: bool) -> dict[str, float]:
    """One tools/call that makes bad_stdio send ``count`` notifications/message before its result."""
    received = 0

    def on_event(event: Any) -> None:
        nonlocal received
        if isinstance(event, Frame) and event.direction == "in" and event.method == "notifications/message":
            received += 1

    argv = servers.bad_stdio("flood")
    async with connect(StdioTarget(argv[0], argv[1:]), ClientOptions(validate=validate)) as session:
        session.subscribe(on_event)
        await session.call_tool("t", {"count": 10})  # warm-up (and the schema import when validating)
        received = 0
        gc.collect()
        started = time.perf_counter()
        await session.call_tool("t", {"count": count}, timeout=None)
        elapsed = time.perf_counter() - started
    return {"received": received, "lost": count - received, "seconds": elapsed, "per_s": received / elapsed}


async def flood_raw(count: int) -> dict[str, float]:
    """Reference: how fast a bare readline + json.loads loop takes the same flood."""
    argv = servers.bad_stdio("flood")
    async with clients.raw_stdio(argv, "t", {"count": 10}) as call:
        await call()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": clients.INIT_PARAMS}
    request = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "t", "arguments": {"count": count}},
    }
    proc.stdin.write(json.dumps(init).encode() + b"\n")
    await proc.stdout.readline()
    received = 0
    started = time.perf_counter()
    proc.stdin.write(json.dumps(request).encode() + b"\n")
    while True:
        message = json.loads(await proc.stdout.readline())
        if message.get("method") == "notifications/message":
            received += 1
        elif message.get("id") == 2:
            break
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    await proc.wait()
    return {"received": received, "lost": count - received, "seconds": elapsed, "per_s": received / elapsed}


# --- 3. memory per idle session --------------------------------------------------------------------


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def idle_memory(
    make: Callable[[], contextlib.AbstractAsyncContextManager[Any]], k: int
) -> dict[str, float]:
    """Open ``k`` sessions and let them idle; our own process's growth per session (servers excluded).

    Two passes: RSS (what the OS charges us) without tracing, then tracemalloc (Python allocations only).
    One session is opened and closed first, so imports and one-time caches are not counted.
    """
    async with make():
        pass
    result: dict[str, float] = {"sessions": k}
    for mode in ("rss", "traced"):
        gc.collect()
        if mode == "traced":
            tracemalloc.start()
        before = rss_bytes() if mode == "rss" else tracemalloc.get_traced_memory()[0]
        async with contextlib.AsyncExitStack() as stack:
            started = time.perf_counter()
            for _ in range(k):
                await stack.enter_async_context(make())
            if mode == "rss":
                result["open_ms_per_session"] = (time.perf_counter() - started) * 1000 / k
            await asyncio.sleep(1.0)  # idle: late server messages (roots/list, GET streams) settle
            gc.collect()
            after = rss_bytes() if mode == "rss" else tracemalloc.get_traced_memory()[0]
        if mode == "traced":
            tracemalloc.stop()
        result[f"{mode}_kb_per_session"] = (after - before) / 1024 / k
    return result


@contextlib.asynccontextmanager
async def idle_engine(target: Any) -> AsyncIterator[Any]:
    async with connect(target, ClientOptions(validate=False)) as session:
        yield session


# --- the run -----------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"latency": {}, "notifications": {}, "memory": {}}
    step = lambda what: print(f"  … {what}", file=sys.stderr, flush=True)  # noqa: E731

    step(f"latency over stdio (server-everything), {args.repeat}×{args.calls} calls per client")
    results["latency"]["stdio server-everything"] = await latency(
        latency_clients("stdio", servers.everything_stdio(), EVERYTHING_ECHO), args
    )
    with servers.everything_http() as url:
        step(f"latency over Streamable HTTP (server-everything), {args.repeat}×{args.calls} calls per client")
        results["latency"]["http server-everything"] = await latency(
            latency_clients("http", url, EVERYTHING_ECHO), args
        )
        step(f"memory: {args.sessions} idle HTTP sessions")
        results["memory"]["engine http"] = await idle_memory(
            lambda: idle_engine(HttpTarget(url)), args.sessions
        )
    with servers.sdk_http() as url:
        step(f"latency over Streamable HTTP (sdk_server.py), {args.repeat}×{args.calls} calls per client")
        results["latency"]["http sdk_server"] = await latency(latency_clients("http", url, SDK_ECHO), args)
    argv = servers.bad_stdio("flood")
    step(f"memory: {args.sessions} idle stdio sessions")
    results["memory"]["engine stdio"] = await idle_memory(
        lambda: idle_engine(StdioTarget(argv[0], argv[1:])), args.sessions
    )
    for validate in (False, True):
        step(f"notifications: flood of {args.notifications}, validate={validate}")
        results["notifications"][f"engine validate={validate}"] = await flood_engine(
            args.notifications, validate
        )
    step("notifications: raw reference")
    results["notifications"]["raw"] = await flood_raw(args.notifications)
    return results


def judge(results: dict[str, Any]) -> bool:
    """Add ratios and verdicts in place; return whether every target is met."""
    ok = True
    for scenario in results["latency"].values():
        raw = scenario["raw"]
        for name, row in scenario.items():
            if name == "raw":
                continue
            row["x_raw_median"] = row["median_us"] / raw["median_us"]
            row["x_raw_p99"] = row["p99_us"] / raw["p99_us"]
            if name.startswith("engine"):
                row["pass"] = row["x_raw_median"] <= LATENCY_TARGET
                ok &= row["pass"]
    for name, row in results["notifications"].items():
        if name.startswith("engine"):
            row["pass"] = row["lost"] == 0 and row["per_s"] >= RATE_TARGET
            ok &= row["pass"]
    results["pass"] = ok
    return ok


def verdict(row: dict[str, Any]) -> str:
    return "" if "pass" not in row else ("PASS" if row["pass"] else "FAIL")


def print_table(results: dict[str, Any]) -> None:
    if results["latency"]:
        print_engine_table(results)
    if "browser" in results:
        from bench import browser

        browser.print_table(results["browser"])
    if "app" in results:
        from bench import apps

        apps.print_table(results["app"])
    if "redaction" in results:
        redaction.print_table(results["redaction"])
    if "bigsession" in results:
        bigsession.print_table(results["bigsession"])
    if "exports" in results:
        exports.print_table(results["exports"])
    if "many" in results:
        manysessions.print_table(results["many"])
    if "peers" in results:
        peers.print_table(results["peers"])
    if "viewers" in results:
        viewers.print_table(results["viewers"])
    if "tap" in results:
        tap.print_table(results["tap"])
    print(f"\noverall: {'PASS' if results['pass'] else 'FAIL'}")


def print_engine_table(results: dict[str, Any]) -> None:
    calls = next(iter(next(iter(results["latency"].values())).values()))["calls"]
    target = f"target: engine median ≤ {LATENCY_TARGET}× raw"
    print(f"\n1. per-call latency, tools/call echo, {calls} calls per client (µs; {target})")
    print(f"   {'client':<24}{'median':>9}{'p99':>9}{'×raw med':>10}{'×raw p99':>10}  verdict")
    for scenario, rows in results["latency"].items():
        print(f"   {scenario}")
        for name, row in rows.items():
            ratios = f"{row['x_raw_median']:>10.2f}{row['x_raw_p99']:>10.2f}" if name != "raw" else " " * 20
            print(f"     {name:<22}{row['median_us']:>9.0f}{row['p99_us']:>9.0f}{ratios}  {verdict(row)}")
    print(f"\n2. notification ingestion, bad_stdio flood (target: ≥ {RATE_TARGET:,}/s, none lost)")
    print(f"   {'client':<24}{'recorded':>9}{'lost':>7}{'seconds':>9}{'per s':>10}  verdict")
    for name, row in results["notifications"].items():
        print(
            f"     {name:<22}{row['received']:>9}{row['lost']:>7}{row['seconds']:>9.2f}"
            f"{row['per_s']:>10,.0f}  {verdict(row)}"
        )
    print("\n3. memory per idle session, our process only (KB; no target), and time to open one")
    print(f"   {'sessions':<24}{'RSS':>9}{'traced':>9}{'open ms':>9}")
    for name, row in results["memory"].items():
        label = f"{name} ×{row['sessions']}"
        print(
            f"     {label:<22}{row['rss_kb_per_session']:>9.0f}{row['traced_kb_per_session']:>9.0f}"
            f"{row['open_ms_per_session']:>9.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="timed calls per client per scenario")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per client first")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions, each over fresh connections")
    parser.add_argument("--block", type=int, default=25, help="calls per client per turn")
    parser.add_argument("--notifications", type=int, default=100_000, help="size of the flood")
    parser.add_argument("--sessions", type=int, default=20, help="idle sessions for the memory figure")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--no-browser", action="store_true", help="skip bench/browser.py")
    parser.add_argument(
        "--no-app", action="store_true", help="skip bench/apps.py (the app without a browser)"
    )
    parser.add_argument("--app-only", action="store_true", help="run only bench/apps.py")
    parser.add_argument("--app-calls", type=int, default=200, help="tools/calls timed for the app's CPU")
    parser.add_argument("--stop-sessions", type=int, default=1000, help="live sessions when stopping")
    parser.add_argument("--browser-only", action="store_true", help="run only the browser section")
    parser.add_argument("--clicks", type=int, default=30, help="timed clicks per form in the browser section")
    parser.add_argument("--frames", type=int, default=10_000, help="env-dump frames in the redacted export")
    parser.add_argument("--big-frames", type=int, default=100_000, help="frames of the big session (10.)")
    parser.add_argument("--export-frames", type=int, default=100_000, help="frames of the exported session")
    parser.add_argument("--many-sessions", type=int, default=5000, help="live HTTP sessions in one process")
    parser.add_argument("--no-peers", action="store_true", help="skip bench/peers.py (the same-run peers)")
    parser.add_argument("--peers-only", action="store_true", help="run only bench/peers.py")
    parser.add_argument("--peer-connects", type=int, default=5, help="timed connects per app (13.)")
    parser.add_argument("--peer-clicks", type=int, default=20, help="timed echo clicks per app (13.)")
    parser.add_argument("--cli-runs", type=int, default=7, help="timed runs per CLI (13.)")
    parser.add_argument("--load", action="store_true", help="measure the peers again beside a fixed load")
    parser.add_argument("--no-viewers", action="store_true", help="skip bench/viewers.py (many viewers)")
    parser.add_argument("--viewers-only", action="store_true", help="run only bench/viewers.py")
    parser.add_argument("--viewers", default="1,50,200", help="viewer counts, comma-separated (14.)")
    parser.add_argument("--viewer-notifications", type=int, default=10_000, help="each flood's size (14.)")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.warmup, args.repeat, args.notifications, args.sessions = 50, 5, 1, 5_000, 3
        args.clicks, args.app_calls, args.stop_sessions, args.frames = 10, 30, 50, 1_000
        args.big_frames = 5_000
        args.export_frames = 5_000
        args.many_sessions = 200
        args.peer_connects, args.peer_clicks, args.cli_runs = 2, 5, 2
        args.viewers, args.viewer_notifications = "1,10,50", 2_000
    only_new = args.peers_only or args.viewers_only  # the sections of their own, alone
    if args.app_only or only_new:
        args.browser_only, args.no_browser = True, args.no_browser or not args.peers_only
    if only_new:
        args.no_app = True
    run_peers = not args.no_peers and (args.peers_only or not (args.browser_only or args.viewers_only))
    run_viewers = not args.no_viewers and (args.viewers_only or not (args.browser_only or args.peers_only))
    started = time.perf_counter()
    results: dict[str, Any] = {"latency": {}, "notifications": {}, "memory": {}}
    ok = True
    if not args.browser_only:
        results = asyncio.run(run(args))
        ok = judge(results)
        print(
            f"  … redacted JSON Lines export of {args.frames:,} env-dump frames", file=sys.stderr, flush=True
        )
        results["redaction"] = redaction.run(args.frames)
        ok &= redaction.judge(results["redaction"])
        results["exports"] = exports.run(args.export_frames)
        ok &= exports.judge(results["exports"])
        print(f"  … {args.many_sessions:,} live HTTP sessions in one process", file=sys.stderr, flush=True)
        results["many"] = manysessions.run(args.many_sessions)
        ok &= manysessions.judge(results["many"])
        print("  … what a tap adds to a round trip (stdio, HTTP)", file=sys.stderr, flush=True)
        results["tap"] = tap.run()
        ok &= tap.judge(results["tap"])
    if not args.no_app and (args.app_only or not args.browser_only):
        from bench import apps

        results["app"] = asyncio.run(apps.run(calls=args.app_calls, stop_sessions=args.stop_sessions))
        ok &= apps.judge(results["app"])
        results["bigsession"] = bigsession.run(args.big_frames, browser=not args.no_browser)
        ok &= bigsession.judge(results["bigsession"])
    if not args.no_browser and not only_new:
        from bench import browser

        sizes = (1_000, 10_000) if args.quick else browser.FLOOD_SIZES
        results["browser"] = asyncio.run(browser.run(calls=args.clicks, sizes=sizes))
        ok &= browser.judge(results["browser"])
    if run_peers:
        results["peers"] = asyncio.run(
            peers.run(
                repeat=args.peer_connects,
                calls=args.peer_clicks,
                warmup=2 if args.quick else 5,
                cli_runs=args.cli_runs,
                browser_lines=not args.no_browser,
                load=args.load,
            )
        )
        ok &= peers.judge(results["peers"])
    if run_viewers:
        counts = tuple(int(n) for n in args.viewers.split(","))
        results["viewers"] = asyncio.run(viewers.run(counts, args.viewer_notifications))
        ok &= viewers.judge(results["viewers"])
    results["pass"] = ok
    results["env"] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "args": vars(args),
        "seconds": round(time.perf_counter() - started, 1),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    print_table(results)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"took {results['env']['seconds']} s; wrote {RESULTS}")
    sys.exit(0 if ok else 1)
