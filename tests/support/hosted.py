"""The hosted set-up as the hosted tests run it (their fixtures are in tests/hosted/conftest.py): PostgreSQL
and Redis, `manage.py`, engine workers and web processes, and a tab's live socket read by a thread."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx

from support.databases import migrations_digest, once
from support.paths import REPO
from support.processes import free_port, start_http_server

REDIS = ("127.0.0.1", 6379)
POSTGRES = ("127.0.0.1", 5432)


def reachable(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=1):
            return True
    except OSError:
        return False


def hosted_env(
    db_name: str, redis_db: int, *, redis: tuple[str, int] = REDIS, **extra: str
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DB="postgres",
        DB_NAME=db_name,
        DB_USER="postgres",
        DB_HOST=POSTGRES[0],
        DB_PORT=str(POSTGRES[1]),
        REDIS_URL=f"redis://{redis[0]}:{redis[1]}/{redis_db}",
        **extra,
    )
    return env


ADMIN = ["psql", "-h", POSTGRES[0], "-U", "postgres", "-q", "-c"]


def _admin(sql: str, check: bool = True) -> str:
    run = subprocess.run([*ADMIN, sql], check=check, timeout=60, capture_output=True, text=True)
    return run.stdout


def _migrated_template() -> str:
    """A database migrated once per set of migrations (``support.databases``), copied for each test."""
    name = f"mcp_hosted_template_{migrations_digest()}"

    def exists() -> bool:
        return bool(psql("postgres", f"SELECT 1 FROM pg_database WHERE datname = '{name}'"))

    def make() -> None:
        stale = "SELECT datname FROM pg_database WHERE datname LIKE 'mcp_hosted_template_%'"
        for [old] in psql("postgres", stale):
            _admin(f"DROP DATABASE IF EXISTS {old} WITH (FORCE)", check=False)
        building = f"{name}_building"
        _admin(f"CREATE DATABASE {building}")
        migrate(hosted_env(building, 0))
        # The rename is what makes it visible: a half-built template is never copied.
        _admin(f"ALTER DATABASE {building} RENAME TO {name}")

    once(name, exists, make)
    return name


@contextlib.contextmanager
def new_database(*, migrated: bool = True) -> Iterator[str]:
    """A PostgreSQL database of the test's own, dropped after: migrated, or empty when a test runs the
    deployment's own ``manage.py migrate``."""
    name = f"mcp_hosted_{uuid.uuid4().hex[:8]}"
    template = f" TEMPLATE {_migrated_template()}" if migrated else ""
    _admin(f"CREATE DATABASE {name}{template}")
    try:
        yield name
    finally:
        _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)", check=False)


def migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=REPO, env=env, check=True, timeout=120
    )


