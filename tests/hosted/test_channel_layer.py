"""The hosted set-up's channel layer heals when Redis drops the app's connections, and keeps two
deployments on one Redis apart (inspector/redis_layer.py). Each test runs a Redis of its own."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.hosted import (
    RedisServer,
    Watcher,
    connect,
    engine_worker,
    hosted_env,
    log_in,
    new_database,
    psql,
    redis_server,
    web_process,
)
from support.paths import REPO

# PostgreSQL is required: missing, it fails the test, never skips it.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]

TOKEN = "channel-layer-token"
TOOLS_LIST = {"method": "tools/list", "params": "{}"}


def _env(database: str, redis: RedisServer, tmp_path: Path, heartbeat: float) -> dict[str, str]:
    return hosted_env(
        database,
        0,
        redis=redis.address,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_TOKEN=TOKEN,
        INSPECTOR_WORKER_HEARTBEAT=str(heartbeat),
    )


def _until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Wait for something another process does that no event of ours tells."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        time.sleep(0.2)


def _check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "manage.py", "run_engine_worker", "--check"]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def _frames(database: str, public_id: str) -> tuple[int, int, int, int, int]:
    """count, distinct seqs, lowest, highest, and the session's last_seq."""
    rows = psql(
        database,
        "SELECT count(f.id), count(DISTINCT f.seq), coalesce(min(f.seq), 0), coalesce(max(f.seq), 0), "
        "s.last_seq FROM mcp_sessions_mcpsession s LEFT JOIN mcp_sessions_timelineframe f "
        f"ON f.session_id = s.id WHERE s.public_id = '{public_id}' GROUP BY s.last_seq",
    )
    count, distinct, lowest, highest, last_seq = map(int, rows[0])
    return count, distinct, lowest, highest, last_seq


def _all_recorded(database: str, public_id: str) -> int:
    count, distinct, lowest, highest, last_seq = _frames(database, public_id)
    found = (count, distinct, lowest, highest, last_seq)
    assert count == distinct == highest == last_seq and lowest == 1, found
    return count


def _seen_after(watcher: Watcher, mark: int, text: str) -> bool:
    with watcher.changed:
        return any(text in message for message in watcher.seen[mark:])


def _wait_after(watcher: Watcher, mark: int, text: str, timeout: float) -> int:
    """Wait until the tab is sent ``text`` in a message after the ``mark``-th; that message's index."""
    with watcher.changed:
        found = watcher.changed.wait_for(lambda: any(text in m for m in watcher.seen[mark:]), timeout)
        assert found, f"{text!r} never reached the tab: {''.join(watcher.seen[mark:])[-2000:]}"
        return next(i for i in range(mark, len(watcher.seen)) if text in watcher.seen[i])


def _mark(watcher: Watcher) -> int:
    with watcher.changed:
        return len(watcher.seen)


def _tools_list(client: httpx.Client, headers: dict[str, str], session_url: str) -> httpx.Response:
    return client.post(session_url + "request", data=TOOLS_LIST, headers=headers)


def test_killed_connections_and_a_redis_restart_heal_a_live_session_with_no_process_restarted(
    hosted_database: str, tmp_path: Path, everything_stdio: dict
) -> None:
    """CLIENT KILL of every connection of the app, then a restart of its Redis (empty after, as one
    without persistence is): the page says "reconnecting to the engine", a call meanwhile is a 503
    that says why and the worker's health check fails saying why; then a call works again within
    seconds, on the same worker and web process, and every frame recorded is there with no gap."""
    with redis_server() as redis:
        # Long beats: the restart below must stay well within the outage a worker rides out.
        env = _env(hosted_database, redis, tmp_path, heartbeat=10)
        with (
            engine_worker(env) as worker,
            web_process(env) as base,
            httpx.Client(base_url=base, follow_redirects=False, timeout=30) as client,
        ):
            headers = log_in(client, TOKEN)
            session_url = connect(client, headers, everything_stdio)
            public_id = session_url.strip("/").split("/")[-1]
            tab = Watcher(base, client, f"/ws/sessions/{public_id}/")
            try:
                tab.wait_for('status-ready"', timeout=60)
                first = _tools_list(client, headers, session_url)
                assert first.status_code == 200 and "echo" in first.text, first.text[:1000]
                assert _check(env).returncode == 0

                # Every connection of the app's, killed from a connection of the test's own.
                mark = _mark(tab)
                killed = redis.client().client_kill_filter(_type="normal", skipme=True)
                assert killed >= 2  # the web process's and the worker's, at least
                down = _wait_after(tab, mark, "reconnecting to the engine", timeout=30)
                _wait_after(tab, down + 1, 'status-ready"', timeout=30)
                again = _tools_list(client, headers, session_url)
                assert again.status_code == 200 and "echo" in again.text, again.text[:1000]

                # Redis stops: the page says so, a call is a clear 503, the worker is not healthy.
                mark = _mark(tab)
                redis.stop()
                _wait_after(tab, mark, "reconnecting to the engine", timeout=30)
                refused = _tools_list(client, headers, session_url)
                assert refused.status_code == 503, refused.text[:1000]
                assert "channel layer is down" in refused.text
                assert refused.headers["Retry-After"]
                checked: list[subprocess.CompletedProcess[str]] = []
                _until(
                    lambda: checked.append(_check(env)) or checked[-1].returncode != 0,
                    "the health check failing",
                )
                assert "cannot receive commands" in checked[-1].stderr, checked[-1].stderr

                # The same port, empty: the page comes back to "ready", calls work at once.
                restarted = time.monotonic()
                mark = _mark(tab)
                redis.start()
                _wait_after(tab, mark, 'status-ready"', timeout=30)
                healed = _tools_list(client, headers, session_url)
                assert healed.status_code == 200 and "echo" in healed.text, healed.text[:1000]
                assert time.monotonic() - restarted < 15
                assert _check(env).returncode == 0
                assert worker.poll() is None  # never restarted
            finally:
                tab.close()
            # Nothing recorded is lost: three tools/list calls, frames 1..last with no gap.
            recorded = _all_recorded(hosted_database, public_id)
            answers = psql(
                hosted_database,
                "SELECT count(*) FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s "
                f"ON s.id = f.session_id WHERE s.public_id = '{public_id}' AND f.method = 'tools/list'",
            )
            assert int(answers[0][0]) == 6 and recorded > 6  # each request and its response


