"""The hosted set-up: PostgreSQL and the Redis channel layer, and the runtime in its own process."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.browser import CHROMIUM, CHROMIUM_ARGS, LONG
from support.processes import free_port, start_http_server

ROOT = Path(__file__).resolve().parent.parent
REDIS = ("127.0.0.1", 6379)
POSTGRES = ("127.0.0.1", 5432)

pytestmark = pytest.mark.slow


def reachable(address: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(address, timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(autouse=True)
def services() -> None:
    """PostgreSQL and Redis run on every machine and in CI: missing, they fail the test, never skip it."""
    missing = [
        name for name, address in (("PostgreSQL", POSTGRES), ("Redis", REDIS)) if not reachable(address)
    ]
    assert not missing, (
        f"{' and '.join(missing)} not reachable on 127.0.0.1: the hosted set-up cannot be tested"
    )


def hosted_env(db_name: str, redis_db: int, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DB="postgres",
        DB_NAME=db_name,
        DB_USER="postgres",
        DB_HOST=POSTGRES[0],
        DB_PORT=str(POSTGRES[1]),
        REDIS_URL=f"redis://{REDIS[0]}:{REDIS[1]}/{redis_db}",
        **extra,
    )
    return env


def test_the_runtime_and_consumer_suite_passes_on_postgres_and_redis(tmp_path: Path) -> None:
    env = hosted_env("mcp_inspector", 14, INSPECTOR_DATA_DIR=str(tmp_path))
    tests = ["tests/test_runtime.py", "tests/test_workers.py", "tests/test_limits.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"\d+ passed", run.stdout)


def test_search_and_recordings_pass_on_postgres(tmp_path: Path) -> None:
    """Full-text search (a GIN index, a NUL refused) and recordings (long fields, NUL) have
    PostgreSQL-only paths (the big-file tests stay on SQLite: the database adds nothing there); so
    has the migration that encrypts secrets (jsonb columns become text)."""
    env = hosted_env("mcp_inspector_read", 12, INSPECTOR_DATA_DIR=str(tmp_path))
    tests = ["tests/test_search.py", "tests/test_recordings.py", "tests/test_secrets.py"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"\d+ passed", run.stdout)


@pytest.fixture
def hosted_database() -> Iterator[str]:
    name = f"mcp_hosted_{uuid.uuid4().hex[:8]}"
    psql = ["psql", "-h", POSTGRES[0], "-U", "postgres", "-q", "-c"]
    subprocess.run([*psql, f"CREATE DATABASE {name}"], check=True, timeout=30, capture_output=True)
    try:
        yield name
    finally:
        subprocess.run(
            [*psql, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], timeout=30, capture_output=True
        )


def prepare(env: dict[str, str], redis_db: int) -> None:
    """Migrate the test's database and empty its Redis database."""
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=120
    )
    flush = ["redis-cli", "-n", str(redis_db), "flushdb"]
    subprocess.run(flush, check=False, timeout=10, capture_output=True)


