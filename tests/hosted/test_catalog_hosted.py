"""The hosted set-up's catalog, as a team meets it: two engine workers on PostgreSQL and Redis.

alice (admin) cannot save an entry with a variable that loads code, bob (operator) cannot start one
saved before that rule, and bob's reconnect is refused once alice changed an argument or rotated a
fixed secret of the entry his session started from; the unchanged entry reconnects.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from support.hosted import (
    Watcher,
    engine_worker,
    hosted_env,
    manage,
    password_login,
    prepare,
    psql,
    web_process,
)
from support.paths import SERVERS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]

REDIS_DB = 8
SDK_SERVER = str(SERVERS / "sdk_server.py")
MASK = "••••••••"


def _entry_form(args: str, env: str, **more: str) -> dict[str, str]:
    return {
        "name": "sdk",
        "command": sys.executable,
        "args": args,
        "params": "transport|Transport|stdio|required",
        "env": env,
        "env_params": "",
        "secret_env": "API_KEY",
        "cwd": "",
        **more,
    }


def test_loader_variables_are_refused_and_a_changed_entry_does_not_reconnect(
    hosted_database: str, tmp_path: Path
) -> None:
    env = hosted_env(
        hosted_database,
        REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        # The catalog's rules, not the sandbox (tests/hosted/test_isolation.py): the SDK server runs on
        # the tests' own Python, under /root, which the sandbox's user cannot read.
        INSPECTOR_SANDBOX="off",
    )
    prepare(env, REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    seed = (
        "from django.contrib.auth.models import User\n"
        "from sessions.teams.models import CatalogServer, Membership, Team\n"
        "team = Team.objects.get(name='Team A')\n"
        "bob = User.objects.create_user('bob', password='bob-long-password-1')\n"
        "Membership.objects.create(team=team, user=bob, role='operator')\n"
        "sdk = CatalogServer.objects.create(team=team, name='sdk',"
        f" command={sys.executable!r}, args=[{SDK_SERVER!r}, '{{transport}}'],"
        " params=[{'name': 'transport', 'pattern': 'stdio'}],"
        " env={'API_KEY': 'sk-first'}, secret_env=['API_KEY'])\n"
        # Saved straight to the database, as an entry made before the rule would have been.
        "old = CatalogServer.objects.create(team=team, name='preloaded', command='true',"
        " env={'LD_PRELOAD': '/nonexistent/evil.so'})\n"
        "print(sdk.pk, old.pk)\n"
    )
    sdk, preloaded = manage(env, "shell", "-c", seed).strip().splitlines()[-1].split()
    with (
        engine_worker(env),
        engine_worker(env),
        web_process(env) as web,
        httpx.Client(base_url=web, follow_redirects=False, timeout=20) as alice,
        httpx.Client(base_url=web, follow_redirects=False, timeout=20) as bob,
    ):
        alice_headers = password_login(alice, "alice", "alice-long-password-1")
        bob_headers = password_login(bob, "bob", "bob-long-password-1")
        args = f"{SDK_SERVER}\n{{transport}}"

        # Saving: bob may not edit the catalog at all, alice not with a variable that loads code.
        loaded = _entry_form(args, "LD_PRELOAD=/tmp/evil.so", name="loaded")
        assert bob.post("/team/catalog/new", data=loaded, headers=bob_headers).status_code == 403
        refused = alice.post("/team/catalog/new", data=loaded, headers=alice_headers)
        assert refused.status_code == 400
        assert "LD_PRELOAD cannot be set on a catalog server" in refused.text
        filled = _entry_form(args, f"API_KEY={MASK}", env_params="NODE_OPTIONS")
        refused = alice.post(f"/team/catalog/{sdk}", data=filled, headers=alice_headers)
        assert refused.status_code == 400 and "NODE_OPTIONS cannot be set" in refused.text

        # Starting: an entry saved before the rule does not start, and says why.
        refused = bob.post(f"/catalog/{preloaded}/connect", headers=bob_headers)
        assert refused.status_code == 409 and "it sets LD_PRELOAD" in refused.text
        assert psql(hosted_database, "SELECT count(*) FROM mcp_sessions_mcpsession") == [["0"]]

        # bob's session of the entry, ended; the entry unchanged, it reconnects.
        started = bob.post(f"/catalog/{sdk}/connect", data={"param:transport": "stdio"}, headers=bob_headers)
        assert started.status_code == 302, started.text[:1000]
        session_url = started.headers["location"]
        public_id = session_url.strip("/").split("/")[-1]

        def run_once(action: str) -> None:
            """``action`` the session, then wait until it is ready, and end it."""
            watcher = Watcher(web, bob, f"/ws/sessions/{public_id}/")
            try:
                if action:
                    again = bob.post(session_url + action, headers=bob_headers)
                    assert again.status_code == 302, again.text[:1000]
                watcher.wait_for('status-ready"', timeout=60)
                before = len(watcher.seen)
                assert bob.post(session_url + "disconnect", headers=bob_headers).status_code == 302

                # The page opened on a closed session already said "closed": wait for it said anew.
                def closed() -> bool:
                    return any('status-closed"' in m for m in watcher.seen[before:])

                with watcher.changed:
                    assert watcher.changed.wait_for(closed, timeout=30), "".join(watcher.seen)[-2000:]
            finally:
                watcher.close()

        run_once("")
        # alice saves the entry as it is (a label added, which only shows): still the same entry.
        same = _entry_form(args, f"API_KEY={MASK}")
        assert alice.post(f"/team/catalog/{sdk}", data=same, headers=alice_headers).status_code == 302
        run_once("reconnect")

        # An argument changed: refused, nothing started.
        changed = _entry_form(f"{args}\n--verbose", f"API_KEY={MASK}")
        assert alice.post(f"/team/catalog/{sdk}", data=changed, headers=alice_headers).status_code == 302
        refused = bob.post(session_url + "reconnect", headers=bob_headers)
        assert refused.status_code == 403
        assert (
            "not as it was when this session started" in refused.text and "connect to it anew" in refused.text
        )

        # The argument back, the fixed secret rotated: refused still.
        rotated = _entry_form(args, "API_KEY=sk-second")
        assert alice.post(f"/team/catalog/{sdk}", data=rotated, headers=alice_headers).status_code == 302
        refused = bob.post(session_url + "reconnect", headers=bob_headers)
        assert refused.status_code == 403 and "not as it was" in refused.text
        status = psql(
            hosted_database, f"SELECT status FROM mcp_sessions_mcpsession WHERE public_id = '{public_id}'"
        )
        assert status == [["closed"]]
