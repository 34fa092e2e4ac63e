"""10. A 100,000-frame session: its page and its Conformance tab on the server, and its first paint.

A finished session of ``--big-frames`` frames (100,000) is made in a child process, with its own
temporary data folder and SQLite database, the way a real one is: the engine's ``ClientSession`` talks
to a scripted server (``sessions.engine.testing.ScriptedTransport``), and every frame it publishes goes
through ``frame_row`` into the runtime's ``Recorder`` (batches through ``store.store_frames``), as a
session's owner does. The traffic is an hour of a busy session: the handshake, ``tools/list``, thousands
of ``tools/call`` with progress and log messages, some failing (``isError``, JSON-RPC errors), pings,
resource reads and prompts, stderr lines, and now and then a server breaking a rule (progress that does
not increase, a response to an unknown id, an error without an integer code). The server's clock is
simulated (the transport stamps each frame), so latencies and the hour are the script's, not the
machine's.

Then a real ``mcp-inspector --no-browser`` serves that folder, and a logged-in client on the same
machine GETs the session page (its Overview tab), the page opened on the Conformance tab, and the
Conformance tab's fragment (a tab switch): median wall time of ``--big-repeat`` GETs after one
warm-up each. The child also times the same views in-process (Django's test client, no HTTP) and counts
their queries and their slowest one. First paint: headless Chromium (Playwright) opens the session page,
``first-contentful-paint`` from the page's own performance entries (median of 5 fresh page loads after
one warm-up). Targets: **server < 100 ms** each, **first paint < 250 ms**.

``python -m bench.bigsession`` runs this section alone and prints its table; ``--frames`` changes the
size, ``--no-browser`` skips the first paint.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

from bench import servers

FRAMES = 100_000
SERVER_TARGET_MS = 100.0  # each page's GET, median, at most
PAINT_TARGET_MS = 250.0  # first-contentful-paint of the session page, median, at most
SPAN_S = 3600.0  # the session's length on its simulated clock
TIMED = {  # name → path under /s/<id>/; the judged ones
    "session page (Overview)": "",
    "session page on Conformance": "?tab=conformance",
    "Conformance tab (fragment)": "panel/conformance",
}
SEED = 10


# --- building the session (in a child process: Django set up on a temporary data folder) -----------


class _Clock:
    """The scripted server's clock: where the session stands in its hour."""

    def __init__(self, start: float) -> None:
        self.wall, self.mono = start, 1000.0

    def tick(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds

    def stamp(self, frame: Any) -> None:
        frame.wall, frame.mono = self.wall, self.mono


class _StampedSink:
    """The session's sink, with every frame the transport delivers stamped by the simulated clock."""

    def __init__(self, sink: Any, clock: _Clock) -> None:
        self._sink, self._clock = sink, clock

    def record(self, frame: Any) -> Any:
        self._clock.stamp(frame)
        return self._sink.record(frame)

    def receive(self, frame: Any) -> None:
        self._clock.stamp(frame)
        self._sink.receive(frame)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sink, name)


def _transport(clock: _Clock, capabilities: dict[str, Any]) -> Any:
    from sessions.engine.testing import ScriptedTransport

    class Stamped(ScriptedTransport):
        async def open(self, sink: Any) -> None:
            await super().open(_StampedSink(sink, clock))

    return Stamped(name="stdio", handshake={"capabilities": capabilities, "instructions": "a busy server"})


TOOLS = [
    {
        "name": name,
        "description": f"{name}: what it does, in a sentence or two as servers write them.",
        "inputSchema": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["query"],
        },
    }
    for name in ("search", "fetch", "summarize", "translate", "lookup", "echo", "sleep", "count")
]
LEVELS = ("debug", "info", "info", "notice", "warning")


