"""Hosted, two engine workers: a catalog server that tries to read the workers' secrets gets nothing.

tests/servers/snoop.py tries /proc/<pid>/environ for every pid it can see and for the workers' pids,
the workers' working folders and the secret files there, the data folder and another session's
directory, and answers with all it read.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from support.hosted import engine_worker, hosted_env, manage, password_login, prepare, psql, web_process
from support.paths import SERVERS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]

REDIS_DB = 9  # test_hosted.py uses 12 to 14, test_oauth_hosted.py 11, test_together.py 10
NOBODY = 65534


def _result(database: str, public_id: str, timeout: float = 60) -> dict[str, Any]:
    """The snoop tool's answer in the session's recorded frames."""
    query = (
        "SELECT convert_from(f.raw, 'UTF8') FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s "
        f"ON s.id = f.session_id WHERE s.public_id = '{public_id}' AND f.direction = 'in' "
        "AND f.rpc_kind = 'result' ORDER BY f.seq"
    )
    deadline = time.monotonic() + timeout
    while True:
        for (raw,) in psql(database, query):
            result = json.loads(raw)["result"]
            if "content" in result:
                found: dict[str, Any] = json.loads(result["content"][0]["text"])
                return found
        assert time.monotonic() < deadline, "the snoop never answered"
        time.sleep(0.2)


def _wait_ready(database: str, public_id: str, timeout: float = 60) -> None:
    query = f"SELECT status, status_note FROM mcp_sessions_mcpsession WHERE public_id = '{public_id}'"
    deadline = time.monotonic() + timeout
    while (row := psql(database, query)[0])[0] != "ready":
        assert row[0] not in ("failed", "closed", "lost"), row
        assert time.monotonic() < deadline, row
        time.sleep(0.2)


def test_a_catalog_server_reads_nothing_of_the_workers_the_data_folder_or_another_session(
    hosted_database: str, tmp_path: Path
) -> None:
    python = shutil.which("python3", path="/usr/bin:/bin")
    assert python, "the snoop runs on the system's Python (stdlib only), which the sandbox shows"
    secrets = {
        "SECRET_KEY": "snoop-django-secret-key-5b0f",
        "DB_PASSWORD": "snoop-db-password-9d2a",  # trust authentication here: never asked for
        "INSPECTOR_LLM_API_KEY": "sk-snoop-llm-key-61c3",
        "INSPECTOR_SECRET_KEYS": Fernet.generate_key().decode(),
    }
    data = tmp_path / "data"
    env = hosted_env(
        hosted_database,
        REDIS_DB,
        INSPECTOR_DATA_DIR=str(data),
        INSPECTOR_HOSTED="true",
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_SANDBOX_READ=str(SERVERS),
        **secrets,
    )
    prepare(env, REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    seed = (
        "from sessions.teams.models import CatalogServer, Team\n"
        "team = Team.objects.get(name='Team A')\n"
        f"entry = CatalogServer.objects.create(team=team, name='snoop', command={python!r},"
        f" args=[{str(SERVERS / 'snoop.py')!r}])\n"
        "print(entry.pk)\n"
    )
    entry = manage(env, "shell", "-c", seed).strip().splitlines()[-1]
    folders = []
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "secrets.env").write_text(f"DB_PASSWORD=file-secret-of-{name}-worker\n")
        folders.append(folder)
    with (
        engine_worker(env, cwd=folders[0]) as first,
        engine_worker(env, cwd=folders[1]) as second,
        web_process(env) as web,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as alice,
    ):
        headers = password_login(alice, "alice", "alice-long-password-1")
        reports = []
        for _ in range(2):
            started = alice.post(f"/catalog/{entry}/connect", headers=headers)
            assert started.status_code == 302, started.text[:1000]
            session_url = started.headers["location"]
            public_id = session_url.strip("/").split("/")[-1]
            _wait_ready(hosted_database, public_id)
            other_home = reports[0]["me"]["home"] if reports else "/nonexistent"
            paths = [str(data), *map(str, folders), *(str(f / "secrets.env") for f in folders), other_home]
            arguments = {"paths": [*paths, f"{other_home}/note"], "pids": [first.pid, second.pid, 1]}
            call = alice.post(
                session_url + "request",
                data={
                    "method": "tools/call",
                    "params": json.dumps({"name": "snoop", "arguments": arguments}),
                },
                headers=headers,
            )
            assert call.status_code == 200, call.text[:1000]
            reports.append(_result(hosted_database, public_id))
    first_report, second = reports
    everything = json.dumps(reports)
    for name, value in secrets.items():
        assert value not in everything, f"{name} reached a catalog server"
    assert "file-secret-of" not in everything and "the note of server" not in everything
    assert env["REDIS_URL"] not in everything and hosted_database not in everything
    # Each in its own sandbox: its own processes only, its own fresh directory, not the other's.
    for report in reports:
        assert report["visible_pids"] == [1, report["me"]["pid"]]
        assert report["me"]["cwd"] == report["me"]["home"] and report["me"]["home"].startswith(
            "/tmp/mcp-server-"
        )
        if os.geteuid() == 0:
            assert report["me"]["uid"] == NOBODY
        for path in (str(data), *map(str, folders)):
            assert report["paths"][path] == {"file": "refused: No such file or directory"}, path
    assert second["me"]["home"] != first_report["me"]["home"]
    assert second["paths"][first_report["me"]["home"]] == {"file": "refused: No such file or directory"}
    # The snoop did read: its own environment (so a refusal above is the sandbox's, not a broken server).
    assert "MCP_INSPECTOR_SERVER=" in second["environ"][str(second["me"]["pid"])]
