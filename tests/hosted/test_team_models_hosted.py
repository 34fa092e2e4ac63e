"""Hosted, on PostgreSQL: a team's admin adds a model with its key through a real web process; the key's
column holds a Fernet token with no part of the key, the pages show it masked; an operator is refused
(403) and another team's admin finds no such model (404); a URL the egress rules refuse is not saved.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from support.hosted import hosted_env, manage, password_login, prepare, psql, web_process

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]

REDIS_DB = 7  # the other hosted modules use 2 to 6 and 8 to 15
KEY = "sk-hosted-team-key-0123456789-SECRET"


def test_a_teams_model_key_is_encrypted_in_postgresql_and_only_its_admins_change_it(
    hosted_database: str, tmp_path: Path
) -> None:
    env = hosted_env(
        hosted_database,
        REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",
    )
    prepare(env, REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    manage(env, "create_admin", "dave", "--team", "Team B", INSPECTOR_ADMIN_PASSWORD="dave-long-password-1")
    seed = (
        "from django.contrib.auth.models import User\n"
        "from sessions.teams.models import Membership, Team\n"
        "user = User.objects.create_user('bob', password='bob-long-password-1')\n"
        "Membership.objects.create(team=Team.objects.get(name='Team A'), user=user, role='operator')\n"
    )
    manage(env, "shell", "-c", seed)
    fields = {
        "name": "team-gpt",
        "label": "",
        "api": "openai",
        "url": "http://127.0.0.1:9/v1",
        "model": "gpt-test",
        "api_key": KEY,
        "timeout": "60",
    }
    with (
        web_process(env) as web,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as alice,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as bob,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as dave,
    ):
        alice_headers = password_login(alice, "alice", "alice-long-password-1")
        bob_headers = password_login(bob, "bob", "bob-long-password-1")
        dave_headers = password_login(dave, "dave", "dave-long-password-1")

        refused = alice.post(
            "/team/models", data={**fields, "url": "http://10.9.8.7/v1"}, headers=alice_headers
        )
        assert refused.status_code == 400 and "egress rules refuse" in refused.text
        assert bob.post("/team/models", data=fields, headers=bob_headers).status_code == 403
        assert psql(hosted_database, "SELECT count(*) FROM teams_teammodel") == [["0"]]

        assert alice.post("/team/models", data=fields, headers=alice_headers).status_code == 302
        [[model_id, url, stored]] = psql(hosted_database, "SELECT id, url, api_key FROM teams_teammodel")
        assert url == "http://127.0.0.1:9/v1" and stored.startswith("gAAAA")
        assert KEY not in stored and "SECRET" not in stored
        for client in (alice, bob):
            page = client.get("/team").text
            assert "team-gpt" in page and "••••••••" in page and KEY not in page
        assert re.search(r'<input[^>]+name="api_key"[^>]*>', alice.get(f"/team/models/{model_id}").text)
        assert KEY not in alice.get(f"/team/models/{model_id}").text

        for response in (
            dave.get(f"/team/models/{model_id}"),
            dave.post(f"/team/models/{model_id}", data={**fields, "api_key": "x"}, headers=dave_headers),
            dave.post(f"/team/models/{model_id}/delete", headers=dave_headers),
        ):
            assert response.status_code == 404
        assert bob.post(f"/team/models/{model_id}/delete", headers=bob_headers).status_code == 403
        assert psql(hosted_database, "SELECT api_key FROM teams_teammodel") == [[stored]]
        assert "team-gpt" not in dave.get("/team").text
