"""The hosted set-up: PostgreSQL and the Redis channel layer, and the runtime in its own process."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
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
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_runtime.py"],
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
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=120
    )
    subprocess.run(["redis-cli", "-n", "13", "flushdb"], check=False, timeout=10, capture_output=True)
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
        port = free_port()
        argv = [str(Path(sys.executable).with_name("mcp-inspector")), "--no-browser", "--port", str(port)]
        with start_http_server(argv, port, env=env):
            base = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=base, follow_redirects=False, timeout=20) as client:
                page = client.get("/auth/token", params={"token": "hosted-test-token"})
                form_token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
                assert form_token, page.text[:500]
                login = client.post(
                    "/auth/token", data={"token": "hosted-test-token", "csrfmiddlewaretoken": form_token[1]}
                )
                assert login.status_code == 302, login.text[:500]
                headers = {"X-CSRFToken": client.cookies["mcp_inspector_csrftoken"], "Origin": base}
                command = " ".join([everything_stdio["command"], *everything_stdio["args"]])
                form = {  # no roots capability: server-everything then exits when its stdin closes
                    "transport": "stdio",
                    "command": command,
                    "protocol_version": "2025-11-25",
                    "timeout": "30",
                    "max_total_timeout": "60",
                }
                started = client.post("/connect", data=form, headers=headers)
                assert started.status_code == 302
                session_url = started.headers["location"]
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
                assert (
                    "ready" in page.text
                    and "mcp-servers/everything" not in page.text
                    or "Everything" in page.text
                )

                # The worker dies without a word (SIGKILL): its heartbeat stops, and the web process's
                # reaper marks the session lost instead of leaving it ready forever.
                worker.kill()
                worker.wait(timeout=30)
                deadline = time.monotonic() + 30
                while 'status-lost" role="status">lost<' not in page.text:
                    assert time.monotonic() < deadline, page.text[:2000]
                    page = client.get(session_url)
                assert "stopped answering" in page.text
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        if worker.stdout is not None:
            worker.stdout.close()