@contextlib.contextmanager
def engine_worker(env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """`manage.py run_engine_worker`, once it says it is ready (and has beaten once)."""
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "run_engine_worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert worker.stdout is not None
        assert "engine worker ready" in worker.stdout.readline()
        yield worker
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        if worker.stdout is not None:
            worker.stdout.close()


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


def test_a_web_process_and_a_separate_engine_worker_share_live_sessions(
    hosted_database: str, tmp_path: Path, everything_stdio: dict
) -> None:
    env = hosted_env(
        hosted_database,
        13,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_TOKEN="hosted-test-token",
        INSPECTOR_WORKER_HEARTBEAT="0.5",
    )
    prepare(env, 13)
    with (
        engine_worker(env) as worker,
        web_process(env) as base,
        httpx.Client(base_url=base, follow_redirects=False, timeout=20) as client,
    ):
        headers = log_in(client, "hosted-test-token")
        session_url = connect(client, headers, everything_stdio)
        call = None
        for _ in range(100):
            call = client.post(
                session_url + "request",
                data={
                    "method": "tools/call",
                    "params": '{"name": "echo", "arguments": {"message": "hosted"}}',
                },
                headers=headers,
            )
            if call.status_code == 200:
                break
            # 409 until the worker has taken the session; the wait is bounded by the loop.
            client.get(session_url)
        assert call is not None and call.status_code == 200, call.text if call else ""
        # A slow answer (a loaded machine) leaves a running card; the page shows it once done.
        page, deadline = call, time.monotonic() + 30
        while "Echo: hosted" not in page.text:
            assert time.monotonic() < deadline, page.text[:2000]
            page = client.get(session_url)
        page = client.get(session_url)
        assert "ready" in page.text and "mcp-servers/everything" not in page.text or "Everything" in page.text

        # The worker dies without a word (SIGKILL): its heartbeat stops, and the web process's
        # reaper marks the session lost instead of leaving it ready forever.
        worker.kill()
        worker.wait(timeout=30)
        deadline = time.monotonic() + 30
        while 'status-lost" role="status">lost<' not in page.text:
            assert time.monotonic() < deadline, page.text[:2000]
            page = client.get(session_url)
        assert "stopped answering" in page.text


# Set by the page itself when its live socket opens (htmx's ws extension): the consumer joins the
# session's group before it accepts the socket, so from then on the page hears every event.
WATCH_SOCKET = "document.addEventListener('htmx:wsOpen', () => { window.liveSocketOpen = true; });"


@pytest.mark.browser
def test_an_open_page_learns_live_that_the_only_worker_died_and_a_new_session_says_none_runs(
    hosted_database: str, tmp_path: Path, bad_stdio: Any
) -> None:
    from playwright.sync_api import expect, sync_playwright

    env = hosted_env(
        hosted_database,
        10,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_TOKEN="only-worker-token",
        # Not shorter: on a loaded machine (load 13 on 2 cores, measured) a worker's beats came up to
        # 6 s apart, and a worker three beats late is taken for dead.
        INSPECTOR_WORKER_HEARTBEAT="3",
    )
    prepare(env, 10)
    with (
        engine_worker(env) as worker,
        web_process(env) as base,
        httpx.Client(base_url=base, follow_redirects=False, timeout=20) as client,
        sync_playwright() as pw,
    ):
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        headers = log_in(client, "only-worker-token")
        session_url = connect(client, headers, bad_stdio("hang"))
        context = chromium.new_context()
        context.add_cookies([{"name": n, "value": v, "url": base} for n, v in client.cookies.items()])
        context.add_init_script(WATCH_SOCKET)
        page = context.new_page()
        page.goto(base + session_url)
        state = page.locator("#session-state [role=status]")
        expect(state).to_have_text("ready", timeout=LONG)
        page.wait_for_function("window.liveSocketOpen === true", timeout=LONG)
        page.evaluate("window.notReloaded = true")

        worker.kill()  # the only worker: no other is left to notice, only the web process's reaper
        worker.wait(timeout=30)
        expect(state).to_have_text("lost", timeout=LONG)
        expect(page.locator("#session-state .note")).to_contain_text("stopped answering")
        assert page.evaluate("window.notReloaded === true"), "the page was reloaded"

        # With no worker at all, a new session says so at once instead of "starting…" for ever.
        started = time.monotonic()
        new_url = connect(client, headers, bad_stdio("hang"))
        page.goto(base + new_url)
        expect(state).to_have_text("failed", timeout=1000)
        expect(page.locator("#session-state .note")).to_contain_text(
            "no engine worker is running: start one with `python manage.py run_engine_worker`"
        )
        expect(page.locator("#timeline-rows")).to_contain_text("no engine worker is running")
        assert time.monotonic() - started < 10
        chromium.close()
