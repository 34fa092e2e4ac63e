"""OAuth through the HTTP tap: our CLI (``--oauth --oauth-headless``, a host that holds the protected
resource metadata's ``resource`` to the URL it connected to, RFC 9728 §3.3) refuses the server's metadata
through a plain tap, and completes the whole authorization through one with ``--rewrite-resource``. The
token is then issued for the tap's URL: a server that checks the audience refuses it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.oauth import ProtectedServer, oauth_sdk_server
from support.paths import REPO, SERVERS
from support.processes import free_port, start_http_server
from support.tap_app import TAP, records

from inspector.tap import UsageError, parse_args

ANY_AUDIENCE = SERVERS / "oauth_sdk_server_any_audience.py"


@contextlib.contextmanager
def any_audience_server() -> Iterator[ProtectedServer]:
    """The SDK's protected server, taking its authorization server's tokens whatever their resource."""
    port, auth_port = free_port(), free_port()
    argv = [sys.executable, str(ANY_AUDIENCE), "--port", str(port), "--auth-port", str(auth_port)]
    with start_http_server(argv, port, env={"OAUTH_CLIENT_SECRET": "unused-secret"}):
        yield ProtectedServer(
            f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{auth_port}", "unused-secret"
        )


@contextlib.contextmanager
def http_tap(url: str, data_dir: Path, record: Path, *flags: str) -> Iterator[str]:
    port = free_port()
    argv = [*TAP, "--listen", f"127.0.0.1:{port}", *flags, "--name", "oauth", "--record", str(record), url]
    with start_http_server(argv, port, env={"INSPECTOR_DATA_DIR": str(data_dir)}) as tap:
        yield f"http://127.0.0.1:{port}/mcp"
        tap.terminate()
        tap.wait(15)


def whoami(url: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "inspector", "--cli", url, "--transport", "http", "--method", "tools/call"]
    return subprocess.run(
        [*argv, "--tool-name", "whoami", "--oauth", "--oauth-headless"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "INSPECTOR_DATA_DIR": str(data_dir)},
    )


def http_of(frame: dict[str, Any]) -> dict[str, Any]:
    return frame["transport"].get("http") or {}


@pytest.mark.slow
def test_a_host_completes_oauth_through_the_tap_only_with_rewrite_resource(tmp_path: Path) -> None:
    record = tmp_path / "tap.jsonl"
    with any_audience_server() as server:
        with http_tap(server.url, tmp_path / "data", tmp_path / "plain.jsonl") as plain_url:
            refused = whoami(plain_url, tmp_path)
        assert refused.returncode != 0 and "does not name this server" in refused.stderr, refused.stderr
        before = server.counts()
        with http_tap(server.url, tmp_path / "data", record, "--rewrite-resource") as tapped_url:
            done = whoami(tapped_url, tmp_path)
        after = server.counts()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"]["scopes"] == ["mcp:tools", "offline_access"]
    assert after["authorizations"] - before["authorizations"] == 1
    tap_origin = tapped_url.removesuffix("/mcp")
    frames = records(record)
    challenge = next(f for f in frames if http_of(f).get("status") == 401)
    assert challenge["note"] == (
        "the server asks for authorization; the tap gave the host "
        f"resource_metadata={tap_origin}/.well-known/oauth-protected-resource/mcp"
    )
    assert (
        f'resource_metadata="{server.url.removesuffix("/mcp")}/'
        in http_of(challenge)["headers"]["www-authenticate"]
    )  # recorded as the server sent it
    metadata = next(
        f for f in frames if f["kind"] == "http" and f["direction"] == "in" and '"resource"' in f["raw"]
    )
    assert json.loads(metadata["raw"])["resource"] == server.url
    assert metadata["note"] == f"the tap gave the host resource {tapped_url}"
    called = [f for f in frames if f["direction"] == "out" and f["method"] == "tools/call"]
    assert called and http_of(called[0])["headers"]["Authorization"].startswith("Bearer ")
    assert "••" in http_of(called[0])["headers"]["Authorization"]  # the token is masked in the recording


@pytest.mark.slow
def test_a_server_that_checks_the_token_audience_refuses_a_token_for_the_taps_url(tmp_path: Path) -> None:
    with oauth_sdk_server() as server:
        before = server.counts()
        with http_tap(server.url, tmp_path / "data", tmp_path / "tap.jsonl", "--rewrite-resource") as url:
            refused = whoami(url, tmp_path)
        after = server.counts()
    assert refused.returncode != 0 and "401" in refused.stderr, refused.stderr
    assert after["authorizations"] > before["authorizations"]  # the host authorized, for the tap's URL


def test_rewrite_resource_is_an_http_taps_option() -> None:
    options = parse_args(["--listen", "127.0.0.1:8931", "--rewrite-resource", "http://example.com/mcp"])
    assert options.rewrite_resource and options.url == "http://example.com/mcp"
    assert not parse_args(["--listen", "127.0.0.1:8931", "http://example.com/mcp"]).rewrite_resource
    with pytest.raises(UsageError, match="--rewrite-resource goes with --listen"):
        parse_args(["--rewrite-resource", "--", "server"])
