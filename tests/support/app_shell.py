"""Run Python in a live `mcp-inspector`'s own database (its data directory), for a browser test's set-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.browser import LiveApp

ROOT = Path(__file__).resolve().parents[2]
# What the live app drops from the environment (support.browser.live_app), so both read the same settings.
DROPPED = ("INSPECTOR_TOKEN", "DB", "DB_NAME", "SECRET_KEY", "DJANGO_SETTINGS_MODULE")


def app_shell(app: LiveApp, code: str) -> str:
    """Run ``code`` with ``manage.py shell`` on the app's database; return what it printed."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    env["INSPECTOR_DATA_DIR"] = str(app.data_dir)
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "--no-imports", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# The one person of a local-mode app, and their team (made at their first request).
TEAM = "from sessions.teams.models import Membership; team = Membership.objects.get().team\n"
