"""The project skeleton: pages, headers, settings helpers, websockets and the entry point."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import anyio
import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from support.paths import REPO
from support.processes import run_pytest
from support.web import finish

import inspector
from inspector.__main__ import is_loopback, main
from inspector.asgi import application
from sessions.env import envbool, envint, envsecret, envstr, stored_secret_key


@pytest.fixture
def alice_client(client: Client, django_user_model: type[User]) -> Client:
    """A client logged in as alice."""
    client.force_login(django_user_model.objects.create_user("alice"))
    return client


@pytest.mark.django_db
def test_home_page_renders(alice_client: Client) -> None:
    response = alice_client.get("/")
    assert response.status_code == 200
    assert b"MCP Inspector" in response.content
    # htmx comes from our own static files, never a CDN.
    assert b'src="/static/django_htmx/htmx-2.min.js"' in response.content
    assert b"/static/inspector/app.css" in response.content


# django_db: finishing a response closes stale DB connections, and earlier tests opened one.
@pytest.mark.django_db
def test_home_page_static_files_are_served(client: Client) -> None:
    for url in ("/static/inspector/app.css", "/static/django_htmx/htmx-2.min.js"):
        response = client.get(url)
        assert response.status_code == 200, url
        finish(response)


def test_healthz_is_ok(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok"
    assert response["Content-Type"].startswith("text/plain")


@pytest.mark.django_db
def test_it_rejects_post_on_home(alice_client: Client) -> None:
    assert alice_client.post("/").status_code == 405


def test_unknown_host_is_rejected(client: Client) -> None:
    assert client.get("/", HTTP_HOST="evil.example").status_code == 400


@pytest.mark.django_db
def test_csp_header_is_set(alice_client: Client) -> None:
    response = alice_client.get("/")
    assert "default-src 'self'" in response["Content-Security-Policy"]
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"


def test_settings_helpers_reject_bad_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("T_BOOL", "maybe")
    with pytest.raises(ImproperlyConfigured, match="T_BOOL"):
        envbool("T_BOOL", False)

    monkeypatch.setenv("T_INT", "12abc")
    with pytest.raises(ImproperlyConfigured, match="T_INT"):
        envint("T_INT", 1)

    monkeypatch.setenv("T_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="T_SECRET_FILE"):
        envsecret("T_SECRET")

    monkeypatch.setenv("T_SECRET", "inline")
    with pytest.raises(ImproperlyConfigured, match="not both"):
        envsecret("T_SECRET")


def test_settings_helpers_read_values_and_fall_back_to_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("T_BOOL", "T_INT", "T_STR", "T_SECRET", "T_SECRET_FILE"):
        monkeypatch.delenv(name, raising=False)
    assert envbool("T_BOOL", True) is True
    assert envint("T_INT", 7) == 7
    assert envstr("T_STR", "fallback") == "fallback"
    assert envsecret("T_SECRET", "dflt") == "dflt"

    monkeypatch.setenv("T_BOOL", "Off")
    monkeypatch.setenv("T_INT", " 42 ")
    monkeypatch.setenv("T_STR", "value")
    assert envbool("T_BOOL", True) is False
    assert envint("T_INT", 7) == 42
    assert envstr("T_STR", "fallback") == "value"

    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("T_SECRET_FILE", str(secret))
    assert envsecret("T_SECRET") == "s3cret"


def test_secret_key_is_generated_once_and_kept_private(tmp_path: Path) -> None:
    path = tmp_path / "secret_key"
    first = stored_secret_key(path)
    assert len(first) >= 50
    assert stored_secret_key(path) == first
    assert path.stat().st_mode & 0o077 == 0


# The websocket stack closes stale database connections on every message.
@pytest.mark.django_db(transaction=True)
async def test_websocket_health_accepts_allowed_origin_and_rejects_foreign_origin() -> None:
    with anyio.fail_after(5):
        ours = [(b"origin", b"http://127.0.0.1:6274"), (b"host", b"127.0.0.1:6274")]
        allowed = WebsocketCommunicator(application, "/ws/health/", headers=ours)
        connected, _ = await allowed.connect()
        assert connected
        assert await allowed.receive_json_from() == {"ok": True}
        await allowed.disconnect()

        theirs = [(b"origin", b"http://evil.example"), (b"host", b"127.0.0.1:6274")]
        foreign = WebsocketCommunicator(application, "/ws/health/", headers=theirs)
        connected, _ = await foreign.connect()
        assert not connected
        await foreign.disconnect()


def test_loopback_hosts_are_recognised() -> None:
    assert is_loopback("127.0.0.1")
    assert is_loopback("localhost")
    assert is_loopback("::1")
    assert is_loopback("[::1]")
    assert not is_loopback("0.0.0.0")
    assert not is_loopback("192.168.1.10")
    assert not is_loopback("example.com")


def test_it_refuses_a_non_loopback_bind_without_allow_remote(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc_info:
        main(["--host", "0.0.0.0", "--no-browser"])
    assert exc_info.value.code == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_cli_flag_hands_the_full_argument_list_to_the_cli_module(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[list[str]] = []

    def fake_main(argv: list[str]) -> int:
        received.append(argv)
        return 3

    fake_cli = types.ModuleType("inspector.cli")
    fake_cli.main = fake_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "inspector.cli", fake_cli)
    monkeypatch.setattr(inspector, "cli", fake_cli, raising=False)

    assert main(["--cli", "python server.py", "--method", "tools/list"]) == 3
    assert received == [["--cli", "python server.py", "--method", "tools/list"]]


@pytest.mark.slow
def test_cli_path_does_not_import_django() -> None:
    code = "import sys, inspector.__main__; sys.exit('django' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr or "django was imported"


def test_the_tests_settings_were_read_outside_the_users_data_folder() -> None:
    # Its keys would be read or made there, and a live runtime's tap ingester would take in the user's spools.
    import inspector.settings
    from inspector.paths import user_data_dir

    users = (user_data_dir() / "mcp-inspector").resolve()
    assert not inspector.settings.DATA_DIR.resolve().is_relative_to(users), inspector.settings.DATA_DIR


@pytest.mark.slow
def test_a_lone_pytest_process_leaves_the_users_data_folder_alone(tmp_path: Path) -> None:
    # xdist's workers inherit the run's folder from their parent: a lone process must not use the user's.
    env = {k: v for k, v in os.environ.items() if k not in ("INSPECTOR_DATA_DIR", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path)
    inner = "tests/project/test_project.py::test_the_tests_settings_were_read_outside_the_users_data_folder"
    assert "1 passed" in run_pytest("-p", "no:xdist", inner, env=env, timeout=120)
    assert not (tmp_path / ".local/share/mcp-inspector").exists()
