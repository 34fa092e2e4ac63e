"""``--oauth`` in the one-shot CLI, run as a real process against the protected server built with the
`mcp` Python SDK (tests/servers/oauth_sdk_server.py): headless authorization, and the token cache."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.oauth import ProtectedServer, oauth_sdk_server
from support.paths import REPO

TIMEOUT = 30

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[ProtectedServer]:
    with oauth_sdk_server() as running:
        yield running


def run_cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m inspector --cli ARGS`` with its own data folder (where --oauth-cache keeps tokens)."""
    return subprocess.run(
        [sys.executable, "-m", "inspector", "--cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "INSPECTOR_DATA_DIR": str(data_dir)},
    )


def whoami(server: ProtectedServer, data_dir: Path, *options: str) -> Any:
    proc = run_cli(
        data_dir,
        server.url,
        "--transport",
        "http",
        "--method",
        "tools/call",
        "--tool-name",
        "whoami",
        *options,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["structuredContent"]


def test_oauth_headless_authorizes_and_calls_the_tool(server: ProtectedServer, tmp_path: Path) -> None:
    before = server.counts()
    me = whoami(server, tmp_path, "--oauth", "--oauth-headless")
    after = server.counts()
    assert me["scopes"] == ["mcp:tools", "offline_access"]
    assert after["authorizations"] - before["authorizations"] == 1
    assert after["registrations"] - before["registrations"] == 1
    assert not (tmp_path / "oauth-tokens.json").exists()  # nothing kept without --oauth-cache


def test_oauth_cache_reuses_the_token_on_a_second_run(server: ProtectedServer, tmp_path: Path) -> None:
    first = whoami(server, tmp_path, "--oauth", "--oauth-headless", "--oauth-cache")
    cache = tmp_path / "oauth-tokens.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    before = server.counts()
    second = whoami(server, tmp_path, "--oauth", "--oauth-headless", "--oauth-cache")
    assert second["serial"] == first["serial"]
    assert server.counts() == before  # no registration, no authorization, no token request


def test_a_pre_registered_client_from_a_config_file(server: ProtectedServer, tmp_path: Path) -> None:
    config = tmp_path / "client.json"
    config.write_text(json.dumps({"client_id": "test-client", "client_secret": server.client_secret}))
    before = server.counts()
    me = whoami(server, tmp_path, "--oauth-headless", "--oauth-config", str(config))
    assert me["serial"]
    after = server.counts()
    assert after["registrations"] == before["registrations"]
    assert after["authorization_code"] - before["authorization_code"] == 1


def test_without_oauth_the_401_is_one_error_line(server: ProtectedServer, tmp_path: Path) -> None:
    proc = run_cli(tmp_path, server.url, "--transport", "http", "--method", "tools/list")
    assert proc.returncode != 0 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: ") and "401" in line and "Traceback" not in proc.stderr
    assert line.endswith("(the server asks for authorization: add --oauth)")


def test_the_token_cache_folder_is_kept_the_owners_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inspector.cli.oauth import _cache_path

    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    monkeypatch.setenv("INSPECTOR_DATA_DIR", str(folder))
    assert _cache_path() == folder / "oauth-tokens.json"
    assert folder.stat().st_mode & 0o777 == 0o700  # as the app's data folder is (inspector.paths)