def test_a_worker_cut_off_from_redis_for_long_ends_its_sessions_as_lost_then_takes_new_ones(
    hosted_database: str, tmp_path: Path, everything_stdio: dict
) -> None:
    heartbeat = 1.5
    with redis_server() as redis:
        env = _env(hosted_database, redis, tmp_path, heartbeat=heartbeat)
        with (
            engine_worker(env) as worker,
            web_process(env) as base,
            httpx.Client(base_url=base, follow_redirects=False, timeout=30) as client,
        ):
            headers = log_in(client, TOKEN)
            session_url = connect(client, headers, everything_stdio)
            public_id = session_url.strip("/").split("/")[-1]
            tab = Watcher(base, client, f"/ws/sessions/{public_id}/")
            try:
                tab.wait_for('status-ready"', timeout=60)
                redis.stop()
                status = (
                    f"SELECT status, status_note FROM mcp_sessions_mcpsession WHERE public_id = '{public_id}'"
                )
                _until(lambda: psql(hosted_database, status)[0][0] == "lost", "the session marked lost")
                note = psql(hosted_database, status)[0][1]
                assert "cannot receive commands" in note and "Redis" in note, note
                mark = _mark(tab)
                redis.start()
                # The page hears it once it is back in its group.
                _wait_after(tab, mark, 'status-lost"', timeout=30)
                assert worker.poll() is None
            finally:
                tab.close()
            _all_recorded(hosted_database, public_id)
            # The same worker takes a new session once it beats again.
            _until(lambda: _check(env).returncode == 0, "the worker healthy again")
            fresh = connect(client, headers, everything_stdio)
            fresh_id = fresh.strip("/").split("/")[-1]
            ready = f"SELECT status FROM mcp_sessions_mcpsession WHERE public_id = '{fresh_id}'"
            _until(lambda: psql(hosted_database, ready)[0][0] == "ready", "the new session ready")


@pytest.fixture
def second_database() -> Iterator[str]:
    with new_database() as name:
        yield name


def test_two_deployments_on_one_redis_each_take_only_their_own_sessions(
    hosted_database: str, second_database: str, tmp_path: Path, bad_stdio: Callable[[str], dict]
) -> None:
    """Staging and production on one Redis, the same database number, no prefix set: each
    deployment's workers take each of its session starts, never the other's."""
    starts = 4  # with names shared, each start went to either deployment's worker: 1 in 2**8 to pass
    with redis_server() as redis:
        envs = [
            _env(database, redis, tmp_path / database, heartbeat=5)
            for database in (hosted_database, second_database)
        ]
        with (
            engine_worker(envs[0]) as worker_a,
            engine_worker(envs[1]) as worker_b,
            web_process(envs[0]) as base_a,
            web_process(envs[1]) as base_b,
            httpx.Client(base_url=base_a, follow_redirects=False, timeout=30) as client_a,
            httpx.Client(base_url=base_b, follow_redirects=False, timeout=30) as client_b,
        ):
            pairs = [(hosted_database, worker_a, client_a), (second_database, worker_b, client_b)]
            started: list[tuple[str, int, str]] = []
            for database, worker, client in pairs:
                headers = log_in(client, TOKEN)
                for _ in range(starts):
                    url = connect(client, headers, bad_stdio("hang"))
                    started.append((database, worker.pid, url.strip("/").split("/")[-1]))
            for database, pid, public_id in started:
                query = f"SELECT status, worker FROM mcp_sessions_mcpsession WHERE public_id = '{public_id}'"
                _until(lambda q=query, d=database: psql(d, q)[0][0] == "ready", f"{public_id} ready")
                taken_by = psql(database, query)[0][1]
                assert taken_by.split(":")[1] == str(pid), (database, taken_by, pid)
