"""`mcp-inspector` as a real process: first run, the printed login URL, the login flow, the bind guard."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.app_process import LOGIN_LINE, MCP_INSPECTOR, inspector
from support.paths import REPO
from support.processes import free_port

pytestmark = pytest.mark.slow


def test_first_run_creates_the_database_prints_a_login_url_and_the_token_logs_in_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    # Port 0: the system chooses, and what is printed is the port it chose.
    with inspector("--port", "0", data_dir=data_dir) as (proc, output):
        login = output.wait_for(LOGIN_LINE)
        url, token = login["url"], login["token"]
        found = re.match(r"http://127\.0\.0\.1:(\d+)/auth/token\?token=", url)
        assert found is not None and found[1] != "0", url
        port = int(found[1])
        assert (data_dir / "inspector.sqlite3").is_file()

        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as browser:
            assert browser.get("/").status_code == 302

            page = browser.get(url)
            assert page.status_code == 200
            assert page.headers["referrer-policy"] == "strict-origin"
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf is not None

            logged_in = browser.post(
                "/auth/token", data={"token": token, "csrfmiddlewaretoken": csrf[1], "next": ""}
            )
            assert logged_in.status_code == 302
            assert logged_in.headers["location"] == "/"
            assert "mcp_inspector_session" in browser.cookies

            home = browser.get("/")
            assert home.status_code == 200
            assert "MCP Inspector" in home.text

        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as intruder:
            page = intruder.get(url)
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf is not None
            again = intruder.post("/auth/token", data={"token": token, "csrfmiddlewaretoken": csrf[1]})
            assert again.status_code == 403

        proc.terminate()
        assert proc.wait(timeout=10) == 0

    text = output.text
    # The access log ran (LOG_LEVEL=INFO) and saw the token page, without its query string.
    assert "GET /auth/token?[redacted] 200" in text, text
    assert text.count(token) == 1, f"the token appears outside the login line:\n{text}"


def test_a_restart_uses_the_existing_database(tmp_path: Path) -> None:
    for _ in range(2):
        with inspector("--port", str(free_port()), data_dir=tmp_path) as (proc, output):
            output.wait_for(LOGIN_LINE)
            proc.terminate()
            assert proc.wait(timeout=10) == 0


def test_a_non_loopback_bind_without_allow_remote_exits_2(tmp_path: Path) -> None:
    result = subprocess.run(
        [MCP_INSPECTOR, "--no-browser", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "INSPECTOR_DATA_DIR": str(tmp_path)},
    )
    assert result.returncode == 2
    assert "--allow-remote" in result.stderr
    assert not (tmp_path / "inspector.sqlite3").exists()


def test_a_non_loopback_bind_with_allow_remote_warns_and_serves(tmp_path: Path) -> None:
    port = free_port()
    with inspector("--host", "0.0.0.0", "--allow-remote", "--port", str(port), data_dir=tmp_path) as (
        proc,
        output,
    ):
        output.wait_for(re.compile(r"WARNING: listening on 0\.0\.0\.0"))
        login = output.wait_for(LOGIN_LINE)
        assert login["url"].startswith(f"http://127.0.0.1:{port}/")
        proc.terminate()
        assert proc.wait(timeout=10) == 0


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (tests/run installs it)")
def test_a_browser_opening_the_login_url_lands_logged_in_on_home_without_the_token(tmp_path: Path) -> None:
    from playwright.sync_api import ConsoleMessage, Response, sync_playwright

    port = free_port()
    with inspector("--port", str(port), data_dir=tmp_path) as (proc, output):
        login = output.wait_for(LOGIN_LINE)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
            try:
                page = browser.new_page()
                problems: list[str] = []

                def on_console(message: ConsoleMessage) -> None:
                    if "Content Security Policy" in message.text:
                        problems.append(message.text)

                def on_response(response: Response) -> None:
                    if response.status >= 400 and not response.url.endswith("/favicon.ico"):
                        problems.append(f"{response.status} {response.url}")

                page.on("console", on_console)
                page.on("response", on_response)
                page.goto(login["url"])
                page.wait_for_url(f"http://127.0.0.1:{port}/", timeout=10_000)
                assert "MCP Inspector" in page.content()
                assert login["token"] not in page.url
                # The token page's script took the token out of history too.
                page.go_back()
                assert login["token"] not in page.url
                assert problems == []
            finally:
                browser.close()
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    assert output.text.count(login["token"]) == 1


def test_version_prints_the_installed_version() -> None:
    result = subprocess.run([MCP_INSPECTOR, "--version"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert re.fullmatch(r"mcp-inspector \d+\.\d+\.\S+\n", result.stdout), result.stdout


def test_an_install_without_templates_and_static_files_refuses_to_start(tmp_path: Path) -> None:
    import shutil

    # The code alone, as a wheel built without them would install it.
    broken, checkout = tmp_path / "site", REPO
    for package in ("inspector", "sessions"):
        shutil.copytree(checkout / package, broken / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("DB", "DB_NAME", "STATIC_ROOT")}
    env |= {"PYTHONPATH": str(broken), "INSPECTOR_DATA_DIR": str(tmp_path / "data")}
    result = subprocess.run(
        [sys.executable, "-m", "inspector", "--no-browser", "--port", str(free_port())],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "mcp-inspector cannot start" in result.stderr
    assert f"templates not found in {broken / 'templates'}: auth/token.html" in result.stderr
    assert f"static files not found in {broken / 'static'}: inspector/app.css" in result.stderr
    # It stopped before serving or creating the database.
    assert "Open this URL" not in result.stdout
    assert not (tmp_path / "data" / "inspector.sqlite3").exists()
