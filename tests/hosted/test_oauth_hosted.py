"""OAuth in the hosted set-up: the flow runs in an engine worker, the person comes back through the
callback of another web process, and the OAuth debugger's steps run in the worker too."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet
from support.hosted import (
    Watcher,
    engine_worker,
    hosted_env,
    manage,
    password_login,
    prepare,
    web_process,
)
from support.oauth import protected_web

# PostgreSQL and Redis are required: missing, they fail the test, never skip it.
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]

AUTHORIZE_LINK = re.compile(r'<a class="button primary" href="([^"]+)"[^>]*>Authorize at')


@pytest.fixture(scope="module")
def protected_url() -> Iterator[str]:
    with protected_web() as url:
        yield url


def _authorization_url(client: httpx.Client, path: str, timeout: float = 30) -> str:
    """The "Authorize at" link of a page, once it shows one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = AUTHORIZE_LINK.search(client.get(path).text)
        if found:
            return html.unescape(found[1])
        time.sleep(0.2)  # polling a page another process changes: there is no event to wait on here
    raise AssertionError(f"{path} never showed an Authorize link")


def _until(client: httpx.Client, path: str, text: str, timeout: float = 30) -> str:
    """The page once it shows ``text`` (never a failed step meanwhile)."""
    deadline = time.monotonic() + timeout
    while text not in (page := client.get(path).text):
        assert time.monotonic() < deadline, f"{path} never showed {text!r}: {page[-3000:]}"
        assert 'data-outcome="failed"' not in page, page[-3000:]
        time.sleep(0.2)  # another process changes it; the page is what a person polls too
    return page


def _come_back(url: str, other_web: httpx.Client) -> None:
    """Approve at the test authorization server, and come back through the other web process."""
    answer = httpx.get(url, follow_redirects=False, timeout=20)
    back = urlsplit(answer.headers["location"])
    assert back.path == "/oauth/callback"
    taken = other_web.get(f"{back.path}?{back.query}")
    assert taken.status_code == 200, taken.text[:1000]


def test_a_session_and_the_debugger_authorize_across_web_processes_and_a_worker(
    hosted_database: str,
    tmp_path: Path,
    protected_url: str,
) -> None:
    env = hosted_env(
        hosted_database,
        11,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",
    )
    prepare(env, 11)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    with (
        engine_worker(env),
        web_process(env) as web_a,
        web_process(env) as web_b,
        httpx.Client(base_url=web_a, follow_redirects=False, timeout=20) as alice,
        httpx.Client(base_url=web_b, follow_redirects=False, timeout=20) as alice_elsewhere,
    ):
        headers = password_login(alice, "alice", "alice-long-password-1")
        password_login(alice_elsewhere, "alice", "alice-long-password-1")
        form = {
            "transport": "http",
            "url": protected_url,
            "oauth": "on",
            "protocol_version": "2025-11-25",
            "timeout": "30",
            "max_total_timeout": "60",
        }
        started = alice.post("/connect", data=form, headers=headers)
        assert started.status_code == 302, started.text[:1000]
        session_path = started.headers["location"]
        watcher = Watcher(web_a, alice, f"/ws/sessions/{session_path.strip('/').split('/')[-1]}/")
        try:
            watcher.wait_for("Authorize at", 30)  # live, from the worker through Redis
            _come_back(_authorization_url(alice, session_path), alice_elsewhere)
            watcher.wait_for("ready", 30)
        finally:
            watcher.close()

        debug = alice.post("/oauth/debug", data={"session": session_path.split("/")[2]}, headers=headers)
        assert debug.status_code == 302, debug.text[:1000]
        debugger = debug.headers["location"]
        _until(alice, debugger, "Run all")  # a worker has made the debugger
        ran = alice.post(f"{debugger}/step", data={"all": "1"}, headers=headers)
        assert ran.status_code == 302, ran.text[:1000]
        _come_back(_authorization_url(alice, debugger), alice_elsewhere)
        page = _until(alice, debugger, 'data-step="request" data-outcome="done"')
        assert page.count('data-outcome="done"') == 7
