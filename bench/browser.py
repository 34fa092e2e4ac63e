"""Browser measurements of the web inspector: a real app, driven in headless Chromium through Playwright.

1. click → rendered result of ``tools/call echo`` (Tools tab form and raw request form), timed inside the
   page with ``performance.now()``, against a raw engine call of the same echo;
2. notification floods of 1,000 / 10,000 / 100,000 ``notifications/message`` (``bad_stdio.py flood``):
   time until every frame is in the database, time until the page shows the result, the last row and the
   frame count, and how long the page takes to answer while it happens; no frame may be lost;
3. server processes after a tab closes: kept while the idle timeout has not passed, ended by Disconnect,
   by ``INSPECTOR_IDLE_TIMEOUT`` with no tab open, and when the app stops (SIGTERM).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from playwright.async_api import TimeoutError as PlaywrightTimeout
from playwright.async_api import async_playwright

from bench import clients, servers
from bench.apps import App
from sessions.engine import StdioTarget

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Chromium 156 builds its omnibox popups (two WebUI pages, ~1,200 module loads, about 0.6 s of a
    # core) for every window Playwright opens, so each fresh tab's page loaded beside that work: on a
    # 2-core machine it added ~100 ms to the session page's first paint. A person's browser built
    # them when its window opened. Chromium reads only the last --disable-features, so this one
    # repeats the Chromium part of Playwright's own list (1.65) before adding the two.
    "--disable-features=AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,HttpsUpgrades,"
    "HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,ThirdPartyStoragePartitioning,"
    "AvoidCorsURLLoaderRestartOnRedirect,TcpPortRandomizationWin,OptimizationHints,NetworkTimeServiceQuerying,"
    "AimEnabled,PreconnectToSearch,WebUIOmniboxPopup,WebUIOmniboxAimPopup",
]
CLICK_TARGET_MS = 40.0  # median click → rendered echo result, at most
FLOOD_TARGET_S = 5.0  # 100,000 notifications recorded and the last row shown, at most (issue 10)
ANSWER_TARGET_MS = 50.0  # the page answers a round-trip within this throughout a flood (issue 10)
RECORD_TARGET = 50_000  # frames recorded per second through the app with a tab watching, at least
PAGE_TARGET_MS = 2000.0  # a server-side page over a 100,000-frame session
FLOW_TARGET_MS = 500.0  # a window of the message flow (the sequence diagram) over that session
FLOOD_SIZES = (1_000, 10_000, 100_000)
COUNT_GRACE_S = 2.0  # after the result and the last row show, how long the frame count may lag
STATE_GRACE_S = 3  # after the session is ready in the database, how long its page may take to show it
IDLE_TIMEOUT_S = 2  # INSPECTOR_IDLE_TIMEOUT of the second app
APP_BIN = Path(sys.executable).with_name("mcp-inspector")

# Click the button in the same task that starts the clock; resolve when the wanted text is in the
# newest call card (#call-list, hx-swap afterbegin). Runs in the page.
CLICK_JS = """
async ({setup, button, want}) => {
  for (const [sel, val] of setup) document.querySelector(sel).value = val;
  const list = document.getElementById('call-list');
  const btn = document.querySelector(button);
  return await new Promise((resolve, reject) => {
    let t0 = 0;
    const seen = () => {
      const c = list.firstElementChild;
      return c !== null && c.textContent.includes(want);
    };
    const obs = new MutationObserver(() => {
      if (seen()) { const dt = performance.now() - t0; obs.disconnect(); clearTimeout(timer); resolve(dt); }
    });
    const timer = setTimeout(() => { obs.disconnect(); reject(new Error('no result: ' + want)); }, 10000);
    obs.observe(list, {childList: true, subtree: true, characterData: true});
    t0 = performance.now();
    btn.click();
  });
}
"""

# Watch a flood from inside the page: event-loop lag (a 50 ms interval), long tasks, and the moments the
# result, the last timeline row and the frame count show. Then click Send request.
FLOOD_JS = """
({count, total}) => {
  const w = {t0: 0, maxLag: 0, maxLong: 0, result: null, lastRow: null, counted: null};
  window.__flood = w;
  const want = 'flooded ' + count;
  const check = () => {
    const now = performance.now() - w.t0;
    if (w.result === null && document.getElementById('call-list').textContent.includes(want)) w.result = now;
    const rows = document.getElementById('timeline-rows');
    const last = rows && rows.lastElementChild;
    if (w.lastRow === null && last && Number(last.dataset.seq) >= total) w.lastRow = now;
    const fc = document.getElementById('frame-count');
    if (w.counted === null && fc && Number(fc.textContent.trim()) >= total) w.counted = now;
  };
  w.obs = new MutationObserver(check);
  w.obs.observe(document.body, {childList: true, subtree: true, characterData: true});
  let expected = performance.now() + 50;
  w.timer = setInterval(() => {
    const now = performance.now();
    w.maxLag = Math.max(w.maxLag, now - expected);
    expected = now + 50;
    check();
  }, 50);
  try {
    w.long = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) w.maxLong = Math.max(w.maxLong, e.duration);
    });
    w.long.observe({type: 'longtask'});
  } catch (e) { w.long = null; }
  document.getElementById('raw-method').value = 'tools/call';
  document.getElementById('raw-params').value = JSON.stringify({name: 't', arguments: {count}});
  w.t0 = performance.now();
  document.querySelector('.raw-request button[type=submit]').click();
}
"""
FLOOD_STATE_JS = "() => { const w = window.__flood; return {result: w.result, lastRow: w.lastRow, counted: w.counted, maxLag: w.maxLag, maxLong: w.maxLong}; }"  # noqa: E501
FLOOD_STOP_JS = "() => { const w = window.__flood; w.obs.disconnect(); clearInterval(w.timer); if (w.long) w.long.disconnect(); }"  # noqa: E501


# --- the server processes of the app under test ----------------------------------------------------


def _proc_stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) of a live process, or None once it is gone (or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[19])


def server_processes(app_pid: int, needle: str) -> set[tuple[int, int]]:
    """(pid, start time) of the app's descendants whose command line contains ``needle``."""
    parents: dict[int, int] = {}
    starts: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _proc_stat(int(entry))) is not None:
            parents[int(entry)], starts[int(entry)] = stat
    found = set()
    for pid in parents:
        ancestor = parents[pid]
        while ancestor > 1 and ancestor != app_pid:
            ancestor = parents.get(ancestor, 0)
        if ancestor != app_pid:
            continue
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            if needle in cmdline.decode(errors="replace"):
                found.add((pid, starts[pid]))
    return found