async def _traffic(frames: int, on_row: Any, session_started: Any) -> dict[str, Any]:
    """Drive an engine session against the scripted server until ``frames`` frames are recorded."""
    from sessions.engine import ClientOptions, ClientSession, Frame, McpError

    rng = random.Random(SEED)
    clock = _Clock(time.time() - SPAN_S)
    capabilities = {"tools": {"listChanged": True}, "logging": {}, "resources": {}, "prompts": {}}
    server = _transport(clock, capabilities)
    client = ClientSession(server, ClientOptions(validate=True))
    count = 0

    def on_event(event: Any) -> None:
        nonlocal count
        if isinstance(event, Frame):
            if event.kind == "state":  # the engine's own frames: on the same clock as the wire's
                clock.stamp(event)
            count += 1
            on_row(event)

    client.subscribe(on_event)

    async def call(
        method: str, params: dict[str, Any] | None, answer: Any, *, progress: bool = False
    ) -> None:
        handle = await client.start_request(method, params, progress=progress, timeout=None)
        sent = await server.next_sent(method)
        clock.tick(rng.uniform(0.0002, 0.002))
        await answer(sent)
        with contextlib.suppress(McpError):  # an error answer, as the script meant
            await handle

    def result_text(n: int) -> dict[str, Any]:
        text = " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "result", "row")) for _ in range(n))
        return {"content": [{"type": "text", "text": text}], "isError": False}

    async def tool_call(i: int) -> None:
        async def answer(sent: Any) -> None:
            token = sent.params.get("_meta", {}).get("progressToken")
            latency = rng.lognormvariate(-3.5, 1.4)  # a median of 30 ms, a long tail
            steps = rng.choice((0, 1, 1, 2))
            for step in range(steps):
                clock.tick(latency / (steps + 1))
                value = step + 1 if i % 250 or step == 0 else step  # now and then: not increasing
                server.server_sends(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": token, "progress": value, "total": steps},
                    }
                )
            for _ in range(rng.choice((0, 1, 1, 2))):
                level = rng.choice(LEVELS)
                data = {"tool": sent.params.get("name"), "step": i, "detail": "working on it"}
                server.server_sends(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": level, "data": data},
                    }
                )
            clock.tick(latency / (steps + 1))
            if i % 400 == 7:  # an error without an integer code: a rule broken
                server.answer(sent, error={"code": "oops", "message": "internal failure"})
            elif i % 20 == 3:
                server.answer(sent, error={"code": -32602, "message": "Invalid params: query is required"})
            elif i % 20 == 11:
                server.answer(
                    sent, {"content": [{"type": "text", "text": "upstream timed out"}], "isError": True}
                )
            else:
                server.answer(sent, result_text(rng.randint(5, 60)))

        name = TOOLS[i % len(TOOLS)]["name"]
        arguments = {"query": f"question {i}", "limit": rng.randint(1, 50)}
        await call("tools/call", {"name": name, "arguments": arguments}, answer, progress=True)

    async def simple(method: str, params: dict[str, Any] | None, result: dict[str, Any]) -> None:
        async def answer(sent: Any) -> None:
            server.answer(sent, result)

        await call(method, params, answer)

    async with client:
        session_started(client)
        await simple("tools/list", None, {"tools": TOOLS})
        await simple("resources/list", None, {"resources": [{"uri": "file:///notes.md", "name": "notes"}]})
        await simple("prompts/list", None, {"prompts": [{"name": "review", "description": "review code"}]})
        i = 0
        while count < frames - 6:  # the closing frames come last
            i += 1
            clock.tick(rng.expovariate(1 / (SPAN_S / frames * 4)))
            await tool_call(i)
            if i % 50 == 0:
                await simple("ping", None, {})
            if i % 120 == 0:
                contents = {"contents": [{"uri": "file:///notes.md", "text": "# notes\n" * 20}]}
                await simple("resources/read", {"uri": "file:///notes.md"}, contents)
            if i % 300 == 0:
                messages = {"messages": [{"role": "user", "content": {"type": "text", "text": "review"}}]}
                await simple("prompts/get", {"name": "review"}, messages)
            if i % 90 == 0:
                server.sink.record(Frame("stderr", "in", f"[server] handled {i} calls".encode()))
            if i % 700 == 0:  # a response to a request nobody sent
                server.server_sends({"jsonrpc": "2.0", "id": 10_000_000 + i, "result": {}})
            if i % 2000 == 0:
                server.server_sends({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                await simple("tools/list", None, {"tools": TOOLS})
        clock.tick(1.0)
    return {"calls": i, "frames": count}


def build(frames: int) -> dict[str, Any]:
    """Make the session in this process's database (Django set up); its public id and how it was made."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer
    from django.utils import timezone

    from sessions.frames import frame_row
    from sessions.models import McpSession
    from sessions.runtime import store
    from sessions.runtime.recorder import Recorder
    from sessions.teams.access import personal_team
    from sessions.teams.logins import local_user

    user = local_user()
    config = {
        "name": "busy", "transport": "stdio", "command": "busy-server", "args": ["--verbose"], "env": {},
        "url": "", "protocol_version": "2025-11-25", "capabilities": {}, "timeout": 60,
        "max_total_timeout": 600,
    }  # fmt: skip
    session = McpSession.objects.create(owner=user, team=personal_team(user), name="busy", config=config)
    phases: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}

    async def make() -> dict[str, Any]:
        recorder = Recorder(session.pk, session.group_name, get_channel_layer())
        recorder.start()

        def on_row(frame: Any) -> None:
            recorder.add(frame_row(frame, 0))
            state = frame.transport.get("state", "") if frame.kind == "state" else ""
            if state in McpSession.PHASES:
                phases.append(
                    {"state": state, "note": frame.note or "", "wall": frame.wall, "seq": frame.seq}
                )

        def started(client: Any) -> None:
            facts.update(
                protocol_version=client.protocol_version or "",
                mode=client.mode or "",
                transport_name=client.transport.name,
                server_info=client.server_info,
                server_capabilities=client.server_capabilities,
                client_capabilities=client.client_capabilities,
                instructions=client.instructions or "",
            )

        try:
            made = await _traffic(frames, on_row, started)
        finally:
            await recorder.close()
        await store.close_connections()
        return made

    started = time.perf_counter()
    made = async_to_sync(make)()
    ended = timezone.now()
    McpSession.objects.filter(pk=session.pk).update(
        status=McpSession.Status.CLOSED, status_note="closed", ended=ended, phases=phases, **facts
    )
    session.refresh_from_db()
    if session.last_seq != made["frames"] or session.frames.count() != made["frames"]:
        raise SystemExit(f"bench: {made['frames']} frames made, {session.frames.count()} stored")
    return {"public_id": str(session.public_id), "build_s": time.perf_counter() - started, **made}


def in_process(public_id: str, repeat: int) -> dict[str, Any]:
    """The same views through Django's test client (no HTTP): median ms, queries, the slowest query."""
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from sessions.teams.logins import local_user

    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(local_user())
    out: dict[str, Any] = {}
    for name, path in TIMED.items():
        url = f"/s/{public_id}/{path}"
        samples = []
        for i in range(repeat + 1):
            reset_queries()
            with CaptureQueriesContext(connection) as queries:
                started = time.perf_counter()
                response = client.get(url)
                elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise SystemExit(f"bench: GET {url} answered {response.status_code}")
            if i:
                samples.append(elapsed)
        slowest = max(
            queries.captured_queries, key=lambda q: float(q["time"]), default={"time": 0, "sql": ""}
        )
        out[name] = {
            "median_ms": statistics.median(samples),
            "queries": len(queries.captured_queries),
            "slowest_query_ms": float(str(slowest["time"])) * 1000,
            "slowest_query": str(slowest["sql"])[:300],
        }
    return out


def child(folder: str, frames: int, repeat: int) -> None:
    servers.django_on(folder)
    made = build(frames)
    made["in_process"] = in_process(made["public_id"], repeat)
    print(json.dumps(made))


# --- measuring through the app -----------------------------------------------------------------------

PAINT_JS = """
() => {
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  const nav = performance.getEntriesByType("navigation")[0];
  return {fcp: paint ? paint.startTime : null, ttfb: nav ? nav.responseStart : null,
          bytes: nav ? nav.transferSize : null};
}
"""


async def _server_times(person: Any, public_id: str, repeat: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, path in TIMED.items():
        url = f"/s/{public_id}/{path}"
        samples, size = [], 0
        for i in range(repeat + 1):
            started = time.perf_counter()
            response = await person.http.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code != 200:
                raise RuntimeError(f"GET {url} answered {response.status_code}")
            size = len(response.content)
            if i:
                samples.append(elapsed)
        out[name] = {"median_ms": statistics.median(samples), "min_ms": min(samples), "bytes": size}
    return out


async def _first_paint(person: Any, public_id: str, loads: int = 5) -> dict[str, Any]:
    """The session page's first-contentful-paint in fresh tabs of a browser holding the person's login
    (the one-time token is spent: their cookies are handed over)."""
    from bench.browser import chromium

    app = person.app
    cookies = [
        {"name": c.name, "value": c.value or "", "url": app.base, "sameSite": "Strict"}
        for c in person.http.cookies.jar
    ]
    fcps, ttfbs = [], []
    async with chromium() as browser:
        context = await browser.new_context(viewport={"width": 1400, "height": 900})
        await context.add_cookies(cookies)
        for i in range(loads + 1):
            page = await context.new_page()
            await page.goto(f"{app.base}/s/{public_id}/", wait_until="load")
            if "/s/" not in page.url:
                raise RuntimeError(f"the browser is not logged in: it is at {page.url}")
            await page.wait_for_function(
                "() => performance.getEntriesByName('first-contentful-paint').length > 0", timeout=10_000
            )
            found = await page.evaluate(PAINT_JS)
            await page.close()
            if i:
                fcps.append(found["fcp"])
                ttfbs.append(found["ttfb"])
        await context.close()
    return {
        "median_ms": statistics.median(fcps),
        "max_ms": max(fcps),
        "ttfb_median_ms": statistics.median(ttfbs),
    }


async def _through_app(folder: str, public_id: str, repeat: int, browser: bool) -> dict[str, Any]:
    from bench.apps import Person, running

    async with running("bigsession", {"INSPECTOR_DATA_DIR": folder}) as app, Person(app) as person:
        results: dict[str, Any] = {"server": await _server_times(person, public_id, repeat)}
        if browser:
            results["paint"] = await _first_paint(person, public_id)
    return results


def run(frames: int = FRAMES, repeat: int = 7, browser: bool = True) -> dict[str, Any]:
    """Build the session in a child process, then time its pages through a real app."""
    step = lambda what: print(f"  … big session: {what}", file=sys.stderr, flush=True)  # noqa: E731
    folder = tempfile.mkdtemp(prefix="bench-bigsession-")
    try:
        step(f"recording a {frames:,}-frame session through the engine and the recorder")
        made = servers.child_json(
            "bench.bigsession", "--child", folder, "--frames", str(frames), "--repeat", str(repeat)
        )
        step("its pages through a real app" + (", and its first paint in Chromium" if browser else ""))
        results = asyncio.run(_through_app(folder, made["public_id"], repeat, browser))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"frames": made["frames"], "calls": made["calls"], "build_s": made["build_s"], **results,
            "in_process": made["in_process"], "repeat": repeat}  # fmt: skip


def judge(results: dict[str, Any]) -> bool:
    ok = True
    for row in results["server"].values():
        row["pass"] = row["median_ms"] < SERVER_TARGET_MS
        ok &= row["pass"]
    if "paint" in results:
        results["paint"]["pass"] = results["paint"]["median_ms"] < PAINT_TARGET_MS
        ok &= results["paint"]["pass"]
    results["pass"] = ok
    return ok


def print_table(results: dict[str, Any]) -> None:
    v = lambda row: "PASS" if row["pass"] else "FAIL"  # noqa: E731
    print(
        f"\n10. a {results['frames']:,}-frame session ({results['calls']:,} tools/calls; recorded in"
        f" {results['build_s']:.1f} s); GET median of {results['repeat']} (targets: server"
        f" < {SERVER_TARGET_MS:g} ms each, first paint < {PAINT_TARGET_MS:g} ms)"
    )
    head = f"{'HTTP ms':>9}{'×target':>9}{'KB':>7}{'in-proc':>9}{'queries':>8}{'slowest q':>10}"
    print(f"   {'page':<32}{head}  verdict")
    for name, row in results["server"].items():
        inner = results["in_process"][name]
        print(
            f"     {name:<30}{row['median_ms']:>9.1f}{row['median_ms'] / SERVER_TARGET_MS:>9.2f}"
            f"{row['bytes'] / 1024:>7.0f}{inner['median_ms']:>9.1f}{inner['queries']:>8}"
            f"{inner['slowest_query_ms']:>10.1f}  {v(row)}"
        )
    if "paint" in results:
        paint = results["paint"]
        print(
            f"     {'first contentful paint, session page':<30}{paint['median_ms']:>9.1f}"
            f"{paint['median_ms'] / PAINT_TARGET_MS:>9.2f}{'':>7}{'':>9}{'':>8}{'':>10}  {v(paint)}"
            f"  (TTFB {paint['ttfb_median_ms']:.1f} ms, worst FCP {paint['max_ms']:.1f} ms)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bigsession", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=FRAMES, help="frames in the session")
    parser.add_argument("--repeat", type=int, default=7, help="timed GETs per page, after one warm-up")
    parser.add_argument("--no-browser", action="store_true", help="skip the first paint")
    parser.add_argument("--child", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.frames, args.repeat)
        return
    results = run(args.frames, args.repeat, not args.no_browser)
    ok = judge(results)
    print_table(results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
