"""What makes the inspector safe to expose, past the login: a private data folder and database file,
websockets from our own origin only (scheme, host and port), nothing cached, logins that end.

The websocket origin is tried against a real running `mcp-inspector` with a real websocket client,
as a page on another port or scheme of the same host would open it: with the person's cookie.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client
from support.paths import REPO
from support.processes import free_port, start_http_server
from support.teams import team_of
from support.web import finish
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from inspector.asgi import application
from sessions.models import McpSession

MCP_INSPECTOR = str(Path(sys.executable).with_name("mcp-inspector"))
MARKER = "only-alice-may-read-this-timeline"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment less the inspector's own settings (the test run's data folder, a fixed key)."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("INSPECTOR_", "DB")) and k != "SECRET_KEY"
    }
    return {**env, "DJANGO_SETTINGS_MODULE": "inspector.settings", **extra}


def python(code: str, env: dict[str, str]) -> str:
    """Run code in a fresh Python (the app's settings, from REPO); return its stdout."""
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


# --- the data folder and the database file ---------------------------------------------------------

# Under the most common umask, which makes world-readable files; migrate, then list the modes while
# the connection is still open (SQLite removes -wal and -shm when the last one closes).
MODES = """
    import json, os, pathlib
    os.umask(0o022)
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    folder = pathlib.Path(os.environ["INSPECTOR_DATA_DIR"])
    print(json.dumps({p.name: p.stat().st_mode & 0o777 for p in [folder, *folder.iterdir()]}))
"""


@pytest.mark.slow
def test_a_fresh_data_folder_is_the_users_alone_and_so_are_the_database_and_its_wal(tmp_path: Path) -> None:
    folder = tmp_path / "fresh" / "inspector"
    modes = json.loads(python(MODES, clean_env(INSPECTOR_DATA_DIR=str(folder))))

    assert modes.pop("inspector") == 0o700
    assert {"inspector.sqlite3", "inspector.sqlite3-wal", "inspector.sqlite3-shm"} <= set(modes)
    assert {"secret_key", "encryption_keys"} <= set(modes)
    assert {name: mode for name, mode in modes.items() if mode != 0o600} == {}


@pytest.mark.slow
def test_an_existing_folder_and_database_open_to_others_are_closed(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for name in ("inspector.sqlite3", "inspector.sqlite3-wal"):
        (folder / name).touch()
        (folder / name).chmod(0o644)

    modes = json.loads(python(MODES, clean_env(INSPECTOR_DATA_DIR=str(folder))))

    assert modes.pop("old") == 0o700
    assert {name: mode for name, mode in modes.items() if mode != 0o600} == {}


# --- the websocket's origin, against a running inspector -------------------------------------------

SEED = f"""
    import getpass, json
    import django
    django.setup()
    from django.core.management import call_command
    call_command("migrate", verbosity=0)
    from django.contrib.auth.models import User
    from sessions.engine import Frame
    from sessions.frames import frame_row
    from sessions.models import McpSession, TimelineFrame
    from sessions.teams.access import personal_team
    # The token login logs in the user named after the account.
    owner, _ = User.objects.get_or_create(username=getpass.getuser())
    team = personal_team(owner)
    session = McpSession.objects.create(owner=owner, team=team, name="private", status="closed", last_seq=1)
    params = {{"level": "info", "data": "{MARKER}"}}
    note = {{"jsonrpc": "2.0", "method": "notifications/message", "params": params}}
    frame = Frame("message", "in", json.dumps(note).encode())
    frame.seq = 1
    TimelineFrame.objects.create(session=session, **frame_row(frame, 0))
    print(session.public_id)
"""


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A running inspector holding one of alice's sessions; alice's session cookie, from a real login."""
    env = clean_env(
        INSPECTOR_DATA_DIR=str(tmp_path_factory.mktemp("running")),
        INSPECTOR_TOKEN="hardening-test-token",
        INSPECTOR_SESSION_AGE="3600",
    )
    public_id = python(SEED, env).strip()
    port = free_port()
    with start_http_server([MCP_INSPECTOR, "--no-browser", "--port", str(port)], port, env=env):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=20) as browser:
            page = browser.get("/auth/token", params={"token": "hardening-test-token"})
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf, page.text[:500]
            login = browser.post(
                "/auth/token",
                data={"token": "hardening-test-token", "csrfmiddlewaretoken": csrf[1]},
                headers={"Origin": base},
            )
            assert login.status_code == 302, login.text[:500]
            yield {
                "port": port,
                "url": f"ws://127.0.0.1:{port}/ws/sessions/{public_id}/",
                "cookie": f"mcp_inspector_session={browser.cookies['mcp_inspector_session']}",
                "set_cookie": login.headers.get_list("set-cookie"),
            }


def open_socket(running: dict[str, Any], origin: str | None) -> ClientConnection:
    return connect(
        running["url"],
        origin=origin,  # type: ignore[arg-type]
        additional_headers={"Cookie": running["cookie"]},
        proxy=None,
        open_timeout=10,
    )


def read_until(socket: ClientConnection, text: str, timeout: float = 10.0) -> str:
    received, deadline = "", time.monotonic() + timeout
    while text not in received:
        message = socket.recv(timeout=max(0.0, deadline - time.monotonic()))
        received += message if isinstance(message, str) else message.decode()
    return received


@pytest.mark.slow
def test_the_pages_own_origin_opens_the_session_socket_and_reads_its_timeline(
    running: dict[str, Any],
) -> None:
    with open_socket(running, f"http://127.0.0.1:{running['port']}") as socket:
        assert MARKER in read_until(socket, MARKER)


@pytest.mark.slow
@pytest.mark.parametrize(
    "origin",
    [
        "http://127.0.0.1:{other}",  # another port of the same host
        "http://127.0.0.1",  # port 80 of the same host
        "https://127.0.0.1:{port}",  # the same host and port, another scheme
        "https://127.0.0.1",  # port 443 of the same host
        "http://localhost:{port}",  # another name of this machine: another origin
        "http://evil.example",
        "null",  # a sandboxed frame or a file: page
        None,  # no Origin at all: browsers always send one
    ],
)
def test_any_other_origin_is_refused_before_the_socket_opens(
    running: dict[str, Any], origin: str | None
) -> None:
    shown = origin and origin.format(port=running["port"], other=running["port"] + 1)
    with pytest.raises(InvalidStatus) as refused:
        open_socket(running, shown).close()
    assert refused.value.response.status_code == 403
    assert MARKER.encode() not in refused.value.response.body


@pytest.mark.slow
def test_the_login_cookie_lives_as_long_as_inspector_session_age_says(running: dict[str, Any]) -> None:
    [session_cookie] = [c for c in running["set_cookie"] if c.startswith("mcp_inspector_session=")]
    assert re.search(r"(?i)max-age=3600\b", session_cookie), session_cookie


# The websocket stack closes stale database connections on every message.
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("forwarded", "origin", "accepted"),
    [
        (b"https", b"https://inspector.example", True),
        (b"https", b"http://inspector.example", False),
        (b"http", b"https://inspector.example", False),
        (None, b"https://inspector.example", False),
        (None, b"http://inspector.example", True),
    ],
)
async def test_behind_a_tls_proxy_the_socket_takes_its_scheme_from_x_forwarded_proto(
    settings: Any, forwarded: bytes | None, origin: bytes, accepted: bool
) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["inspector.example"]
    settings.CSRF_TRUSTED_ORIGINS = []
    headers = [(b"host", b"inspector.example"), (b"origin", origin)]
    if forwarded is not None:
        headers.append((b"x-forwarded-proto", forwarded))
    communicator = WebsocketCommunicator(application, "/ws/health/", headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    assert connected is accepted
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_a_socket_to_a_host_not_in_allowed_hosts_is_refused_even_from_that_origin() -> None:
    # DNS rebinding: evil.example resolved to 127.0.0.1; the page's origin and Host agree.
    headers = [(b"host", b"evil.example:6274"), (b"origin", b"http://evil.example:6274")]
    communicator = WebsocketCommunicator(application, "/ws/health/", headers=headers)
    assert await communicator.connect(timeout=5) == (False, 1000)
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_an_origin_in_csrf_trusted_origins_opens_the_socket(settings: Any) -> None:
    settings.CSRF_TRUSTED_ORIGINS = ["https://inspector.example"]
    headers = [(b"host", b"127.0.0.1:6274"), (b"origin", b"https://inspector.example")]
    communicator = WebsocketCommunicator(application, "/ws/health/", headers=headers)
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    await communicator.disconnect()


@pytest.mark.slow
def test_trusted_origins_derived_from_allowed_hosts_are_https_and_never_loopback(tmp_path: Path) -> None:
    env = clean_env(
        INSPECTOR_DATA_DIR=str(tmp_path),
        ALLOWED_HOSTS="inspector.example,.team.example,127.0.0.1,localhost,[::1]",
    )
    code = (
        "import django; django.setup(); from django.conf import settings as s; print(s.CSRF_TRUSTED_ORIGINS)"
    )
    derived = python(code, env)
    assert derived.strip() == repr(["https://inspector.example", "https://*.team.example"])


# --- nothing cached --------------------------------------------------------------------------------


@pytest.fixture
def alice_client(client: Client, django_user_model: type[User]) -> Client:
    client.force_login(django_user_model.objects.create_user("alice"))
    return client


@pytest.mark.django_db
def test_every_page_fragment_and_export_for_a_logged_in_person_says_no_store(alice_client: Client) -> None:
    alice = User.objects.get(username="alice")
    session = McpSession.objects.create(
        owner=alice, team=team_of(alice), name="s", status="closed", public_id=uuid.uuid4()
    )
    for path in [
        "/",
        f"/s/{session.public_id}/",
        f"/s/{session.public_id}/timeline",
        f"/s/{session.public_id}/panel/tools",
        f"/s/{session.public_id}/export",
        f"/s/{session.public_id}/export.html",
        f"/s/{session.public_id}/nowhere",
    ]:
        response = alice_client.get(path)
        finish(response)
        assert response.status_code in (200, 404), path
        assert "no-store" in response.get("Cache-Control", ""), path


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/auth/login", "/auth/token", "/auth/login?next=/s/x/"])
def test_the_login_pages_say_no_store(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]


@pytest.mark.django_db
def test_static_files_may_be_cached(alice_client: Client) -> None:
    response = alice_client.get("/static/inspector/app.css")
    finish(response)
    assert response.status_code == 200
    assert "no-store" not in response.get("Cache-Control", "")


# --- how long a login lasts ------------------------------------------------------------------------


def session_age(**env: str) -> str:
    code = (
        "import django; django.setup(); from django.conf import settings; print(settings.SESSION_COOKIE_AGE)"
    )
    return python(code, clean_env(**env)).strip()


@pytest.mark.slow
def test_a_login_lasts_two_weeks_locally_twelve_hours_hosted_or_what_inspector_session_age_says(
    tmp_path: Path,
) -> None:
    folder = {"INSPECTOR_DATA_DIR": str(tmp_path)}
    assert session_age(**folder) == str(14 * 24 * 3600)
    assert session_age(**folder, INSPECTOR_HOSTED="true") == str(12 * 3600)
    assert session_age(**folder, INSPECTOR_HOSTED="true", INSPECTOR_SESSION_AGE="900") == "900"
    assert session_age(**folder, INSPECTOR_SESSION_AGE="86400") == "86400"


@pytest.mark.slow
def test_a_login_that_never_lasts_is_refused(tmp_path: Path) -> None:
    code = "import django; django.setup()"
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean_env(INSPECTOR_DATA_DIR=str(tmp_path), INSPECTOR_SESSION_AGE="0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "INSPECTOR_SESSION_AGE must be more than 0 seconds" in run.stderr
