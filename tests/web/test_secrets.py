"""Secrets at rest: saved servers' bearer token, environment and headers, and each session's config
snapshot, stored encrypted with INSPECTOR_SECRET_KEYS; unreadable without the key; rotated to a new
key; and the migration that encrypts a database written before.

alice saves a server with a token, a secret environment value and an API key header.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User
from django.core.exceptions import FieldError, ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from support.paths import REPO
from support.teams import team_of

from sessions.env import fernet_keys
from sessions.models import McpSession, ServerConfig
from sessions.secrets import SecretUnreadable, check_secret_keys
from sessions.teams.models import CatalogServer

TOKEN = "tok-5ecret-bearer-0123456789"
ENV_VALUE = "env-5ecret-value-9876543210"
HEADER_VALUE = "hdr-5ecret-value-5555"
SECRETS = (TOKEN, ENV_VALUE, HEADER_VALUE)
OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()


@pytest.fixture
def alice(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def old_key(settings: Any) -> None:
    settings.INSPECTOR_SECRET_KEYS = [OLD_KEY]


def save_server(owner: User) -> tuple[ServerConfig, McpSession]:
    """alice's saved server and a session started from it (its config snapshot holds the secrets)."""
    server = ServerConfig.objects.create(
        owner=owner,
        team=team_of(owner),
        name="billing",
        transport="http",
        url="https://mcp.example/mcp",
        bearer_token=TOKEN,
        env={"BILLING_API_KEY": ENV_VALUE, "REGION": "eu"},
        secret_env=["BILLING_API_KEY"],
        headers={"X-Api-Key": HEADER_VALUE},
    )
    session = McpSession.objects.create(
        owner=owner, team=team_of(owner), server=server, name="billing", config=server.snapshot()
    )
    return server, session


def stored_bytes() -> bytes:
    """Every column of every saved server and session, as the database holds it (raw SQL)."""
    found = b""
    with connection.cursor() as cursor:
        for model in (ServerConfig, McpSession):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(model._meta.db_table)}")
            for row in cursor.fetchall():
                for value in row:
                    if isinstance(value, bytes | memoryview):
                        found += bytes(value)
                    else:
                        found += str(value).encode()
    return found


