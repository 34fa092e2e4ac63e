"""An HTTP tap's frames in the running inspector: the session holds every frame of both directions, in
the order the tap recorded them, and ends when the tap stops."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.app_process import MCP_INSPECTOR
from support.cli import run_cli
from support.processes import free_port, start_http_server
from support.tap_app import TOKEN, app_env, env_for, wait_for

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def inspector(data_dir: Path) -> Iterator[httpx.Client]:
    """The inspector on ``data_dir``, and a browser logged in to it with the token."""
    port = free_port()
    with start_http_server([MCP_INSPECTOR, "--no-browser", "--port", str(port)], port, env=app_env(data_dir)):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=20) as browser:
            page = browser.get("/auth/token", params={"token": TOKEN})
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf, page.text[:500]
            form = {"token": TOKEN, "csrfmiddlewaretoken": csrf[1]}
            assert browser.post("/auth/token", data=form, headers={"Origin": base}).status_code == 302
            yield browser


def session_id(browser: httpx.Client, name: str) -> str | None:
    found = re.search(rf'href="/s/([0-9a-f-]+)/"[^>]*>\s*{re.escape(name)}\s*<', browser.get("/").text)
    return found[1] if found else None


def test_an_http_tap_session_holds_every_frame_of_both_directions_in_order(
    tmp_path: Path, everything_http: str
) -> None:
    data, record, port = tmp_path / "data", tmp_path / "tap.jsonl", free_port()
    argv = [sys.executable, "-m", "inspector", "tap", "--listen", f"127.0.0.1:{port}", "--name", "web-tap"]
    with inspector(data) as browser:
        with start_http_server(
            [*argv, "--record", str(record), everything_http], port, env=env_for(data)
        ) as tap:
            tapped = run_cli(
                "--cli", f"http://127.0.0.1:{port}/mcp", "--method", "tools/call", "--tool-name", "echo",
                "--tool-arg", "message=in-the-app",
            )  # fmt: skip
            assert tapped.returncode == 0, tapped.stderr
            public_id = wait_for(
                lambda: session_id(browser, "web-tap"), what="the tap session on the home page"
            )
            tap.terminate()
            tap.wait(15)
        wait_for(lambda: "closed" in browser.get(f"/s/{public_id}/").text, what="the session ending")
        text = browser.get(f"/s/{public_id}/export", params={"redacted": "0"}).text
    stored = [json.loads(line) for line in text.splitlines() if line.strip()]
    recorded = [json.loads(line) for line in record.read_text().splitlines()]
    assert [(f["seq"], f["kind"], f["direction"], f["raw"]) for f in stored] == [
        (f["seq"], f["kind"], f["direction"], f["raw"]) for f in recorded
    ]
    methods = [(f["direction"], f["method"]) for f in stored if f["kind"] == "message"]
    assert ("out", "tools/call") in methods and ("in", "tools/call") in methods
    assert any("in-the-app" in f["raw"] for f in stored if f["direction"] == "in")
    assert not list((data / "taps").iterdir())  # every frame stored: the spool is gone