def alive(processes: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The ones still running (same pid and the same start time: not a reused pid)."""
    return {(pid, start) for pid, start in processes if (s := _proc_stat(pid)) is not None and s[1] == start}


async def gone_within(processes: set[tuple[int, int]], seconds: float) -> float | None:
    """Seconds until every process has ended, or None if some still run after ``seconds``."""
    started = time.perf_counter()
    while alive(processes):
        if time.perf_counter() - started > seconds:
            return None
        await asyncio.sleep(0.05)
    return time.perf_counter() - started


# --- driving the UI ----------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def logged_in(browser: Any, app: App) -> Any:
    """A browser context logged in to ``app`` (its one-time token link)."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    page = await context.new_page()
    await page.goto(app.login_url)
    await page.get_by_label("Command").wait_for()
    await page.close()
    return context


async def connect(page: Any, app: App, command: str) -> str:
    """Connect to a stdio server through the connect form; wait for ready; return the session's public id."""
    await page.goto(app.base + "/")
    await page.get_by_label("Command").fill(command)
    await page.get_by_role("button", name="Connect", exact=True).click()
    await page.wait_for_url("**/s/**", timeout=15_000)
    public_id = str(page.url.rstrip("/").rsplit("/", 1)[-1])
    deadline = time.monotonic() + 15
    while app.status(public_id) != "ready":
        if time.monotonic() > deadline:
            raise RuntimeError(f"session {public_id} did not get ready; see {app.dir / 'app.log'}")
        await asyncio.sleep(0.02)
    # The page must follow by itself (the state arrives over the websocket); if it does not within
    # STATE_GRACE_S it is counted as stuck and reloaded, so the rest of the run can go on.
    app.connects += 1
    ready = page.locator("#session-state .status-ready")
    try:
        await ready.wait_for(state="attached", timeout=STATE_GRACE_S * 1000)
    except PlaywrightTimeout:
        app.stuck.append(await page.locator("#session-state .status").first.inner_text())
        await page.reload()
        await ready.wait_for(state="attached", timeout=5_000)
    return public_id


def median_p95(samples: list[float]) -> dict[str, Any]:
    ordered = sorted(samples)
    return {
        "median_ms": statistics.median(ordered),
        "p95_ms": ordered[max(0, -(-95 * len(ordered) // 100) - 1)],
        "samples": len(ordered),
    }


async def clicks(page: Any, form: str, calls: int, warmup: int) -> dict[str, Any]:
    tag = secrets.token_hex(3)
    times = []
    for i in range(warmup + calls):
        text = f"click {i:04d} {tag}."
        if form == "tools":
            setup = [['#tool-form textarea[name="arg.message"]', text]]
            button = "#tool-form button[name=mode][value=form]"
        else:
            params = json.dumps({"name": "echo", "arguments": {"message": text}})
            setup = [["#raw-method", "tools/call"], ["#raw-params", params]]
            button = ".raw-request button[type=submit]"
        elapsed = await page.evaluate(CLICK_JS, {"setup": setup, "button": button, "want": f"Echo: {text}"})
        if i >= warmup:
            times.append(float(elapsed))
    return median_p95(times)


async def engine_echo(calls: int, warmup: int) -> dict[str, Any]:
    argv = servers.everything_stdio()
    times = []
    async with clients.engine(StdioTarget(argv[0], argv[1:]), False, "echo", {"message": "raw"}) as call:
        for i in range(warmup + calls):
            started = time.perf_counter()
            await call()
            if i >= warmup:
                times.append((time.perf_counter() - started) * 1000)
    return median_p95(times)


async def open_echo_form(page: Any) -> None:
    """The echo tool's form, as a person gets to it: a connected session opens on Tools and lists them."""
    await page.get_by_role("tab", name="Tools", selected=True).wait_for()
    await page.get_by_role("button", name="Open tool echo").click()


async def echo_latency(browser: Any, context: Any, app: App, calls: int, warmup: int) -> dict[str, Any]:
    page = await context.new_page()
    await connect(page, app, " ".join(servers.everything_stdio()))
    await open_echo_form(page)
    await page.locator('#tool-form textarea[name="arg.message"]').wait_for()
    # In the page is not yet taken by htmx: a click before then submits the form natively (a navigation).
    await page.wait_for_function(
        "() => { const f = document.querySelector('#tool-form form');"
        " return !!f && f['htmx-internal-data'] !== undefined; }"
    )
    result = {
        "tools form": await clicks(page, "tools", calls, warmup),
        "raw request form": await clicks(page, "raw", calls, warmup),
        "engine call (no browser)": await engine_echo(calls, warmup),
    }
    engine = result["engine call (no browser)"]["median_ms"]
    for name in ("tools form", "raw request form"):
        result[name]["x_engine_median"] = result[name]["median_ms"] / engine
    return result


async def flood(page: Any, app: App, public_id: str, count: int) -> dict[str, Any]:
    """One flood of ``count``; the frames it adds are its request, the notifications and the response."""
    before = app.last_seq(public_id)
    total = before + count + 2
    pings: list[float] = []
    recorded: float | None = None
    stop = asyncio.Event()
    deadline = 20 + count / 5_000  # seconds: generous, a miss shows as FAIL, not as a hang

    cpu_recorded: float | None = None

    async def poll_db() -> None:
        nonlocal recorded, cpu_recorded
        while not stop.is_set() and recorded is None:
            if await asyncio.to_thread(app.frames, public_id, before) >= count + 2:
                recorded = time.perf_counter() - started
                cpu_recorded = app.cpu_seconds() - cpu_started
            await asyncio.sleep(0.02)

    profiler = _profile(app, count)
    await page.evaluate(FLOOD_JS, {"count": count, "total": total})
    started, cpu_started = time.perf_counter(), app.cpu_seconds()
    poller = asyncio.ensure_future(poll_db())
    state: dict[str, Any] = {}
    shown_at: float | None = None
    try:
        while time.perf_counter() - started < deadline:
            t = time.perf_counter()
            state = await page.evaluate(FLOOD_STATE_JS)
            pings.append((time.perf_counter() - t) * 1000)
            now = time.perf_counter()
            if state["result"] is not None and state["lastRow"] is not None and recorded is not None:
                shown_at = shown_at or now
                if state["counted"] is not None or now - shown_at > COUNT_GRACE_S:
                    break
            await asyncio.sleep(max(0.0, 0.05 - (time.perf_counter() - t)))
    finally:
        stop.set()
        await poller
        await page.evaluate(FLOOD_STOP_JS)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait()
    notifications = app.frames(public_id, before, "notifications/message")
    stored = app.frames(public_id, before)
    seconds = lambda ms: None if ms is None else ms / 1000  # noqa: E731
    return {
        "count": count,
        "stored_notifications": notifications,
        "stored_frames": stored,
        "expected_frames": count + 2,
        "lost": count - notifications,
        "recorded_s": recorded,
        "app_cpu_us_per_frame": None if cpu_recorded is None else cpu_recorded * 1e6 / (count + 2),
        "result_shown_s": seconds(state.get("result")),
        "last_row_shown_s": seconds(state.get("lastRow")),
        "count_shown_s": seconds(state.get("counted")),
        "max_answer_ms": max(pings) if pings else None,
        "answers": len(pings),
        "max_event_loop_lag_ms": state.get("maxLag"),
        "max_long_task_ms": state.get("maxLong"),
    }


def _profile(app: App, count: int) -> subprocess.Popen[bytes] | None:
    """py-spy (``--gil``) on the app through a flood of at least ``BENCH_PROFILE_FLOOD`` frames, when
    that variable is set; the profile goes to ``BENCH_PROFILE_OUT`` (default ``/tmp/flood.svg``)."""
    least = os.environ.get("BENCH_PROFILE_FLOOD")
    if not least or count < int(least):
        return None
    out = os.environ.get("BENCH_PROFILE_OUT", "/tmp/flood.svg")
    spy = Path(sys.executable).with_name("py-spy")
    fmt = "speedscope" if out.endswith(".json") else "flamegraph"
    command = [str(spy), "record", "--gil", "-r", "250", "-p", str(app.proc.pid), "-o", out, "-f", fmt]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def floods(context: Any, app: App, sizes: tuple[int, ...]) -> tuple[dict[str, Any], str]:
    page = await context.new_page()
    public_id = await connect(page, app, " ".join(servers.bad_stdio("flood")))
    # Until htmx has taken the raw request form, a click submits it natively (a navigation).
    await page.wait_for_function(
        "() => { const f = document.querySelector('.raw-request form');"
        " return !!f && f['htmx-internal-data'] !== undefined; }"
    )
    # The Tools panel lists the tools as it opens: those frames are not the flood's.
    await page.get_by_role("button", name="List tools again").wait_for()
    return {f"{n:,}": await flood(page, app, public_id, n) for n in sizes}, public_id


async def big_pages(context: Any, app: App, public_id: str, repeat: int = 3) -> dict[str, Any]:
    """Server-side pages over the flooded session (100,000+ frames): median ms each, against the
    session page itself (the baseline, measured in the same run), and the exports' throughput."""
    paths = {
        "session page (baseline)": f"/s/{public_id}/",
        "Conformance tab": f"/s/{public_id}/panel/conformance",
        "timeline filtered by rule": f"/s/{public_id}/timeline?rule=unknown-id",
        "message flow, newest window": f"/s/{public_id}/flow",
        "message flow, a window in the middle": f"/s/{public_id}/flow?before=50000",
        "search method:notifications/": "/search?q=method%3Anotifications%2F",
        "search, free words": "/search?q=%22i%22%3A99999",
        "export JSON Lines": f"/s/{public_id}/export",
        "export HTML": f"/s/{public_id}/export.html",
    }
    frames = app.last_seq(public_id)
    out: dict[str, Any] = {}
    for name, path in paths.items():
        samples, size = [], 0
        for _ in range(repeat):
            started = time.perf_counter()
            response = await context.request.get(app.base + path, timeout=120_000)
            body = await response.body()
            samples.append((time.perf_counter() - started) * 1000)
            size = len(body)
            if response.status != 200:
                raise RuntimeError(f"GET {path} answered {response.status}")
        samples.sort()
        out[name] = {"median_ms": samples[len(samples) // 2], "bytes": size, "frames": frames}
    base = out["session page (baseline)"]["median_ms"]
    for row in out.values():
        row["x_baseline"] = row["median_ms"] / base
        row["mb_per_s"] = row["bytes"] / 1e6 / (row["median_ms"] / 1000) if row["median_ms"] else None
    return out


async def lifecycle(browser: Any, context: Any, app: App, idle_app: App) -> dict[str, Any]:
    """Server processes after tabs close, on Disconnect, on the idle timeout and when the app stops."""
    needle = str(servers.BAD_STDIO)
    command = " ".join(servers.bad_stdio("hang"))
    out: dict[str, Any] = {}

    # A session whose tab closes keeps its server while the idle timeout (900 s here) has not passed ...
    page = await context.new_page()
    known = server_processes(app.proc.pid, needle)
    public_id = await connect(page, app, command)
    procs = server_processes(app.proc.pid, needle) - known
    await page.close()
    await asyncio.sleep(1.0)  # the tab's websocket is gone; the session must not be
    kept = len(procs) == 1 and alive(procs) == procs
    out["kept after tab closed"] = {"pass": kept, "processes": len(procs)}

    # ... until Disconnect, from a tab opened again.
    page = await context.new_page()
    await page.goto(f"{app.base}/s/{public_id}/")
    await page.get_by_role("button", name="Disconnect").click()
    took = await gone_within(procs, 10)
    out["ended by Disconnect"] = {"pass": bool(procs) and took is not None, "seconds": took}
    await page.close()

    # INSPECTOR_IDLE_TIMEOUT: a session with no tab open ends, and its process with it.
    idle_context = await logged_in(browser, idle_app)
    page = await idle_context.new_page()
    await connect(page, idle_app, command)
    procs = server_processes(idle_app.proc.pid, needle)
    await idle_context.close()
    closed = time.perf_counter()
    await asyncio.sleep(0.5)
    kept = alive(procs) == procs
    took = await gone_within(procs, IDLE_TIMEOUT_S + 8)
    out[f"ended by idle timeout ({IDLE_TIMEOUT_S} s)"] = {
        "pass": bool(procs) and kept and took is not None,
        "alive_0.5s_after_close": kept,
        "seconds": None if took is None else time.perf_counter() - closed,
    }
    idle_app.stop()
    return out


async def stop_app(app: App) -> dict[str, Any]:
    """SIGTERM the app while its sessions (and tabs) are open: no server process may remain."""
    procs = server_processes(app.proc.pid, str(servers.BAD_STDIO)) | server_processes(
        app.proc.pid, str(servers.EVERYTHING_JS)
    )
    exit_s = await asyncio.to_thread(app.stop)
    took = await gone_within(procs, 5)
    return {
        "pass": bool(procs) and took is not None,
        "processes": len(procs),
        "left": len(alive(procs)),
        "app_exit_s": exit_s,
        "exit_code": app.proc.returncode,
    }


async def run(calls: int = 30, warmup: int = 5, sizes: tuple[int, ...] = FLOOD_SIZES) -> dict[str, Any]:
    step = lambda what: print(f"  … browser: {what}", file=sys.stderr, flush=True)  # noqa: E731
    app = App()
    idle_app = App({"INSPECTOR_IDLE_TIMEOUT": str(IDLE_TIMEOUT_S)})
    results: dict[str, Any] = {}
    try:
        await asyncio.gather(app.ready(), idle_app.ready())
        async with chromium() as browser:
            context = await logged_in(browser, app)
            step(f"click → echo result, {warmup}+{calls} clicks per form")
            results["click"] = await echo_latency(browser, context, app, calls, warmup)
            step(f"notification floods of {', '.join(f'{n:,}' for n in sizes)}")
            results["flood"], flooded = await floods(context, app, sizes)
            step("server-side pages over the flooded session")
            results["pages"] = await big_pages(context, app, flooded)
            step("server processes after closing tabs")
            results["lifecycle"] = await lifecycle(browser, context, app, idle_app)
            step("stopping the app (SIGTERM) with sessions open")
            results["lifecycle"]["none left after SIGTERM"] = await stop_app(app)
        stuck = app.stuck + idle_app.stuck
        results["lifecycle"]["page shows ready after Connect"] = {
            "pass": not stuck,
            "connects": app.connects + idle_app.connects,
            "stuck": len(stuck),
            "stuck_at": sorted(set(stuck)),
        }
    except BaseException:
        print(f"  browser: app logs kept in {app.dir} and {idle_app.dir}", file=sys.stderr)
        raise
    else:
        for a in (app, idle_app):
            shutil.rmtree(a.dir, ignore_errors=True)
    finally:
        for a in (app, idle_app):
            if a.proc.poll() is None:
                a.stop()
    return results


# --- verdicts and table ------------------------------------------------------------------------------


def judge(results: dict[str, Any]) -> bool:
    ok = True
    tools = results["click"]["tools form"]
    tools["pass"] = tools["median_ms"] < CLICK_TARGET_MS
    ok &= tools["pass"]
    biggest = max(row["count"] for row in results["flood"].values())
    for row in results["flood"].values():
        times = [row["recorded_s"], row["result_shown_s"], row["last_row_shown_s"], row["count_shown_s"]]
        row["done_s"] = None if None in times else max(times)
        row["pass"] = (
            row["lost"] == 0
            and row["stored_frames"] == row["expected_frames"]
            and row["done_s"] is not None
            and (row["count"] < biggest or row["done_s"] <= FLOOD_TARGET_S)
            and row["max_answer_ms"] is not None
            and row["max_answer_ms"] <= ANSWER_TARGET_MS
        )
        ok &= row["pass"]
        if row["count"] == biggest:  # recording through the app, with a viewer: the biggest flood's rate
            rate = row["stored_frames"] / row["recorded_s"] if row["recorded_s"] else 0.0
            row["record_per_s"] = rate
            row["record_pass"] = row["lost"] == 0 and rate >= RECORD_TARGET
            ok &= row["record_pass"]
    for name, row in results.get("pages", {}).items():
        target = FLOW_TARGET_MS if name.startswith("message flow") else PAGE_TARGET_MS
        row["pass"] = name.startswith("export") or row["median_ms"] <= target
        ok &= row["pass"]
    for row in results["lifecycle"].values():
        ok &= row["pass"]
    results["pass"] = ok
    return ok


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.2f}"


def print_table(results: dict[str, Any]) -> None:
    click = results["click"]
    print(
        "\n4. browser: click → rendered echo result, server-everything over stdio, in-page performance.now()"
        f"\n   (ms; target: tools form median < {CLICK_TARGET_MS:g}; against the peers, in the same run: 13.)"
    )
    print(f"   {'path':<26}{'median':>9}{'p95':>9}{'×engine':>9}{'n':>5}  verdict")
    for name, row in click.items():
        ratio = f"{row['x_engine_median']:>9.1f}" if "x_engine_median" in row else " " * 9
        verdict = "" if "pass" not in row else ("PASS" if row["pass"] else "FAIL")
        figures = f"{row['median_ms']:>9.2f}{row['p95_ms']:>9.2f}{ratio}{row['samples']:>5}"
        print(f"     {name:<24}{figures}  {verdict}")
    print(
        f"\n5. browser: notification flood, bad_stdio over stdio (s from the click; target: none lost, "
        f"largest recorded and shown ≤ {FLOOD_TARGET_S:g} s, page answers ≤ {ANSWER_TARGET_MS:g} ms)"
    )
    print(
        f"   {'N':>9}{'lost':>6}{'in DB':>8}{'result':>8}{'last row':>9}{'count':>8}"
        f"{'answer ms':>10}{'lag ms':>8}{'longtask':>9}  verdict"
    )
    for row in results["flood"].values():
        print(
            f"   {row['count']:>9,}{row['lost']:>6}{_s(row['recorded_s']):>8}{_s(row['result_shown_s']):>8}"
            f"{_s(row['last_row_shown_s']):>9}{_s(row['count_shown_s']):>8}{row['max_answer_ms'] or 0:>10.1f}"
            f"{row['max_event_loop_lag_ms'] or 0:>8.1f}{row['max_long_task_ms'] or 0:>9.1f}  "
            f"{'PASS' if row['pass'] else 'FAIL'}"
        )
    for row in results["flood"].values():
        if "record_per_s" in row:
            verdict = "PASS" if row["record_pass"] else "FAIL"
            cpu = row.get("app_cpu_us_per_frame")
            print(
                f"   recording through the app with a tab watching: {row['record_per_s']:,.0f} frames/s "
                f"(target ≥ {RECORD_TARGET:,}, none lost)  {verdict}"
                + ("" if cpu is None else f"; the app's CPU {cpu:.1f} µs a frame")
            )
    print(
        "   (count: when #frame-count reached the total; 'never' = not within "
        f"{COUNT_GRACE_S:g} s after the result and last row showed)"
    )
    pages = results.get("pages", {})
    if pages:
        frames = next(iter(pages.values()))["frames"]
        print(
            f"\n6. server-side pages over the flooded session ({frames:,} frames; median of 3; "
            f"target ≤ {PAGE_TARGET_MS:g} ms each, the message flow ≤ {FLOW_TARGET_MS:g} ms; "
            "exports are throughput, not judged)"
        )
        print(f"   {'page':<32}{'ms':>9}{'×baseline':>11}{'MB':>8}{'MB/s':>8}  verdict")
        for name, row in pages.items():
            verdict = "PASS" if row["pass"] else "FAIL"
            print(
                f"     {name:<30}{row['median_ms']:>9.1f}{row['x_baseline']:>11.2f}"
                f"{row['bytes'] / 1e6:>8.2f}{row['mb_per_s'] or 0:>8.1f}  {verdict}"
            )
    print("\n7. browser: session pages and server processes (found in /proc among the app's descendants)")
    for name, row in results["lifecycle"].items():
        detail = ", ".join(
            f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items() if k != "pass"
        )
        print(f"     {name:<36}{'PASS' if row['pass'] else 'FAIL'}  ({detail})")