def stored(model: Any, column: str, pk: int) -> str:
    with connection.cursor() as cursor:
        table, name = (connection.ops.quote_name(n) for n in (model._meta.db_table, column))
        cursor.execute(f"SELECT {name} FROM {table} WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


def read_back(server: ServerConfig, session: McpSession) -> tuple[ServerConfig, McpSession]:
    return ServerConfig.objects.get(pk=server.pk), McpSession.objects.get(pk=session.pk)


# --- with the key ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_saved_servers_and_session_configs_read_back_whole_with_the_key(alice: User) -> None:
    server, session = read_back(*save_server(alice))

    assert server.bearer_token == TOKEN
    assert server.env == {"BILLING_API_KEY": ENV_VALUE, "REGION": "eu"}
    assert server.headers == {"X-Api-Key": HEADER_VALUE}
    assert session.config == server.snapshot()
    assert session.config["bearer_token"] == TOKEN
    # What pages show is still masked.
    shown = session.shown_config
    assert shown["bearer_token"] == shown["env"]["BILLING_API_KEY"] == "••••••"
    assert shown["env"]["REGION"] == "eu"
    assert HEADER_VALUE not in str(shown)


@pytest.mark.django_db
def test_the_database_rows_hold_no_secret_in_plain_text(alice: User) -> None:
    server, session = save_server(alice)
    raw = stored_bytes()

    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    # Not even the names of the variables or headers: the whole mapping is one Fernet token.
    assert b"BILLING_API_KEY" not in stored(ServerConfig, "env", server.pk).encode()
    for model, column, pk in [
        (ServerConfig, "bearer_token", server.pk),
        (ServerConfig, "env", server.pk),
        (ServerConfig, "headers", server.pk),
        (McpSession, "config", session.pk),
    ]:
        assert stored(model, column, pk).startswith("gAAAAA"), column  # a Fernet token, version 0x80


@pytest.mark.django_db
def test_encrypting_twice_gives_two_different_tokens_and_lookups_are_refused(alice: User) -> None:
    first, _ = save_server(alice)
    second = ServerConfig.objects.create(owner=alice, team=team_of(alice), name="again", bearer_token=TOKEN)
    assert stored(ServerConfig, "bearer_token", first.pk) != stored(ServerConfig, "bearer_token", second.pk)
    # So a lookup could never match; it is refused rather than silently finding nothing.
    with pytest.raises(FieldError, match="Unsupported lookup"):
        ServerConfig.objects.filter(bearer_token=TOKEN).count()
    assert ServerConfig.objects.filter(bearer_token__isnull=False).count() == 2


# --- without the right key ------------------------------------------------------------------------


@pytest.mark.django_db
def test_without_the_right_key_a_secret_cannot_be_read_and_the_error_says_why(
    alice: User, settings: Any, old_key: None
) -> None:
    server, session = save_server(alice)
    settings.INSPECTOR_SECRET_KEYS = [NEW_KEY]

    with pytest.raises(SecretUnreadable, match=r"mcp_sessions\.ServerConfig\.\w+ cannot be decrypted with"):
        ServerConfig.objects.get(pk=server.pk)
    with pytest.raises(SecretUnreadable, match=r"McpSession\.config .*not listed \(list the old key after"):
        McpSession.objects.get(pk=session.pk)


@pytest.mark.django_db
def test_an_altered_value_is_refused_not_read_as_garbage(alice: User) -> None:
    server, _ = save_server(alice)
    token = stored(ServerConfig, "bearer_token", server.pk)
    altered = token[:40] + ("A" if token[40] != "A" else "B") + token[41:]
    ServerConfig.objects.filter(pk=server.pk).update(name="altered")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE mcp_sessions_serverconfig SET bearer_token = %s WHERE id = %s", [altered, server.pk]
        )

    with pytest.raises(SecretUnreadable, match="or it was altered"):
        ServerConfig.objects.get(pk=server.pk)


@pytest.mark.django_db
def test_with_no_key_at_all_saving_a_secret_says_how_to_make_one(alice: User, settings: Any) -> None:
    settings.INSPECTOR_SECRET_KEYS = []
    with pytest.raises(ImproperlyConfigured, match=r"INSPECTOR_SECRET_KEYS is not set.*Fernet.generate_key"):
        ServerConfig.objects.create(owner=alice, team=team_of(alice), name="x", bearer_token=TOKEN)


# --- rotation -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_rotate_secrets_re_encrypts_everything_with_the_new_key_so_the_old_one_can_go(
    alice: User, settings: Any, old_key: None, capsys: pytest.CaptureFixture[str]
) -> None:
    server, session = save_server(alice)
    before = stored(ServerConfig, "bearer_token", server.pk)

    # The new key goes first; both read, the new one writes.
    settings.INSPECTOR_SECRET_KEYS = [NEW_KEY, OLD_KEY]
    assert read_back(server, session)[0].bearer_token == TOKEN
    call_command("rotate_secrets")
    # The server's bearer token, env, headers and OAuth settings, and the session's config.
    assert "re-encrypted 5 stored secrets" in capsys.readouterr().out

    after = stored(ServerConfig, "bearer_token", server.pk)
    assert after != before
    assert Fernet(NEW_KEY).decrypt(after.encode()).decode() == TOKEN
    # The old key is dropped: everything still reads.
    settings.INSPECTOR_SECRET_KEYS = [NEW_KEY]
    server, session = read_back(server, session)
    assert (server.bearer_token, server.env["BILLING_API_KEY"], server.headers["X-Api-Key"]) == SECRETS
    assert session.config["headers"] == {"X-Api-Key": HEADER_VALUE}
    # And the old key alone reads nothing any more.
    settings.INSPECTOR_SECRET_KEYS = [OLD_KEY]
    with pytest.raises(SecretUnreadable):
        ServerConfig.objects.get(pk=server.pk)


