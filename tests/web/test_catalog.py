"""The hosted mode's approved servers: stdio only from the team's catalog, filled as its admin allows."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.test import AsyncClient
from support.paths import SERVERS
from support.web import live_runtime, scripted_servers, wait_until

from sessions.models import McpSession
from sessions.teams import policy
from sessions.teams.models import CatalogServer, Membership, Role, Team

pytestmark = pytest.mark.django_db(transaction=True)

SDK_SERVER = SERVERS / "sdk_server.py"


def _entry(**fields: Any) -> CatalogServer:
    defaults: dict[str, Any] = {
        "name": "files",
        "command": "files-server",
        "args": ["--root", "{root}", "--x={level}"],
    }
    return CatalogServer(**{**defaults, **fields})


PARAMS = [
    {"name": "root", "label": "Folder", "required": True},
    {"name": "level", "pattern": "[0-9]", "required": False},
]


def test_a_catalog_config_fills_each_placeholder_within_its_own_argument() -> None:
    config = policy.catalog_config(_entry(params=PARAMS), {"param:root": "/srv/data", "param:level": "3"})
    assert config["command"] == "files-server"
    assert config["args"] == ["--root", "/srv/data", "--x=3"]
    assert config["catalog"]["name"] == "files" and config["transport"] == "stdio"
    # An optional parameter left empty leaves no empty argument; a part of an argument stays.
    assert policy.catalog_config(_entry(params=PARAMS), {"param:root": "a"})["args"] == [
        "--root",
        "a",
        "--x=",
    ]


def test_values_the_admin_did_not_allow_are_refused_by_field() -> None:
    entry = _entry(params=PARAMS)
    cases = {
        "an option in place of a value": ({"param:root": "--require=/tmp/evil.js"}, "param:root"),
        "a missing required value": ({}, "param:root"),
        "a value the pattern refuses": ({"param:root": "a", "param:level": "33"}, "param:level"),
        "a NUL": ({"param:root": "a\x00b"}, "param:root"),
    }
    for case, (values, field) in cases.items():
        with pytest.raises(policy.CatalogError) as caught:
            policy.catalog_config(entry, values)
        assert field in caught.value.errors, case


def test_only_the_environment_names_the_admin_listed_can_be_set() -> None:
    entry = _entry(params=[], args=[], env={"FIXED": "1"}, env_params=["API_KEY"], secret_env=["API_KEY"])
    config = policy.catalog_config(entry, {"env:API_KEY": "k"})
    assert config["env"] == {"FIXED": "1", "API_KEY": "k"}
    assert config["secret_env"] == ["API_KEY"]
    # A variable the entry does not let a person set is refused, not dropped quietly.
    with pytest.raises(policy.CatalogError) as caught:
        policy.catalog_config(entry, {"env:API_KEY": "k", "env:PATH": "/tmp/evil", "env:FIXED": "2"})
    assert set(caught.value.errors) == {"env:PATH", "env:FIXED"}
    assert "does not let a person set PATH" in caught.value.errors["env:PATH"]


@database_sync_to_async
def _operator(team_name: str = "team A", **team_fields: Any) -> tuple[User, Team]:
    team = Team.objects.create(name=team_name, **team_fields)
    bob = User.objects.create_user("bob", password="bob-password-1")
    Membership.objects.create(team=team, user=bob, role=Role.OPERATOR)
    return bob, team


async def _client(user: User) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


STDIO = {
    "transport": "stdio",
    "command": f"{sys.executable} -c 'print(1)'",
    "protocol_version": "2025-11-25",
    "timeout": "60",
    "max_total_timeout": "600",
}


async def test_an_operator_cannot_start_a_command_line_outside_the_catalog_in_the_hosted_mode(
    settings: Any,
) -> None:
    settings.INSPECTOR_HOSTED = True
    bob, team = await _operator()
    client = await _client(bob)
    refused = await client.post("/connect", STDIO)
    assert refused.status_code == 422
    assert "approved catalog only" in refused.content.decode()
    assert not await McpSession.objects.filter(team=team).aexists()
    # A saved stdio server is no way around it.
    await database_sync_to_async(lambda: team.servers.create(name="saved", command="sh", args=["-c", "id"]))()
    server = await team.servers.aget(name="saved")
    assert (await client.post(f"/servers/{server.pk}/connect")).status_code == 403
    assert not await McpSession.objects.filter(team=team).aexists()
    # Once an admin allows command lines for the team, it starts.
    team.allow_free_stdio = True
    await team.asave()
    with scripted_servers() as started:
        assert (await client.post("/connect", STDIO)).status_code == 302
        assert await McpSession.objects.filter(team=team).acount() == 1
        assert _command_of(await wait_until(lambda: started[:1])) == [sys.executable, "-c", "print(1)"]


async def test_the_local_mode_runs_any_command_line(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = False
    bob, team = await _operator()
    with scripted_servers() as started:
        assert (await (await _client(bob)).post("/connect", STDIO)).status_code == 302
        assert _command_of(await wait_until(lambda: started[:1])) == [sys.executable, "-c", "print(1)"]


def _command_of(targets: list[Any]) -> list[str]:
    (target,) = targets
    return [target.command, *target.args]


async def test_a_team_at_its_live_session_limit_starts_no_more(settings: Any) -> None:
    bob, team = await _operator(max_live_sessions=1, allow_free_stdio=True)
    await McpSession.objects.acreate(team=team, owner=bob, name="live", config={}, status="ready")
    refused = await (await _client(bob)).post("/connect", STDIO)
    assert refused.status_code == 422 and "1 live sessions, its limit" in refused.content.decode()


@pytest.mark.slow
async def test_a_catalog_server_starts_with_the_values_filled_in_and_its_entry_must_remain(
    settings: Any,
) -> None:
    settings.INSPECTOR_HOSTED = True
    # The SDK server runs on the tests' Python, which the sandbox's user may not reach (root's home).
    settings.INSPECTOR_SANDBOX = False
    bob, team = await _operator()
    entry = await CatalogServer.objects.acreate(
        team=team,
        name="sdk server",
        command=sys.executable,
        args=[str(SDK_SERVER), "{transport}"],
        params=[{"name": "transport", "pattern": "stdio"}],
    )
    client = await _client(bob)
    async with live_runtime():
        bad = await client.post(f"/catalog/{entry.pk}/connect", {"param:transport": "http"})
        assert bad.status_code == 422 and "must match stdio" in bad.content.decode()
        started = await client.post(f"/catalog/{entry.pk}/connect", {"param:transport": "stdio"})
        assert started.status_code == 302
        session = await McpSession.objects.aget(team=team)
        assert (
            session.config["args"] == [str(SDK_SERVER), "stdio"]
            and session.config["catalog"]["id"] == entry.pk
        )

        def ready() -> bool:
            session.refresh_from_db()
            return session.status == "ready"

        await wait_until(ready, what="the catalog server ready")
        assert session.server_info["name"] == "sdk-test-server"
        assert (await client.post(f"/s/{session.public_id}/disconnect")).status_code == 302

        def ended() -> bool:
            session.refresh_from_db()
            return not session.is_live

        await wait_until(ended, what="the session closed")
        # Reconnecting needs the entry as it was.
        entry.command = "/bin/sh"
        await entry.asave()
        refused = await client.post(f"/s/{session.public_id}/reconnect")
        assert refused.status_code == 403 and "not as it was" in refused.content.decode()
    # Another team's entry is not there for bob.
    other = await Team.objects.acreate(name="team B")
    theirs = await CatalogServer.objects.acreate(team=other, name="x", command="true")
    assert (await client.post(f"/catalog/{theirs.pk}/connect")).status_code == 404
