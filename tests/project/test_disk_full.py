"""A full disk under a running inspector: the page says how many frames are held and lost while it lasts,
the lost ones are a gap in the session once space is freed, and logging in and the home page work.

The data folder is a small tmpfs the test mounts (the tests run as root here and in CI: a refused mount
fails the test, never skips it); a filler file the test makes takes most of it, and a flooding server
fills the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from support.app_process import LOGIN_LINE, inspector
from support.hosted import Watcher, connect, log_in
from support.paths import REPO
from support.processes import free_port

pytestmark = pytest.mark.slow

DISK_MB = 48
LEFT_MB = 3  # what the filler leaves free: the flood fills it within a second
HELD = 3000  # INSPECTOR_MAX_HELD_FRAMES for the app: a flood soon goes past it
FLOOD = 150_000  # notifications the server sends for the one call


@contextlib.contextmanager
def small_disk(where: Path) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"this machine refuses to mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill(disk: Path, leave_mb: int) -> Path:
    """A filler file taking all of ``disk`` but ``leave_mb``."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    with filler.open("wb") as out:
        os.posix_fallocate(out.fileno(), 0, free - leave_mb * 1024 * 1024)
    return filler


def banners(watcher: Watcher) -> list[tuple[int, int]]:
    """The held and lost counts of every storage banner the page was sent, in order."""
    pattern = re.compile(r"Storage failing \(disk full\): (\d+) frames? held in memory, (\d+) lost")
    return [(int(h), int(lo)) for message in watcher.seen for h, lo in pattern.findall(message)]


def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.1)


def flood(browser: httpx.Client, headers: dict[str, str], page: str) -> None:
    """Ask for the flood; its answer comes after it, and nobody waits for it here."""
    arguments = {"name": "t", "arguments": {"count": FLOOD}}
    call = {"method": "tools/call", "params": json.dumps(arguments)}
    with contextlib.suppress(httpx.TimeoutException):
        browser.post(f"{page}request", data=call, headers=headers, timeout=2)


def gaps(database: Path, public_id: str) -> list[int]:
    """How many frames each not-stored gap of the session stands for (read from the SQLite file)."""
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as db:
        notes = db.execute(
            "SELECT f.note FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s"
            " ON f.session_id = s.id WHERE s.public_id = ? AND f.note LIKE '%frames not stored%'",
            [public_id.replace("-", "")],
        ).fetchall()
    found = (re.match(r"(\d+) frames not stored \(disk full\): seq \d+", note) for (note,) in notes)
    return [int(match[1]) for match in found if match]


def test_a_full_disk_shows_frames_held_and_lost_live_records_the_gap_and_lets_people_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INSPECTOR_MAX_HELD_FRAMES", str(HELD))
    server = {"command": sys.executable, "args": [str(REPO / "tests/servers/bad_stdio.py"), "flood"]}
    with small_disk(tmp_path / "disk") as disk:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        app = inspector("--port", str(port), data_dir=disk / "data")
        with app as (_proc, output), httpx.Client(base_url=base, timeout=30) as browser:
            headers = log_in(browser, output.wait_for(LOGIN_LINE)["token"])
            page = connect(browser, headers, server)
            public_id = page.strip("/").split("/")[-1]
            watcher = Watcher(base, browser, f"/ws/sessions/{public_id}/")
            try:
                filler = fill(disk, LEFT_MB)
                flood(browser, headers, page)
                # Live, while it lasts: frames held (at most the bound and a gap's marker), and lost.
                wait(lambda: any(lost for _, lost in banners(watcher)), 60, "a banner with lost frames")
                seen = banners(watcher)
                assert all(held <= HELD + 1 for held, _ in seen), seen
                # However fast the flood ends, the lost count only ever grows while the disk is full.
                assert [lost for _, lost in seen] == sorted(lost for _, lost in seen), seen
                # Meanwhile the home page and the login page work (a refused write: test_full_disk.py).
                assert browser.get("/").status_code == 200
                assert browser.get("/auth/login").status_code == 200

                filler.unlink()  # space again: what was held is stored, then the gap, and the banner goes
                watcher.wait_for('<div id="storage-status" hx-swap-oob="true"></div>', 60)
            finally:
                watcher.close()
            assert browser.get(page).status_code == 200
        counts = gaps(disk / "data" / "inspector.sqlite3", public_id)
    assert counts, "no not-stored gap in the session"
    assert sum(counts) >= max(lost for _, lost in banners(watcher))


def test_starting_on_a_full_disk_stops_with_a_message_that_says_so_not_a_traceback(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        data = disk / "data"
        for first_run in (False, True):  # a data folder made before, and none yet (no keys to write)
            if not first_run:
                with inspector("--port", str(free_port()), data_dir=data) as (_proc, output):
                    output.wait_for(LOGIN_LINE)
                filler = fill(disk, 0)
            else:
                subprocess.run(["rm", "-rf", str(data)], check=True)
            env = {k: v for k, v in os.environ.items() if k not in ("DB", "DB_NAME", "SECRET_KEY")}
            started = subprocess.run(
                [sys.executable, "-m", "inspector", "--no-browser", "--port", str(free_port())],
                env={**env, "INSPECTOR_DATA_DIR": str(data)},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert started.returncode == 1, started
            assert "Traceback" not in started.stderr, started.stderr
            assert f"the disk of {data} is full" in started.stderr, started.stderr
        filler.unlink()
