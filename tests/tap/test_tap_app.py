"""A tap's frames in the running inspector: live while the host talks, and all of them when the
inspector starts after the tap has ended."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.app_process import MCP_INSPECTOR
from support.processes import free_port, start_http_server
from support.tap_app import TAP, TOKEN, app_env, env_for, wait_for
from websockets.sync.client import connect

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def inspector(data_dir: Path) -> Iterator[dict[str, Any]]:
    """The inspector on ``data_dir``, and a browser logged in to it (a real token login)."""
    port = free_port()
    with start_http_server([MCP_INSPECTOR, "--no-browser", "--port", str(port)], port, env=app_env(data_dir)):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=20) as browser:
            page = browser.get("/auth/token", params={"token": TOKEN})
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf, page.text[:500]
            login = browser.post(
                "/auth/token", data={"token": TOKEN, "csrfmiddlewaretoken": csrf[1]}, headers={"Origin": base}
            )
            assert login.status_code == 302
            yield {"port": port, "base": base, "browser": browser}


def session_id(app: dict[str, Any], name: str) -> str | None:
    home = app["browser"].get("/").text
    found = re.search(rf'href="/s/([0-9a-f-]+)/"[^>]*>\s*{re.escape(name)}\s*<', home)
    return found[1] if found else None


def exported(app: dict[str, Any], public_id: str) -> list[dict[str, Any]]:
    text = app["browser"].get(f"/s/{public_id}/export", params={"redacted": "0"}).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def same_frames(stored: list[dict[str, Any]], recorded: list[dict[str, Any]]) -> None:
    assert [(f["seq"], f["kind"], f["direction"], f["raw"]) for f in stored] == [
        (f["seq"], f["kind"], f["direction"], f["raw"]) for f in recorded
    ]


def send(host: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any] | None:
    """Write one message as a host does; read the answer when it is a request (notifications skipped)."""
    assert host.stdin is not None and host.stdout is not None
    host.stdin.write(json.dumps(message).encode() + b"\n")
    host.stdin.flush()
    if "id" not in message:
        return None
    while True:
        answer = json.loads(host.stdout.readline())
        if answer.get("id") == message["id"]:
            return answer


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-host", "version": "1"},
    },
}


def test_a_tap_session_is_live_in_the_inspector_with_every_frame_of_both_directions(
    tmp_path: Path, everything_stdio: dict
) -> None:
    record = tmp_path / "frames.jsonl"
    with inspector(tmp_path / "data") as app:
        host = subprocess.Popen(
            [
                *TAP,
                "--name",
                "tap-live",
                "--record",
                str(record),
                "--",
                everything_stdio["command"],
                *everything_stdio["args"],
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env_for(tmp_path / "data"),
        )
        try:
            assert send(host, INITIALIZE)["result"]["serverInfo"]  # type: ignore[index]
            send(host, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            public_id = wait_for(lambda: session_id(app, "tap-live"), what="the tap session on the home page")
            page = app["browser"].get(f"/s/{public_id}/").text
            assert "Send any request" not in page and ">tap<" in page  # the host drives it, not us
            with connect(
                f"ws://127.0.0.1:{app['port']}/ws/sessions/{public_id}/",
                origin=f"http://127.0.0.1:{app['port']}",  # type: ignore[arg-type]
                additional_headers={
                    "Cookie": f"mcp_inspector_session={app['browser'].cookies['mcp_inspector_session']}"
                },
                proxy=None,
                open_timeout=10,
            ) as socket:
                socket.recv(timeout=10)  # what the page has so far
                sent_at = time.monotonic()
                call = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": "live-marker"}},
                }
                assert send(host, call)["result"]["content"][0]["text"] == "Echo: live-marker"  # type: ignore[index]
                received = ""
                while "live-marker" not in received:
                    message = socket.recv(timeout=max(0.0, sent_at + 10 - time.monotonic()))
                    received += message if isinstance(message, str) else message.decode()
                # The host is still connected: the row came while the session is live.
                assert host.poll() is None
        finally:
            assert host.stdin is not None and host.stdout is not None
            host.stdin.close()
            host.wait(15)
            host.stdout.close()
        wait_for(lambda: "closed" in app["browser"].get(f"/s/{public_id}/").text, what="the session ending")
        stored = exported(app, public_id)
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    same_frames(stored, recorded)
    methods = [(f["direction"], f["method"]) for f in stored if f["kind"] == "message"]
    assert ("out", "tools/call") in methods and ("in", "tools/call") in methods
    assert not list((tmp_path / "data" / "taps").iterdir())  # every frame stored: the spool is gone


def test_frames_a_tap_left_while_the_inspector_was_away_appear_when_it_starts(
    tmp_path: Path, everything_stdio: dict
) -> None:
    data, record = tmp_path / "data", tmp_path / "frames.jsonl"
    done = subprocess.run(
        [
            sys.executable, "-m", "inspector", "--cli", "--method", "tools/call", "--tool-name", "echo",
            "--tool-arg", "message=offline", "--",
            *TAP, "--name", "tap-offline", "--record", str(record), "--",
            everything_stdio["command"], *everything_stdio["args"],
        ],
        capture_output=True,
        env=env_for(data),
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(list((data / "taps").iterdir())) == 1
    with inspector(data) as app:
        public_id = wait_for(lambda: session_id(app, "tap-offline"), what="the tap session on the home page")
        wait_for(lambda: not list((data / "taps").iterdir()), what="the spool taken in")
        stored = exported(app, public_id)
    same_frames(stored, [json.loads(line) for line in record.read_text().splitlines()])


def test_a_tap_is_taken_in_while_nobody_has_opened_a_page(tmp_path: Path, everything_stdio: dict) -> None:
    from support.app_process import LOGIN_LINE
    from support.app_process import inspector as bare_inspector

    data = tmp_path / "data"
    # No request reaches the app: only its start, then a host through a tap.
    with bare_inspector("--port", str(free_port()), data_dir=data) as (_proc, output):
        output.wait_for(LOGIN_LINE)
        done = subprocess.run(
            [
                sys.executable, "-m", "inspector", "--cli", "--method", "tools/list", "--",
                *TAP, "--name", "tap-unwatched", "--", everything_stdio["command"], *everything_stdio["args"],
            ],
            capture_output=True,
            env=env_for(data),
            timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_for(lambda: not list((data / "taps").iterdir()), what="the spool taken in with no page open")
    with sqlite3.connect(f"file:{data / 'inspector.sqlite3'}?mode=ro", uri=True) as db:
        [(frames,)] = db.execute(
            "SELECT COUNT(*) FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s"
            " ON f.session_id = s.id WHERE s.name = 'tap-unwatched'"
        ).fetchall()
    assert frames > 5
