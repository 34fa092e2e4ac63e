"""Many live HTTP sessions in one process: memory per session, and a page and a call on one of them.

.venv/bin/python -m bench.manysessions --sessions 5000 (prints one JSON line). In a process of its
own, on a fresh data folder and SQLite database, the real app (``inspector.asgi.application``, the
embedded set-up: web and runtime on one event loop) is served over HTTP by uvicorn in this process,
and a person logs in with the one-time token. ``--sessions`` sessions over Streamable HTTP to
``bench/tiny_http.py`` (another process, whose memory does not count) are started through the
embedded runtime as connecting starts one. With all of them live:

- the growth of this process's RSS (``/proc/self/statm``) per session, from before the first of them
  to after the last is ready (one session was opened, used and kept before, so imports, caches and
  the database's pages are not counted); then, with ``tracemalloc`` on, ``--traced`` more sessions
  for the Python allocations per session;
- the session page (``GET /s/<id>/``) of one of them over HTTP, and a ``tools/call`` on it through
  ``sessions.runtime.client.request`` (what the web's call views send; stored before the answer),
  ``--samples`` times each after two untimed; and the same call posted through the web's raw
  request form (``POST /s/<id>/request``), shown;
- then the time to stop them all (shown).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import time
import tracemalloc
from typing import Any

from bench import servers
from bench.stopping import open_sessions

MEMORY_TARGET_KB = 64
LATENCY_TARGET_MS = 100.0


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _InProcessApp:
    """What ``bench.apps.Person`` needs of an app: its address and its login token."""

    def __init__(self, base: str, token: str) -> None:
        self.base, self.token = base, token
        self.login_url = f"{base}/auth/token?token={token}"


async def _timed(samples: int, once: Any) -> dict[str, float]:
    for _ in range(2):  # untimed: the first of each reads templates and warms caches
        await once()
    times: list[float] = []
    for _ in range(samples):
        started = time.perf_counter()
        await once()
        times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": statistics.median(times), "max_ms": max(times), "samples": samples}


async def measure(count: int, traced: int, samples: int, url: str) -> dict[str, Any]:
    import uvicorn
    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import User

    from bench.apps import Person
    from inspector.auth import login_token
    from sessions.runtime import client
    from sessions.runtime import messages as m
    from sessions.runtime.host import stop_embedded_runtime

    port = servers.free_port()
    base = f"http://127.0.0.1:{port}"
    config = uvicorn.Config(
        "inspector.asgi:application", host="127.0.0.1", port=port, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
        await asyncio.sleep(0.01)
    result: dict[str, Any] = {"sessions": count, "server": "uvicorn, in this process"}
    try:
        async with Person(_InProcessApp(base, login_token.issue())) as person:  # type: ignore[arg-type]
            user = await sync_to_async(User.objects.get)()
            # One session opened and used first: imports, templates, caches, the database's pages.
            (first,) = await open_sessions(1, url, user)
            await first.arefresh_from_db()  # its owner's channel

            async def page() -> None:
                answer = await person.http.get(f"/s/{first.public_id}/")
                if answer.status_code != 200:
                    raise RuntimeError(f"the session page answered {answer.status_code}")

            async def call() -> None:
                command = m.Request("tools/call", {"name": "t", "arguments": {}}, wait=2.0, user_id=user.pk)
                answer = await client.request(first, command)
                if not isinstance(answer, m.Done) or "result" not in answer.outcome:
                    raise RuntimeError(f"tools/call through the runtime answered {answer}")

            async def web_call() -> None:
                fields = {"method": "tools/call", "params": json.dumps({"name": "t", "arguments": {}})}
                answer = await person.post(f"/s/{first.public_id}/request", fields)
                if answer.status_code != 200:
                    raise RuntimeError(f"the raw request form answered {answer.status_code}")

            await page()
            await call()
            await web_call()
            gc.collect()
            before = rss_bytes()
            started = time.perf_counter()
            await open_sessions(count, url, user)
            result["open_s"] = time.perf_counter() - started
            await asyncio.sleep(1.0)  # idle: what the sessions do after their handshakes settles
            gc.collect()
            result["rss_kb_per_session"] = (rss_bytes() - before) / 1024 / count
            result["page"] = await _timed(samples, page)
            result["call"] = await _timed(samples, call)
            result["web_call"] = await _timed(samples, web_call)
            if traced:
                tracemalloc.start()
                gc.collect()
                before = tracemalloc.get_traced_memory()[0]
                await open_sessions(traced, url, user)
                await asyncio.sleep(1.0)
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - before
                result["traced_kb_per_session"] = grown / 1024 / traced
                result["traced_sessions"] = traced
                tracemalloc.stop()
            started = time.perf_counter()
            await stop_embedded_runtime()
            result["stop_s"] = time.perf_counter() - started
    finally:
        server.should_exit = True
        await serving
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.manysessions")
    parser.add_argument("--sessions", type=int, default=5000)
    parser.add_argument("--traced", type=int, default=200, help="sessions opened with tracemalloc on")
    parser.add_argument("--samples", type=int, default=20, help="timed page GETs and calls")
    args = parser.parse_args()
    # Two sockets a session at most, here and in the tiny server (which inherits the limit).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * (args.sessions + args.traced) + 1024
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    with servers.scratch_app("bench-many-") as url:
        result = asyncio.run(measure(args.sessions, args.traced, args.samples, url))
    print(json.dumps(result))


# --- as a section of python -m bench ------------------------------------------------------------------


def run(sessions: int = 5000) -> dict[str, Any]:
    """This module in a process of its own (it sets Django up)."""
    return servers.child_json("bench.manysessions", "--sessions", str(sessions))


def judge(results: dict[str, Any]) -> bool:
    results["memory_pass"] = results["rss_kb_per_session"] <= MEMORY_TARGET_KB
    results["page"]["pass"] = results["page"]["median_ms"] < LATENCY_TARGET_MS
    results["call"]["pass"] = results["call"]["median_ms"] < LATENCY_TARGET_MS
    results["pass"] = results["memory_pass"] and results["page"]["pass"] and results["call"]["pass"]
    return bool(results["pass"])


def print_table(results: dict[str, Any]) -> None:
    verdict = lambda ok: "PASS" if ok else "FAIL"  # noqa: E731
    print(f"\n12. {results['sessions']:,} live HTTP sessions in one process (the app served by uvicorn here)")
    traced = results.get("traced_kb_per_session")
    shown = f"; traced {traced:.1f} KiB over {results['traced_sessions']}" if traced is not None else ""
    print(
        f"   memory per session: RSS {results['rss_kb_per_session']:.1f} KiB{shown} "
        f"(target ≤ {MEMORY_TARGET_KB} KiB)  {verdict(results['memory_pass'])}"
    )
    for key, label in (("page", "session page GET"), ("call", "tools/call via runtime client")):
        row = results[key]
        print(
            f"   {label:<30} median {row['median_ms']:6.1f} ms, max {row['max_ms']:6.1f} ms "
            f"(target median < {LATENCY_TARGET_MS:.0f} ms)  {verdict(row['pass'])}"
        )
    row, label = results["web_call"], "tools/call via request form"
    print(f"   {label:<30} median {row['median_ms']:6.1f} ms, max {row['max_ms']:6.1f} ms (shown)")
    print(f"   opened in {results['open_s']:.1f} s, stopped in {results['stop_s']:.1f} s")


if __name__ == "__main__":
    main()