@pytest.mark.django_db
def test_rotate_secrets_refuses_when_a_key_still_in_use_is_not_listed(
    alice: User, settings: Any, old_key: None
) -> None:
    server, _ = save_server(alice)
    before = stored(ServerConfig, "bearer_token", server.pk)
    settings.INSPECTOR_SECRET_KEYS = [NEW_KEY]

    with pytest.raises(CommandError, match=r"ServerConfig\.\w+ of row \d+ cannot be decrypted"):
        call_command("rotate_secrets")
    assert stored(ServerConfig, "bearer_token", server.pk) == before


# --- the migration from plain text ----------------------------------------------------------------

BEFORE = ("mcp_sessions", "0009_teams")


@pytest.fixture
def plain_text_database() -> Iterator[MigrationExecutor]:
    """The database as it was before secrets were encrypted; brought back to the latest at the end."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([BEFORE])
    try:
        yield executor
    finally:
        MigrationExecutor(connection).migrate(latest)


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_rows_stored_in_plain_text_and_reverses(
    plain_text_database: MigrationExecutor,
) -> None:
    # The state the database is in: the sessions before encryption, with whatever of the other apps
    # does not depend on a later migration of theirs.
    applied = MigrationLoader(connection).applied_migrations
    old = plain_text_database.loader.project_state(list(applied)).apps
    owner = old.get_model("auth", "User").objects.create(username="alice")
    team = old.get_model("teams", "Team").objects.create(name="alice's team")
    server = old.get_model("mcp_sessions", "ServerConfig").objects.create(
        team=team,
        owner=owner,
        name="billing",
        bearer_token=TOKEN,
        env={"BILLING_API_KEY": ENV_VALUE},
        secret_env=["BILLING_API_KEY"],
        headers={"X-Api-Key": HEADER_VALUE},
    )
    config = {"name": "billing", "bearer_token": TOKEN, "env": {"BILLING_API_KEY": ENV_VALUE}, "args": []}
    old_sessions = old.get_model("mcp_sessions", "McpSession").objects
    session = old_sessions.create(team=team, owner=owner, name="billing", config=config)
    assert TOKEN.encode() in stored_bytes()

    latest = MigrationExecutor(connection)
    latest.migrate(latest.loader.graph.leaf_nodes())

    raw = stored_bytes()
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    saved = ServerConfig.objects.get(pk=server.pk)
    assert (saved.bearer_token, saved.env, saved.headers) == (
        TOKEN,
        {"BILLING_API_KEY": ENV_VALUE},
        {"X-Api-Key": HEADER_VALUE},
    )
    assert McpSession.objects.get(pk=session.pk).config == config

    # Backwards: plain JSON again, which the old fields read.
    MigrationExecutor(connection).migrate([BEFORE])
    assert TOKEN.encode() in stored_bytes()
    assert old_sessions.get(pk=session.pk).config == config
    assert old.get_model("mcp_sessions", "ServerConfig").objects.get(pk=server.pk).headers == {
        "X-Api-Key": HEADER_VALUE
    }


# --- the key: from the environment, generated locally, required hosted ----------------------------


def settings_of(env: dict[str, str], expression: str) -> subprocess.CompletedProcess[str]:
    """Evaluate a settings expression in a fresh process with env added to a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INSPECTOR_") and k != "SECRET_KEY"}
    code = f"import django; django.setup(); from django.conf import settings; print({expression})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**clean, "DJANGO_SETTINGS_MODULE": "inspector.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
def test_locally_a_key_is_generated_once_into_the_data_folder_readable_by_its_owner_only(
    tmp_path: Path,
) -> None:
    env = {"INSPECTOR_DATA_DIR": str(tmp_path)}
    first = settings_of(env, "settings.INSPECTOR_SECRET_KEYS")
    assert first.returncode == 0, first.stderr
    assert settings_of(env, "settings.INSPECTOR_SECRET_KEYS").stdout == first.stdout
    key_file = tmp_path / "encryption_keys"
    assert key_file.read_text().strip() in first.stdout
    assert key_file.stat().st_mode & 0o777 == 0o600