class RedisServer:
    """A Redis of a test's own on a free port, with nothing saved: stopped and started again on the same
    port, it comes back empty, as a restarted Redis without persistence does."""

    def __init__(self) -> None:
        self.address = ("127.0.0.1", free_port())
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.address[1]), "--bind", "127.0.0.1", "--save", ""]
        self.process = subprocess.Popen(
            [*argv, "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while not self.answers():
            assert self.process.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not answer within 30 s"
            time.sleep(0.05)

    def answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except Exception:  # redis-py's ConnectionError while it starts
            return False

    def client(self) -> Any:
        import redis

        return redis.Redis(*self.address, socket_timeout=5)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None


@contextlib.contextmanager
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def prepare(env: dict[str, str], redis_db: int) -> None:
    """Empty the test's Redis database (its PostgreSQL database comes migrated: ``new_database``)."""
    flush = ["redis-cli", "-n", str(redis_db), "flushdb"]
    subprocess.run(flush, check=False, timeout=10, capture_output=True)


def _drain(stream: IO[str]) -> None:
    """Read a child's output to its end (then close it), so the child never blocks on a full pipe."""
    with stream:
        for _ in stream:
            pass


@contextlib.contextmanager
def engine_worker(env: dict[str, str], cwd: Path = REPO) -> Iterator[subprocess.Popen[str]]:
    """`manage.py run_engine_worker` (in ``cwd``), once it says it is ready (and has beaten once)."""
    worker = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "run_engine_worker"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        assert "engine worker ready" in worker.stdout.readline()
        # Keep reading what it logs: a full pipe would block the worker, and it could not stop.
        threading.Thread(target=_drain, args=(worker.stdout,), daemon=True).start()
        yield worker
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Killed and reaped here, so that the failure is this test's, not a later one's leak warning.
            worker.kill()
            worker.wait()
            raise AssertionError("the engine worker did not stop within 30 s of SIGTERM") from None


@contextlib.contextmanager
def web_process(env: dict[str, str]) -> Iterator[str]:
    """`mcp-inspector` (daphne) on a free port; its base URL."""
    port = free_port()
    argv = [str(Path(sys.executable).with_name("mcp-inspector")), "--no-browser", "--port", str(port)]
    with start_http_server(argv, port, env=env):
        yield f"http://127.0.0.1:{port}"


def log_in(client: httpx.Client, token: str) -> dict[str, str]:
    """Log in with the one-time token; the headers an unsafe request then needs."""
    page = client.get("/auth/token", params={"token": token})
    form_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert form_token, page.text[:500]
    login = client.post("/auth/token", data={"token": token, "csrfmiddlewaretoken": form_token[1]})
    assert login.status_code == 302, login.text[:500]
    return {"X-CSRFToken": client.cookies["mcp_inspector_csrftoken"], "Origin": str(client.base_url)}


def connect(client: httpx.Client, headers: dict[str, str], spec: dict) -> str:
    """Start a session of a stdio server from the connect form; the session page's path."""
    form = {  # no roots capability: server-everything then exits when its stdin closes
        "transport": "stdio",
        "command": " ".join([spec["command"], *spec["args"]]),
        "protocol_version": "2025-11-25",
        "timeout": "30",
        "max_total_timeout": "60",
    }
    started = client.post("/connect", data=form, headers=headers)
    assert started.status_code == 302, started.text[:500]
    return started.headers["location"]


def psql(db_name: str, query: str) -> list[list[str]]:
    """Rows of a query on the test's database, read with psql (the test process has no Django there)."""
    argv = ["psql", "-h", POSTGRES[0], "-U", "postgres", "-d", db_name, "-At", "-F", "\t", "-c", query]
    out = subprocess.run(argv, check=True, timeout=30, capture_output=True, text=True).stdout
    return [line.split("\t") for line in out.splitlines() if line]


def manage(env: dict[str, str], *args: str, **extra: str) -> str:
    run = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


def password_login(client: httpx.Client, username: str, password: str) -> dict[str, str]:
    """Log in with a password (the hosted mode); the headers an unsafe request then needs."""
    page = client.get("/auth/login")
    form_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert form_token, page.text[:500]
    fields = {"username": username, "password": password, "next": "/", "csrfmiddlewaretoken": form_token[1]}
    login = client.post("/auth/login", data=fields, headers={"Origin": str(client.base_url)})
    errors = re.findall(r'class="error"[^>]*>([^<]*)<', login.text)
    assert login.status_code == 302, (login.status_code, errors or login.text[-1500:])
    return {"X-CSRFToken": client.cookies["mcp_inspector_csrftoken"], "Origin": str(client.base_url)}


class Watcher:
    """A browser tab's live socket, read by a thread: everything the page is sent, as text."""

    def __init__(self, base: str, client: httpx.Client, path: str) -> None:
        cookies = "; ".join(f"{name}={value}" for name, value in client.cookies.items())
        self.url = base.replace("http://", "ws://") + path
        self.headers = {"Cookie": cookies, "Origin": base}
        self.seen: list[str] = []
        self.problem: BaseException | None = None
        self.changed = threading.Condition()
        self.opened = threading.Event()
        self.socket: Any = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()
        assert self.opened.wait(30) and self.problem is None, f"the socket did not open: {self.problem!r}"

    def _read(self) -> None:
        from websockets.sync.client import connect as ws_connect

        try:
            with ws_connect(self.url, additional_headers=self.headers, open_timeout=20) as socket:
                self.socket = socket
                self.opened.set()
                for message in socket:
                    with self.changed:
                        self.seen.append(str(message))
                        self.changed.notify_all()
        except Exception as exc:  # the test's own close ends it too
            self.problem = exc
        finally:
            self.opened.set()

    def wait_for(self, text: str, timeout: float) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: any(text in m for m in self.seen), timeout), (
                f"{text!r} never reached this tab ({self.problem!r}): {''.join(self.seen)[-2000:]}"
            )

    def close(self) -> None:
        if self.socket is not None:
            with contextlib.suppress(Exception):
                self.socket.close()
        self.thread.join(timeout=10)
