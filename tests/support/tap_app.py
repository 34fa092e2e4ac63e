"""The inspector as a real process for the tap's tests, a browser logged in to it, and reading a tap's
session back from it (found by name on the home page, its frames through the JSON Lines export)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.app_process import MCP_INSPECTOR
from support.databases import migrated_data_dir
from support.processes import free_port, start_http_server

__all__ = ["TAP", "App", "env_for", "records", "running_app", "wait_for"]

TOKEN = "tap-app-test-token"
TAP = [sys.executable, "-m", "inspector", "tap"]


def env_for(data_dir: Path) -> dict[str, str]:
    """This process's environment for a process of the app or a tap on ``data_dir``."""
    drop = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"INSPECTOR_DATA_DIR": str(data_dir), "INSPECTOR_TOKEN": TOKEN}


def app_env(data_dir: Path) -> dict[str, str]:
    """``env_for`` the app itself, its data folder holding a migrated database (``support.databases``)."""
    return env_for(migrated_data_dir(data_dir))


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "the condition") -> Any:
    """Poll ``condition`` (a page the app serves, a file) until it is truthy or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)
    return value


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass
class App:
    port: int
    data: Path
    browser: httpx.Client

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def session_id(self, name: str) -> str | None:
        home = self.browser.get("/").text
        found = re.search(rf'href="/s/([0-9a-f-]+)/"[^>]*>\s*{re.escape(name)}\s*<', home)
        return found[1] if found else None

    def ended_session(self, name: str) -> str:
        """The public id of the tap session ``name``, once the app has stored its end."""
        public_id: str = wait_for(lambda: self.session_id(name), what=f"the session {name} on the home page")
        wait_for(
            lambda: "closed" in self.browser.get(f"/s/{public_id}/").text, what=f"the session {name} ending"
        )
        return public_id

    def frames(self, public_id: str) -> list[dict[str, Any]]:
        """Every stored frame of the session, as recorded (the unredacted JSON Lines export)."""
        text = self.browser.get(f"/s/{public_id}/export", params={"redacted": "0"}).text
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@contextlib.contextmanager
def running_app(data_dir: Path) -> Iterator[App]:
    """The inspector on ``data_dir``, and a browser logged in to it (a real token login)."""
    port = free_port()
    with start_http_server([MCP_INSPECTOR, "--no-browser", "--port", str(port)], port, env=app_env(data_dir)):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=20) as browser:
            page = browser.get("/auth/token", params={"token": TOKEN})
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf, page.text[:500]
            form = {"token": TOKEN, "csrfmiddlewaretoken": csrf[1]}
            assert browser.post("/auth/token", data=form, headers={"Origin": base}).status_code == 302
            yield App(port, data_dir, browser)