@pytest.mark.slow
def test_keys_come_from_the_environment_or_a_file_newest_first(tmp_path: Path) -> None:
    listed = settings_of(
        {"INSPECTOR_DATA_DIR": str(tmp_path), "INSPECTOR_SECRET_KEYS": f"{NEW_KEY}, {OLD_KEY}"},
        "settings.INSPECTOR_SECRET_KEYS",
    )
    assert listed.stdout.strip() == repr([NEW_KEY, OLD_KEY]), listed.stderr
    assert not (tmp_path / "encryption_keys").exists()

    secret_file = tmp_path / "keys"
    secret_file.write_text(f"{NEW_KEY}\n")
    hosted = settings_of(
        {
            "INSPECTOR_DATA_DIR": str(tmp_path),
            "INSPECTOR_HOSTED": "true",
            "INSPECTOR_SECRET_KEYS_FILE": str(secret_file),
        },
        "settings.INSPECTOR_SECRET_KEYS",
    )
    assert hosted.stdout.strip() == repr([NEW_KEY]), hosted.stderr


def test_a_key_that_is_not_a_fernet_key_is_refused_without_showing_it() -> None:
    with pytest.raises(ImproperlyConfigured, match="key number 2 is not a Fernet key") as refused:
        fernet_keys("INSPECTOR_SECRET_KEYS", f"{NEW_KEY},not-a-real-key-but-close")
    assert "not-a-real-key" not in str(refused.value)


def test_hosted_without_a_key_the_start_up_check_says_how_to_make_one(settings: Any) -> None:
    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SECRET_KEYS = True, []
    [error] = check_secret_keys()
    assert error.id == "inspector.E004"
    assert "INSPECTOR_SECRET_KEYS is not set" in error.msg
    assert "Fernet.generate_key()" in error.hint
    assert "the same on every web process and engine worker" in error.hint

    settings.INSPECTOR_SECRET_KEYS = [NEW_KEY]
    assert check_secret_keys() == []
    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SECRET_KEYS = False, [NEW_KEY]
    assert check_secret_keys() == []


@pytest.mark.slow
def test_a_hosted_process_without_a_key_stops_at_the_start_up_check(tmp_path: Path) -> None:
    env = {"INSPECTOR_DATA_DIR": str(tmp_path), "INSPECTOR_HOSTED": "true"}
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INSPECTOR_")}
    run = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "inspector.E004" in run.stderr and "INSPECTOR_SECRET_KEYS is not set" in run.stderr
    # No key was generated behind the operator's back.
    assert not (tmp_path / "encryption_keys").exists()


# --- a catalog entry's fixed values ----------------------------------------------------------------

CATALOG_BEFORE = ("teams", "0003_sso_identity")


@pytest.mark.django_db
def test_a_catalog_entrys_fixed_values_are_stored_encrypted(alice: User) -> None:
    entry = CatalogServer.objects.create(
        team=team_of(alice), name="billing", command="billing-mcp", env={"BILLING_API_KEY": ENV_VALUE}
    )
    assert CatalogServer.objects.get(pk=entry.pk).env == {"BILLING_API_KEY": ENV_VALUE}
    assert stored(CatalogServer, "env", entry.pk).startswith("gAAAAA")
    assert ENV_VALUE not in stored(CatalogServer, "env", entry.pk)


@pytest.mark.django_db(transaction=True)
def test_the_catalog_migration_encrypts_fixed_values_stored_in_plain_text_and_reverses() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([CATALOG_BEFORE])
    try:
        old = executor.loader.project_state([CATALOG_BEFORE]).apps
        team = old.get_model("teams", "Team").objects.create(name="alice's team")
        entries = old.get_model("teams", "CatalogServer").objects
        entry = entries.create(team=team, name="billing", command="b", env={"BILLING_API_KEY": ENV_VALUE})
        assert ENV_VALUE in stored(CatalogServer, "env", entry.pk)

        MigrationExecutor(connection).migrate(latest)
        assert ENV_VALUE not in stored(CatalogServer, "env", entry.pk)
        assert CatalogServer.objects.get(pk=entry.pk).env == {"BILLING_API_KEY": ENV_VALUE}

        MigrationExecutor(connection).migrate([CATALOG_BEFORE])
        assert entries.get(pk=entry.pk).env == {"BILLING_API_KEY": ENV_VALUE}
    finally:
        MigrationExecutor(connection).migrate(latest)
