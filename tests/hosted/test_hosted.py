"""The hosted set-up: PostgreSQL and the Redis channel layer, and the runtime in its own process."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from support.browser import CHROMIUM, CHROMIUM_ARGS, LONG
from support.hosted import (
    Watcher,
    connect,
    engine_worker,
    hosted_env,
    log_in,
    manage,
    migrate,
    password_login,
    prepare,
    psql,
    web_process,
)
from support.processes import run_pytest

# PostgreSQL and Redis are required: missing, they fail the test, never skip it.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]


def test_the_runtime_and_consumer_suite_passes_on_postgres_and_redis(tmp_path: Path) -> None:
    env = hosted_env("mcp_inspector", 14, INSPECTOR_DATA_DIR=str(tmp_path))
    tests = [
        "tests/runtime/test_runtime.py",
        "tests/runtime/test_workers.py",
        "tests/runtime/test_limits.py",
        "tests/runtime/test_storage_failures.py",  # the guard on the session row, on PostgreSQL
        "tests/runtime/test_resumed_worker.py",
        # The page's forms over its live socket: the consumer's reads and the owner's answer.
        "tests/web/test_tools_panel.py::test_a_call_form_sent_over_the_live_socket_is_answered_on_it",
        "tests/web/test_tools_panel.py::test_a_viewer_cannot_call_a_tool_over_the_live_socket",
    ]
    assert re.search(r"\d+ passed", run_pytest(*tests, env=env))


def test_search_and_recordings_pass_on_postgres(tmp_path: Path) -> None:
    """Full-text search (a GIN index, a NUL refused) and recordings (long fields, NUL) have
    PostgreSQL-only paths (the big-file tests stay on SQLite: the database adds nothing there); so
    has the migration that encrypts secrets (jsonb columns become text)."""
    env = hosted_env("mcp_inspector_read", 12, INSPECTOR_DATA_DIR=str(tmp_path))
    tests = [
        "tests/timeline/test_search.py",
        "tests/timeline/test_recordings.py",
        "tests/web/test_secrets.py",
    ]
    assert re.search(r"\d+ passed", run_pytest("-m", "not slow", *tests, env=env))


def test_two_people_on_two_web_processes_watch_a_session_whose_worker_dies_mid_call(
    empty_database: str, tmp_path: Path, everything_stdio: dict
) -> None:
    """The hosted set-up as a team runs it: two web processes and two engine workers on PostgreSQL and
    Redis; alice and bob log in with passwords on different web processes and both watch alice's
    session of an approved server; its worker is SIGKILLed in the middle of a long call. Both pages
    hear "lost" live, every frame recorded before is there with no gap, and with no worker left a new
    session says why it cannot start."""
    heartbeat = 2.0
    env = hosted_env(
        empty_database,
        13,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_WORKER_HEARTBEAT=str(heartbeat),
    )
    migrate(env)  # as a deployment does, on an empty database
    prepare(env, 13)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    seed = (
        "from django.contrib.auth.models import User\n"
        "from sessions.teams.models import CatalogServer, Membership, Team\n"
        "team = Team.objects.get(name='Team A')\n"
        "bob = User.objects.create_user('bob', password='bob-long-password-1')\n"
        "Membership.objects.create(team=team, user=bob, role='operator')\n"
        "entry = CatalogServer.objects.create(team=team, name='everything',"
        f" command={everything_stdio['command']!r}, args={everything_stdio['args']!r})\n"
        "print(entry.pk)\n"
    )
    entry = manage(env, "shell", "-c", seed).strip().splitlines()[-1]
    with (
        engine_worker(env) as first,
        engine_worker(env) as second,
        web_process(env) as web_a,
        web_process(env) as web_b,
        httpx.Client(base_url=web_a, follow_redirects=False, timeout=20) as alice,
        httpx.Client(base_url=web_b, follow_redirects=False, timeout=20) as bob,
    ):
        alice_headers = password_login(alice, "alice", "alice-long-password-1")
        bob_headers = password_login(bob, "bob", "bob-long-password-1")
        started = alice.post(f"/catalog/{entry}/connect", headers=alice_headers)
        assert started.status_code == 302, started.text[:1000]
        session_url = started.headers["location"]
        public_id = session_url.strip("/").split("/")[-1]
        watchers = [
            Watcher(web_a, alice, f"/ws/sessions/{public_id}/"),
            Watcher(web_b, bob, f"/ws/sessions/{public_id}/"),
        ]
        try:
            for watcher in watchers:
                watcher.wait_for('status-ready"', timeout=60)
            # bob starts a long call on his web process; both tabs see its progress.
            arguments = (
                '{"name": "trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60}}'
            )
            call = bob.post(
                session_url + "request",
                data={"method": "tools/call", "params": arguments},
                headers=bob_headers,
            )
            assert call.status_code == 200, call.text[:1000]
            for watcher in watchers:
                watcher.wait_for("notifications/progress", timeout=30)

            owner = psql(
                empty_database, f"SELECT worker FROM mcp_sessions_mcpsession WHERE public_id = '{public_id}'"
            )
            pid = int(owner[0][0].split(":")[1])
            victim, survivor = (first, second) if first.pid == pid else (second, first)
            assert victim.pid == pid, (owner, first.pid, second.pid)
            victim.kill()
            victim.wait(timeout=30)
            # Lost within a few heartbeats (three missed beats make a worker dead), with no reload.
            for watcher in watchers:
                watcher.wait_for('status-lost"', timeout=heartbeat * 3 + 30)
        finally:
            for watcher in watchers:
                watcher.close()

        # Nothing recorded is lost: frames 1..last with no gap, the progress before the kill among them.
        rows = psql(
            empty_database,
            "SELECT count(*), count(DISTINCT f.seq), max(f.seq), min(f.seq), s.last_seq, "
            "sum(CASE WHEN f.method = 'notifications/progress' THEN 1 ELSE 0 END) "
            "FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s ON s.id = f.session_id "
            f"WHERE s.public_id = '{public_id}' GROUP BY s.last_seq",
        )
        count, distinct, highest, lowest, last_seq, progress = map(int, rows[0])
        assert count == distinct == highest == last_seq and lowest == 1, rows
        assert progress >= 1

        # No worker at all: a new session says why it cannot start.
        survivor.terminate()
        survivor.wait(timeout=30)
        deadline = time.monotonic() + heartbeat * 3 + 30
        while psql(empty_database, "SELECT count(*) FROM mcp_sessions_engineworker")[0][0] != "0":
            assert time.monotonic() < deadline, "the stopped worker is still listed"
            time.sleep(0.2)
        again = alice.post(f"/catalog/{entry}/connect", headers=alice_headers)
        assert again.status_code == 302
        page = alice.get(again.headers["location"])
        assert 'status-failed"' in page.text and "no engine worker is running" in page.text, page.text[:3000]


# Set by the page itself when its live socket opens (htmx's ws extension): the consumer joins the
# session's group before it accepts the socket, so from then on the page hears every event.
# The socket's opening marked in the DOM: a selector wait needs no eval, which the page's CSP forbids.
WATCH_SOCKET = (
    "document.addEventListener('htmx:wsOpen', () => {"
    " document.documentElement.dataset.liveSocket = 'open'; });"
)


@pytest.mark.browser
def test_an_open_page_learns_live_that_the_only_worker_died_and_a_new_session_says_none_runs(
    hosted_database: str, tmp_path: Path, bad_stdio: Any
) -> None:
    from playwright.sync_api import expect, sync_playwright

    env = hosted_env(
        hosted_database,
        7,  # each hosted test has a Redis database of its own: they run side by side
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_TOKEN="only-worker-token",
        # Not shorter: on a loaded machine (load 13 on 2 cores, measured) a worker's beats came up to
        # 6 s apart, and a worker three beats late is taken for dead.
        INSPECTOR_WORKER_HEARTBEAT="3",
    )
    prepare(env, 7)
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
        page.wait_for_selector("html[data-live-socket=open]", state="attached", timeout=LONG)
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
