"""Many viewers of one session under a flood: live sockets without a browser, every row to every viewer.

.venv/bin/python -m bench.viewers [--viewers 1,50,200] [--notifications 10000]

A real ``mcp-inspector --no-browser`` (``bench.apps.App``); a person logs in (``bench.apps.Person``) and
connects to ``tests/servers/bad_stdio.py flood`` over stdio. For each number of viewers, that many
websockets (the ``websockets`` package; the session cookie and the page's Origin, as a tab sends them)
open the session's live socket (``/ws/sessions/<id>/``, from the frame the page would have shown
last), the app is let settle (their arrival makes every other viewer answer), and one ``tools/call``
posted through the raw request form makes the server send ``--notifications`` notifications.

- **Every row to every viewer within 2 s of being stored.** A thread polls the app's database
  (read-only, every 5 ms) for the session's newest frame number, keeping when each was first seen
  stored. Each viewer keeps when it first received each newest row: rows carry ``id="f-<seq>"``,
  and a viewer counts a row as received once a message has held it or a newer one, since in a flood
  the app sends a replaced page of the newest rows instead of every row (a person's tab shows the
  newest). A row's delay is its first arrival at a viewer minus the moment it was seen stored; the
  worst over every row and every viewer is judged, and every viewer must receive the last row.
- **The app's CPU per frame** (``/proc/<pid>/stat``, every thread, not its children) from the click
  until every viewer has the last row, over the frames the flood added; with 1, 50 and 200 viewers.
  Target: it grows less than linearly with the viewers: from each count to the next, by a smaller
  factor than the viewers did. The CPU a frame of each added viewer is shown beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import re
import shutil
import sqlite3
import sys
import threading
import time
from typing import Any

from bench import servers
from bench.apps import App, Person

DELAY_TARGET_S = 2.0  # a stored row reaches every viewer within this
VIEWER_COUNTS = (1, 50, 200)
ROW = re.compile(r'id="f-(\d+)"')
POLL_S = 0.005
CATCH_UP_S = 180.0  # after the flood is stored, how long the viewers may take to get its last row


class Viewer:
    """One live socket; when it first held each newest row (``id="f-<seq>"``) in a message."""

    def __init__(self) -> None:
        self.best = 0
        self.times: list[float] = []  # perf_counter when ...
        self.seqs: list[int] = []  # ... it first held this newest row, rising
        self.messages = 0
        self.socket: Any = None
        self.task: asyncio.Task[None] | None = None

    async def read(self) -> None:
        with contextlib.suppress(Exception):  # closed by us at the end, or by the app
            async for message in self.socket:
                self.messages += 1
                found = ROW.findall(message if isinstance(message, str) else message.decode())
                if found and (top := max(map(int, found))) > self.best:
                    self.best = top
                    self.times.append(time.perf_counter())
                    self.seqs.append(top)

    def arrival(self, seq: int) -> float | None:
        """When this viewer first held row ``seq`` or a newer one."""
        i = bisect.bisect_left(self.seqs, seq)
        return self.times[i] if i < len(self.times) else None


class StoredWatch:
    """A thread polling the app's database for the session's newest frame: (perf_counter, seq), rising."""

    def __init__(self, app: App, public_id: str) -> None:
        self.db = sqlite3.connect(
            f"file:{app.dir / 'inspector.sqlite3'}?mode=ro", uri=True, check_same_thread=False
        )
        sql = "SELECT id FROM mcp_sessions_mcpsession WHERE public_id = ?"
        self.session_id = self.db.execute(sql, [public_id.replace("-", "")]).fetchone()[0]
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def newest(self) -> int:
        sql = "SELECT max(seq) FROM mcp_sessions_timelineframe WHERE session_id = ?"
        return int(self.db.execute(sql, [self.session_id]).fetchone()[0] or 0)

    def _poll(self) -> None:
        last = -1
        while not self.stop.is_set():
            seq = self.newest()
            if seq > last:
                self.samples.append((time.perf_counter(), seq))
                last = seq
            time.sleep(POLL_S)

    def __enter__(self) -> StoredWatch:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.db.close()


async def open_viewers(app: App, person: Person, public_id: str, count: int, after: int) -> list[Viewer]:
    from websockets.asyncio.client import connect

    cookie = "; ".join(f"{name}={value}" for name, value in person.http.cookies.items())
    url = f"{app.base.replace('http://', 'ws://')}/ws/sessions/{public_id}/?after={after}&first=1"
    viewers = [Viewer() for _ in range(count)]

    async def one(viewer: Viewer) -> None:
        viewer.socket = await connect(
            url,
            origin=app.base,  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
            max_size=None,
            ping_interval=None,
            open_timeout=60,
        )
        viewer.task = asyncio.ensure_future(viewer.read())

    for start in range(0, count, 25):  # as tabs open: a few at a time, not all in one instant
        await asyncio.gather(*(one(v) for v in viewers[start : start + 25]))
    return viewers


async def close_viewers(viewers: list[Viewer]) -> None:
    await asyncio.gather(*(v.socket.close() for v in viewers if v.socket is not None), return_exceptions=True)
    await asyncio.gather(*(v.task for v in viewers if v.task is not None), return_exceptions=True)


async def settle(app: App, window: float = 0.25, share: float = 0.1, limit: float = 30) -> float:
    """Wait until the app uses under ``share`` of a core over ``window``; its last share of a core."""
    deadline = time.monotonic() + limit
    while True:
        before = app.cpu_seconds()
        await asyncio.sleep(window)
        used = (app.cpu_seconds() - before) / window
        if used < share or time.monotonic() > deadline:
            return used


def delays(stored: list[tuple[float, int]], viewers: list[Viewer], after: int) -> dict[str, Any]:
    """Every stored row's delay to every viewer. The rows first seen stored at one moment count from it,
    and the newest of them arrives last, so it decides that moment's delay."""
    worst_each: list[float] = []
    missing = 0
    for viewer in viewers:
        worst: float | None = 0.0
        for moment, seq in stored:
            arrived = viewer.arrival(seq) if seq > after else moment
            worst = None if arrived is None or worst is None else max(worst, arrived - moment)
        if worst is None:
            missing += 1
        else:
            worst_each.append(worst)
    worst_each.sort()
    return {
        "viewers_missing_rows": missing,
        "worst_delay_s": None if missing or not worst_each else worst_each[-1],
        "median_viewer_worst_s": worst_each[len(worst_each) // 2] if worst_each else None,
    }


def _alive(app: App) -> None:
    if app.proc.poll() is not None:
        code = app.proc.returncode
        why = f"signal {-code}" if code < 0 else f"status {code}"
        raise RuntimeError(f"the app died ({why}); its log: {app.dir / 'app.log'}")


async def flood(app: App, person: Person, public_id: str, viewers_count: int, count: int) -> dict[str, Any]:
    with StoredWatch(app, public_id) as watch:
        after = watch.newest()
        viewers = await open_viewers(app, person, public_id, viewers_count, after)
        try:
            idle_share = await settle(app)
            params = json.dumps({"name": "t", "arguments": {"count": count}})
            ours0, cpu0, t0 = time.process_time(), app.cpu_seconds(), time.perf_counter()
            answer = await person.http.post(
                f"/s/{public_id}/request",
                data={"method": "tools/call", "params": params},
                headers=person._headers(),
                timeout=300,
            )
            if answer.status_code != 200:  # a card, finished or (a slow call) running, finished live
                raise RuntimeError(f"the flood's request answered {answer.status_code}: {answer.text[:300]}")
            # The answer comes with the result, maybe before the recorder has stored every frame: the
            # flood is done once its request, notifications and response are all in the database.
            deadline = time.perf_counter() + 300
            while (final := watch.newest()) < after + count + 2 and time.perf_counter() < deadline:
                _alive(app)
                await asyncio.sleep(POLL_S)
            # Late is judged from the arrivals; waiting on lets the CPU figure cover all the work.
            deadline = time.perf_counter() + CATCH_UP_S
            while min(v.best for v in viewers) < final and time.perf_counter() < deadline:
                _alive(app)
                await asyncio.sleep(0.01)
            _alive(app)
            cpu1, ours1, t1 = app.cpu_seconds(), time.process_time(), time.perf_counter()
        finally:
            await close_viewers(viewers)
        stored = list(watch.samples)
    frames = final - after
    caught_up = all(v.best >= final for v in viewers)
    return {
        "viewers": viewers_count,
        "notifications": count,
        "frames": frames,
        "seconds": t1 - t0,
        # Only when every viewer got the last row: cut short, it would leave work out.
        "app_cpu_us_per_frame": (cpu1 - cpu0) * 1e6 / frames if caught_up else None,
        "bench_cpu_share": (ours1 - ours0) / (t1 - t0),
        "idle_app_core_share": idle_share,
        "messages_per_viewer": sum(v.messages for v in viewers) / len(viewers),
        "viewers_with_last_row": sum(v.best >= final for v in viewers),
        **delays(stored, viewers, after),
    }


async def run(counts: tuple[int, ...] = VIEWER_COUNTS, notifications: int = 10_000) -> dict[str, Any]:
    step = lambda what: print(f"  … viewers: {what}", file=sys.stderr, flush=True)  # noqa: E731
    app = App()
    out: dict[str, Any] = {}
    try:
        await app.ready()
        async with Person(app) as person:
            public_id, _ = await person.connect(servers.bad_stdio("flood"))
            for n in counts:
                step(f"{n} live sockets, a flood of {notifications:,}")
                try:
                    out[str(n)] = await flood(app, person, public_id, n, notifications)
                except Exception as exc:  # that count fails with the reason; the bench goes on
                    out[str(n)] = {"viewers": n, "notifications": notifications, "error": f"{exc}"}
                    if app.proc.poll() is not None:
                        break
                await settle(app)  # the leaving viewers' goodbyes, before the next count's clock
    finally:
        if app.proc.poll() is None:
            app.stop()
        if len(out) == len(counts) and not any("error" in row for row in out.values()):
            shutil.rmtree(app.dir, ignore_errors=True)
        else:
            print(f"  viewers: app logs kept in {app.dir}", file=sys.stderr)
    return {"floods": out}


def judge(results: dict[str, Any]) -> bool:
    ok = True
    floods = results["floods"]
    for row in floods.values():
        row["pass"] = (
            "error" not in row
            and row["viewers_missing_rows"] == 0
            and row["viewers_with_last_row"] == row["viewers"]
            and row["worst_delay_s"] is not None
            and row["worst_delay_s"] <= DELAY_TARGET_S
        )
        ok &= row["pass"]
    counts = sorted(int(n) for n in floods)
    cpu = {n: floods[str(n)].get("app_cpu_us_per_frame") for n in counts}
    steps = []
    for low, high in zip(counts, counts[1:], strict=False):
        step: dict[str, Any] = {"from": low, "to": high, "viewers_x": high / low}
        if cpu[low] is None or cpu[high] is None:
            step.update(cpu_x=None, us_per_added_viewer=None, passed=False)
        else:
            per_viewer = (cpu[high] - cpu[low]) / (high - low)
            step.update(cpu_x=cpu[high] / cpu[low], us_per_added_viewer=per_viewer)
            step["passed"] = step["cpu_x"] < step["viewers_x"]
        steps.append(step)
        ok &= step["passed"]
    results["growth"] = steps
    results["pass"] = ok
    return ok


def print_table(results: dict[str, Any]) -> None:
    floods = results["floods"]
    n = next(iter(floods.values()))["notifications"]
    print(
        f"\n14. viewers: live sockets (no browser) on one session, a flood of {n:,} notifications "
        f"(target: every row to every viewer within {DELAY_TARGET_S:g} s of being stored)"
    )
    print(
        f"   {'viewers':>8}{'worst s':>9}{'median s':>10}{'got last':>10}{'msgs each':>11}"
        f"{'µs/frame':>10}{'bench cpu':>11}  verdict"
    )
    for row in floods.values():
        if "error" in row:
            print(f"   {row['viewers']:>8}  {row['error']}  FAIL")
            continue
        worst = "never" if row["worst_delay_s"] is None else f"{row['worst_delay_s']:.2f}"
        median = "—" if row["median_viewer_worst_s"] is None else f"{row['median_viewer_worst_s']:.2f}"
        cpu = "—" if row["app_cpu_us_per_frame"] is None else f"{row['app_cpu_us_per_frame']:.1f}"
        print(
            f"   {row['viewers']:>8}{worst:>9}{median:>10}{row['viewers_with_last_row']:>10}"
            f"{row['messages_per_viewer']:>11.0f}{cpu:>10}"
            f"{row['bench_cpu_share']:>10.0%}  {'PASS' if row['pass'] else 'FAIL'}"
        )
    for step in results.get("growth", []):
        verdict = "PASS" if step["passed"] else "FAIL"
        span = f"{step['from']} → {step['to']} viewers (×{step['viewers_x']:g})"
        if step["cpu_x"] is None:
            print(f"   the app's CPU a frame, {span}: not measured (a viewer never caught up)  {verdict}")
        else:
            added = step["us_per_added_viewer"]
            print(
                f"   the app's CPU a frame, {span}: ×{step['cpu_x']:.2f}, {added:.2f} µs a frame for each"
                f" added viewer (target: less than linear, × below the viewers')  {verdict}"
            )
    print(
        "   (worst: the latest any row reached any viewer after it was stored; median: of the viewers'"
        " worst; bench cpu: the viewers' own process, a share of one core)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.viewers", description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", default=",".join(map(str, VIEWER_COUNTS)), help="viewer counts")
    parser.add_argument("--notifications", type=int, default=10_000, help="size of each flood")
    args = parser.parse_args()
    counts = tuple(int(n) for n in args.viewers.split(","))
    results = asyncio.run(run(counts, args.notifications))
    ok = judge(results)
    print_table(results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
