"""The web app as people use it, without a browser: its CPU per tool call, connecting, stopping.

1. **the app's CPU per tool call**: a real ``mcp-inspector`` (the ``App`` below) and ``tools/call echo``
   sent from its Tools form as the page sends it, over the session's live socket (the consumer, the
   runtime, the recorder, the call card, the rows pushed), server-everything over stdio; the app
   process's CPU time (``/proc/<pid>/stat``, every thread) across the calls, divided by their number.
   Target ≤ 5 ms. The same form posted over HTTP (what the page does while its socket is not open:
   login, CSRF, the view) takes turns with it, in blocks, and is shown.
2. **connect → ready**: the connect form posted to a freshly started app, until its database says
   ``ready`` (the first connect of an app run, then a second one). Shown; the click → connected a
   person sees is compared with the peers' in the same run by ``bench/peers.py``.
3. **stopping with live sessions**: ``bench/stopping.py`` in a process of its own.

The CLI is timed against the official CLI by ``bench/peers.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx

from bench import servers

APP_BIN = Path(sys.executable).with_name("mcp-inspector")
CPU_TARGET_MS = 5.0  # the app's CPU per tool call through the web path, at most
STOP_TARGET_S = 3.0  # stopping with 1,000 live sessions, at most
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class App:
    """One running ``mcp-inspector --no-browser`` with its own data directory, token and port."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-browser-"))
        self.token = secrets.token_urlsafe(16)
        self.port = servers.free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = open(self.dir / "app.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(APP_BIN), "--no-browser", "--port", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={
                **os.environ,
                "INSPECTOR_DATA_DIR": str(self.dir),
                "INSPECTOR_TOKEN": self.token,
                **(env or {}),
            },
        )
        self._db: sqlite3.Connection | None = None
        self.connects = 0  # sessions connected through the UI
        self.stuck: list[str] = []  # the state shown by pages that did not reach "ready" by themselves

    def cpu_seconds(self) -> float:
        """CPU time the app process has used so far (user + system, every thread; not its children)."""
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    async def ready(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mcp-inspector did not start; see {self.dir / 'app.log'}")
            await asyncio.sleep(0.05)

    @property
    def login_url(self) -> str:
        return f"{self.base}/auth/token?token={self.token}"

    def db(self) -> sqlite3.Connection:
        if self._db is None:
            url = f"file:{self.dir / 'inspector.sqlite3'}?mode=ro"
            self._db = sqlite3.connect(url, uri=True, check_same_thread=False)
        return self._db

    def frames(self, public_id: str, after: int = 0, method: str | None = None) -> int:
        sql = (
            "SELECT count(*) FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s"
            " ON f.session_id = s.id WHERE s.public_id = ? AND f.seq > ?"
        )
        params: list[Any] = [public_id.replace("-", ""), after]
        if method is not None:
            sql += " AND f.method = ?"
            params.append(method)
        return int(self.db().execute(sql, params).fetchone()[0])

    def status(self, public_id: str) -> str:
        sql = "SELECT status FROM mcp_sessions_mcpsession WHERE public_id = ?"
        row = self.db().execute(sql, [public_id.replace("-", "")]).fetchone()
        return "" if row is None else str(row[0])

    def last_seq(self, public_id: str) -> int:
        sql = "SELECT last_seq FROM mcp_sessions_mcpsession WHERE public_id = ?"
        return int(self.db().execute(sql, [public_id.replace("-", "")]).fetchone()[0])

    def stop(self, timeout: float = 20) -> float:
        """SIGTERM, wait for the exit; return the seconds it took (SIGKILL after ``timeout``)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        started = time.perf_counter()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return time.perf_counter() - started


@contextlib.asynccontextmanager
async def running(label: str, env: dict[str, str] | None = None) -> AsyncIterator[App]:
    """An app started and ready; stopped at the end, its folder removed, or kept (and said) on an error."""
    app = App(env)
    try:
        await app.ready()
        yield app
    except BaseException:
        print(f"  {label}: app logs kept in {app.dir}", file=sys.stderr)
        app.stop()
        raise
    app.stop()
    shutil.rmtree(app.dir, ignore_errors=True)


# --- a person's browser, without the browser -----------------------------------------------------


class _FormFields(HTMLParser):
    """The fields a form sends by default (inputs, checked boxes, selected options, textareas)."""

    def __init__(self, action: str) -> None:
        super().__init__()
        self.action, self.inside = action, False
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("action") == self.action
        if not self.inside or not a.get("name") and tag != "option":
            return
        if tag == "input" and a.get("type") not in ("submit", "button"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.fields[a["name"]] = a.get("value", "on" if a.get("type") == "checkbox" else "")
        elif tag == "select":
            self._select = a["name"]
        elif tag == "option" and self._select is not None:
            if "selected" in a or self._select not in self.fields:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = a["name"]
            self.fields[a["name"]] = ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


class Person:
    """An HTTP client logged in to the app, posting its forms as htmx would (CSRF header, same origin)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.http = httpx.AsyncClient(base_url=app.base, timeout=30, headers={"Origin": app.base})

    async def __aenter__(self) -> Person:
        await self.http.get(self.app.login_url)  # a form the page's script posts, with a CSRF token
        answer = await self.post("/auth/token", {"token": self.app.token, "next": "/"})
        if answer.status_code != 302:
            raise RuntimeError(f"the token login answered {answer.status_code}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()

    def _headers(self) -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies.get("mcp_inspector_csrftoken") or "", "HX-Request": "true"}

    async def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        return await self.http.post(path, data=data, headers=self._headers())

    async def connect(self, argv: list[str]) -> tuple[str, float]:
        """Post the connect form; return the session's public id and ms until its database says ready."""
        page = await self.http.get("/")
        form = _FormFields("/connect")
        form.feed(page.text)
        fields = {**form.fields, "transport": "stdio", "command": " ".join(argv)}
        started = time.perf_counter()
        response = await self.post("/connect", fields)
        where = response.headers.get("HX-Redirect") or response.headers.get("Location") or ""
        location = response.headers.get("HX-Location", "")  # the session page put in place, as htmx does
        if location:
            where = str(json.loads(location).get("path", "")) if location.startswith("{") else location
        if not where.startswith("/s/"):
            raise RuntimeError(f"connect answered {response.status_code} {where}: {response.text[:500]}")
        public_id = where.rstrip("/").rsplit("/", 1)[-1]
        deadline = time.monotonic() + 30
        while (status := self.app.status(public_id)) != "ready":
            if status in ("failed", "closed") or time.monotonic() > deadline:
                raise RuntimeError(f"session {public_id} is {status}; see {self.app.dir / 'app.log'}")
            await asyncio.sleep(0.002)
        return public_id, (time.perf_counter() - started) * 1000


# --- the measures ----------------------------------------------------------------------------------


BLOCK = 20  # calls of one path in a row; the paths take turns, so the machine's moods fall on both


async def cpu_per_call(person: Person, calls: int, warmup: int) -> dict[str, Any]:
    """The app's CPU (and the wall time) per tools/call echo from the Tools form, as the page sends it
    (over its live socket) and as it is posted while the socket is not open, taking turns in blocks;
    the page's socket is open throughout, so both pay for what it is pushed."""
    from websockets.asyncio.client import connect

    app = person.app
    public_id, _ = await person.connect(servers.everything_stdio())
    listed = await person.post(f"/s/{public_id}/tools/list", {"page": "first"})
    listed.raise_for_status()
    cookie = "; ".join(f"{name}={value}" for name, value in person.http.cookies.items())
    url = f"{app.base.replace('http://', 'ws://')}/ws/sessions/{public_id}/"
    tag = secrets.token_hex(3)
    cpu = {"socket": 0.0, "post": 0.0}
    walls: dict[str, list[float]] = {"socket": [], "post": []}
    async with connect(url, origin=app.base, additional_headers={"Cookie": cookie}, max_size=None) as socket:  # type: ignore[arg-type]

        async def by_socket(text: str) -> None:
            form = {"action": "call", "name": "echo", "mode": "form", "arg.message": text, "HEADERS": {}}
            await socket.send(json.dumps(form))
            while f"Echo: {text}" not in str(await asyncio.wait_for(socket.recv(), 30)):
                pass

        async def by_post(text: str) -> None:
            answer = await person.post(
                f"/s/{public_id}/tools/call", {"name": "echo", "mode": "form", "arg.message": text}
            )
            if answer.status_code != 200 or f"Echo: {text}" not in answer.text:
                raise RuntimeError(f"tools/call answered {answer.status_code}: {answer.text[:500]}")

        for path, call in (("socket", by_socket), ("post", by_post)):
            for i in range(warmup):
                await call(f"warm {path} {i:05d} {tag}.")
        done = 0
        while done < calls:
            for path, call in (("socket", by_socket), ("post", by_post)):
                before = app.cpu_seconds()
                for i in range(done, min(done + BLOCK, calls)):
                    started = time.perf_counter()
                    await call(f"call {path} {i:05d} {tag}.")
                    walls[path].append((time.perf_counter() - started) * 1000)
                cpu[path] += app.cpu_seconds() - before
            done += BLOCK
    per_call = {path: cpu[path] * 1000 / len(walls[path]) for path in cpu}
    return {
        "calls": calls,
        "cpu_ms_per_call": per_call["socket"],
        "wall_median_ms": statistics.median(walls["socket"]),
        "post_cpu_ms_per_call": per_call["post"],
        "post_wall_median_ms": statistics.median(walls["post"]),
        "x_target": per_call["socket"] / CPU_TARGET_MS,
    }


async def connect_times(person: Person) -> dict[str, Any]:
    """Connect → ready, the first connect of a freshly started app and the next one."""
    _, first = await person.connect(servers.everything_stdio())
    _, second = await person.connect(servers.everything_stdio())
    return {"first_ms": first, "second_ms": second}


def stopping(sessions: int) -> dict[str, Any]:
    """``bench/stopping.py`` in a process of its own (it sets Django up)."""
    return servers.child_json("bench.stopping", "--sessions", str(sessions))


async def run(calls: int = 200, warmup: int = 20, stop_sessions: int = 1000) -> dict[str, Any]:
    step = lambda what: print(f"  … app: {what}", file=sys.stderr, flush=True)  # noqa: E731
    results: dict[str, Any] = {}
    async with running("app") as app, Person(app) as person:
        step("connect → ready, in a freshly started app")
        results["connect"] = await connect_times(person)
        step(f"the app's CPU per tools/call, {warmup}+{calls} calls through the Tools form, each way")
        results["cpu"] = await cpu_per_call(person, calls, warmup)
    step(f"stopping with {stop_sessions:,} live sessions")
    results["stop"] = await asyncio.to_thread(stopping, stop_sessions)
    return results


def judge(results: dict[str, Any]) -> bool:
    cpu, stop = results["cpu"], results["stop"]
    cpu["pass"] = cpu["cpu_ms_per_call"] <= CPU_TARGET_MS
    stop["pass"] = stop["lost"] == 0 and stop["stop_s"] < STOP_TARGET_S
    ok = cpu["pass"] and stop["pass"]
    results["pass"] = ok
    return ok


def print_table(results: dict[str, Any]) -> None:
    v = lambda row: "PASS" if row["pass"] else "FAIL"  # noqa: E731
    cpu, connect, stop = results["cpu"], results["connect"], results["stop"]
    print("\n8. the app without a browser (server-everything over stdio unless said)")
    print(f"   {'measure':<52}{'value':>10}{'ratio':>9}  verdict")
    print(
        f"     {f'app CPU per tools/call, ms (×{CPU_TARGET_MS:g} ms target)':<50}"
        f"{cpu['cpu_ms_per_call']:>10.2f}{cpu['x_target']:>9.2f}  {v(cpu)}"
    )
    print(f"     {'  wall time per tools/call, median ms':<50}{cpu['wall_median_ms']:>10.2f}")
    posted = "  the same posted (no socket open), CPU ms"
    print(f"     {posted:<50}{cpu['post_cpu_ms_per_call']:>10.2f}")
    print(f"     {'    wall time per tools/call POST, median ms':<50}{cpu['post_wall_median_ms']:>10.2f}")
    print(f"     {'connect → ready, first of an app run, ms':<50}{connect['first_ms']:>10.0f}")
    print(f"     {'  connect → ready, the next one, ms':<50}{connect['second_ms']:>10.0f}")
    label = f"stop with {stop['sessions']:,} live HTTP sessions, s (×{STOP_TARGET_S:g} s)"
    print(f"     {label:<50}{stop['stop_s']:>10.2f}{stop['stop_s'] / STOP_TARGET_S:>9.2f}  {v(stop)}")
    print(
        f"   (targets: CPU ≤ {CPU_TARGET_MS:g} ms; stop < {STOP_TARGET_S:g} s, none lost; connecting and the"
        " CLI against the peers, in the same run: 13.)"
    )
