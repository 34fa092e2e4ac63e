"""Logging in and the pages on a full disk: what only reads works; a write the database refuses is a 503
that says so; locally the token login still logs in (its session in memory while the disk is full).

The full disk is the database refusing every write as SQLite does ("database or disk is full"), through
Django's own hook on the connection's queries (``execute_wrapper``); tests/project/test_disk_full.py
fills a real one.
"""

from __future__ import annotations

import getpass
from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import User
from django.db import OperationalError, connection
from django.test import Client
from support.teams import team_of

from inspector import auth

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as the app runs

WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def refuse_writes(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    if sql.lstrip().split(None, 1)[0].upper() in WRITES:
        raise OperationalError("database or disk is full")
    return execute(sql, params, many, context)


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("INSPECTOR_TOKEN", raising=False)
    monkeypatch.setattr(auth, "login_token", auth.LoginToken())
    return auth.login_token.issue()


def test_the_token_login_logs_in_on_a_full_disk_and_the_home_page_works(
    client: Client, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    team_of(User.objects.create_user(getpass.getuser()))  # who the token logs in, from an earlier run
    with connection.execute_wrapper(refuse_writes):
        response = client.post("/auth/token", {"token": token})
        assert response.status_code == 302 and response["Location"] == "/"
        assert SESSION_KEY in client.session
        home = client.get("/")
        assert home.status_code == 200 and "MCP Inspector" in home.content.decode()
        assert client.get("/auth/login").status_code == 200
    assert "the disk is full" in caplog.text


def test_a_write_on_a_full_disk_is_a_503_that_says_storage_is_full(client: Client) -> None:
    client.force_login(alice := User.objects.create_user("alice"))
    team_of(alice)
    form = {"transport": "stdio", "command": "true", "protocol_version": "2025-11-25", "timeout": "30"}
    with connection.execute_wrapper(refuse_writes):
        response = client.post("/connect", form | {"max_total_timeout": "60"})
    assert response.status_code == 503
    assert response["Retry-After"] == "60"
    text = response.content.decode()
    assert "Storage is full: this could not be saved" in text and "Pages that only read still work" in text


def test_a_password_login_on_a_full_disk_is_refused_with_a_503_not_kept_in_memory(
    client: Client, settings: Any
) -> None:
    settings.INSPECTOR_HOSTED = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    team_of(User.objects.create_user("alice", password="a long enough password"))
    with connection.execute_wrapper(refuse_writes):
        response = client.post("/auth/login", {"username": "alice", "password": "a long enough password"})
    assert response.status_code == 503
    assert "Storage is full" in response.content.decode()
    assert "the disk of the database" in response.content.decode()
    assert SESSION_KEY not in client.session
