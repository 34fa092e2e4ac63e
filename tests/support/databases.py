"""Databases migrated once per set of migrations and copied for each test that needs a fresh one:
``manage.py migrate`` costs seconds of CPU, a copy next to nothing. The tests of a first run itself
(tests/project/test_startup.py) start on an empty folder and migrate as a person's first run does."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from support.paths import REPO

SQLITE_NAME = "inspector.sqlite3"


def migrations_digest() -> str:
    """Names the schema the migrations make: a template made from other migrations is not used."""
    files = sorted((REPO / "sessions").glob("**/migrations/0*.py"))
    return hashlib.sha256(b"".join(path.read_bytes() for path in files)).hexdigest()[:12]


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One test process at a time (pytest-xdist runs several) makes a template."""
    with open(Path(tempfile.gettempdir()) / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def once(name: str, exists: Callable[[], bool], make: Callable[[], None]) -> None:
    with _locked(name):
        if not exists():
            make()


def _sqlite_template() -> Path:
    template = Path(tempfile.gettempdir()) / f"mcp-inspector-template-{migrations_digest()}.sqlite3"

    def make() -> None:
        building = template.with_suffix(".building")
        building.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("DB", "DB_NAME", "SECRET_KEY")}
        with tempfile.TemporaryDirectory() as data:
            env |= {"INSPECTOR_DATA_DIR": data, "DB_NAME": str(building)}
            argv = [sys.executable, "manage.py", "migrate", "-v", "0"]
            subprocess.run(argv, cwd=REPO, env=env, check=True, timeout=120)
        building.rename(template)  # whole or not at all: a half-made template is never copied

    once(template.name, template.exists, make)
    return template


def migrated_data_dir(data_dir: Path) -> Path:
    """``data_dir`` made (0700, as the app makes it) with a migrated database in it, unless it has one."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    database = data_dir / SQLITE_NAME
    if not database.exists():
        shutil.copyfile(_sqlite_template(), database)
        database.chmod(0o600)
    return data_dir
