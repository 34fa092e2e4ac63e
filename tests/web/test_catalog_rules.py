"""A catalog server starts only as its entry is now, and never with a variable that loads code.

alice is the admin of team A, bob an operator there. bob connects to a catalog entry, disconnects,
alice changes the entry on the team page, and bob reconnects: refused unless the entry is unchanged in
everything that shapes the process. An entry saved before the variable rule cannot be started.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.test import AsyncClient
from support.web import live_runtime, scripted_servers, wait_until

from sessions.models import McpSession
from sessions.teams import access, policy
from sessions.teams.models import CatalogServer, Membership, Role, Team
from sessions.web.team_forms import MASK, CatalogForm

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def hosted(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True


ENTRY: dict[str, Any] = {
    "name": "files",
    "command": "files-server",
    "args": ["--root", "{root}", "--level=2"],
    "params": [{"name": "root", "label": "Folder", "pattern": "/srv/[a-z]+", "required": True}],
    "env": {"API_KEY": "sk-old-secret"},
    "env_params": ["USER_TOKEN"],
    "secret_env": ["API_KEY", "USER_TOKEN"],
    "cwd": "/tmp",
}
VALUES = {"param:root": "/srv/data", "env:USER_TOKEN": "u-1"}


@database_sync_to_async
def _team_a() -> dict[str, Any]:
    team = Team.objects.create(name="A")
    made: dict[str, Any] = {"A": team}
    for name, role in (("alice", Role.ADMIN), ("bob", Role.OPERATOR)):
        made[name] = User.objects.create_user(name)
        Membership.objects.create(team=team, user=made[name], role=role)
    made["entry"] = CatalogServer.objects.create(team=team, **ENTRY)
    return made


@pytest.fixture
async def people() -> AsyncIterator[dict[str, Any]]:
    made = await _team_a()
    for name in ("alice", "bob"):
        made[f"{name}_client"] = client = AsyncClient()
        await client.aforce_login(made[name])
    yield made


def _status(session: McpSession) -> str:
    session.refresh_from_db()
    return session.status


async def _connected_then_closed(people: dict[str, Any]) -> McpSession:
    """bob's session of the entry, started (scripted, no process) and disconnected."""
    bob = people["bob_client"]
    started = await bob.post(f"/catalog/{people['entry'].pk}/connect", VALUES)
    assert started.status_code == 302, started.content
    session = await McpSession.objects.alatest("pk")
    await wait_until(lambda: _status(session) == "ready", what="the catalog server ready")
    assert (await bob.post(f"/s/{session.public_id}/disconnect")).status_code == 302
    await wait_until(lambda: _status(session) not in McpSession.LIVE, what="the session closed")
    return session


async def _admin_saves(people: dict[str, Any], **changes: str) -> None:
    """alice saves the entry on the team page, its fixed values left masked unless changed."""
    entry = people["entry"]
    data = {**CatalogForm.initial_of(entry), **changes}
    response = await people["alice_client"].post(f"/team/catalog/{entry.pk}", data)
    assert response.status_code == 302, response.content


EDITS = {
    "an argument changed": {"args": "--root\n{root}\n--level=3"},
    "an argument removed": {"args": "--root\n{root}"},
    "a fixed secret rotated": {"env": "API_KEY=sk-new-secret"},
    "a fixed variable added": {"env": f"API_KEY={MASK}\nREGION=eu"},
    "the working directory moved": {"cwd": "/var/tmp"},
    "the command changed": {"command": "other-server"},
    "a parameter's pattern changed": {"params": "root|Folder|/srv/[a-z0-9]+|required"},
    "a variable a person fills dropped": {"env_params": "", "secret_env": "API_KEY"},
}


@pytest.mark.parametrize("edit", list(EDITS))
async def test_a_reconnect_after_the_admin_changed_the_entry_is_refused(
    people: dict[str, Any], edit: str
) -> None:
    async with live_runtime():
        with scripted_servers() as started:
            session = await _connected_then_closed(people)
            await _admin_saves(people, **EDITS[edit])
            refused = await people["bob_client"].post(f"/s/{session.public_id}/reconnect")
            assert refused.status_code == 403
            page = refused.content.decode()
            assert "not as it was when this session started" in page and "connect to it anew" in page
            assert len(started) == 1  # only the first connect started anything
            assert await McpSession.objects.acount() == 1
    await session.arefresh_from_db()
    assert session.status == "closed"


async def test_a_reconnect_of_an_unchanged_entry_starts_it_as_before(people: dict[str, Any]) -> None:
    async with live_runtime():
        with scripted_servers() as started:
            session = await _connected_then_closed(people)
            await _admin_saves(people, name="files, renamed", description="a new description")
            again = await people["bob_client"].post(f"/s/{session.public_id}/reconnect")
            assert again.status_code == 302
            await wait_until(lambda: _status(session) == "ready", what="the session ready again")
            first, second = await wait_until(lambda: started[:2] if len(started) == 2 else None)
    assert second.command == first.command == "files-server"
    assert second.args == first.args == ["--root", "/srv/data", "--level=2"]
    assert second.env["API_KEY"] == "sk-old-secret" and second.env["USER_TOKEN"] == "u-1"


async def test_a_reconnect_follows_the_sessions_team_not_the_one_chosen_on_the_page(
    people: dict[str, Any],
) -> None:
    other = await Team.objects.acreate(name="B")
    await Membership.objects.acreate(team=other, user=people["bob"], role=Role.VIEWER)
    async with live_runtime():
        with scripted_servers():
            session = await _connected_then_closed(people)
            bob = people["bob_client"]
            assert (await bob.post("/team/switch", {"team": other.pk})).status_code == 302
            # bob is only a viewer of B, and B's catalog has no such entry: A's rules decide.
            assert (await bob.post(f"/s/{session.public_id}/reconnect")).status_code == 302
            await wait_until(lambda: _status(session) == "ready", what="the session ready again")


async def test_a_reconnect_takes_the_teams_egress_allow_list_as_it_is_now(people: dict[str, Any]) -> None:
    team = people["A"]
    team.egress_allow = ["10.1.0.0/16"]
    await team.asave()
    async with live_runtime():
        with scripted_servers():
            session = await _connected_then_closed(people)
            assert session.config["egress_allow"] == ["10.1.0.0/16"]
            team.egress_allow = []
            await team.asave()
            assert (await people["bob_client"].post(f"/s/{session.public_id}/reconnect")).status_code == 302
            await wait_until(lambda: _status(session) == "ready", what="the session ready again")
    assert session.config["egress_allow"] == []


# --- entries saved before the variable rule -----------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "filled"),
    [
        ("env", {"API_KEY": "k", "LD_PRELOAD": "/tmp/evil.so"}, {}),
        ("env", {"NODE_OPTIONS": "--require /tmp/evil.js"}, {}),
        ("env_params", ["USER_TOKEN", "PYTHONPATH"], {}),  # refused even when the person leaves it empty
        ("env_params", ["USER_TOKEN", "PYTHONSTARTUP"], {"env:PYTHONSTARTUP": "/tmp/evil.py"}),
    ],
)
async def test_bob_cannot_start_an_entry_saved_with_a_variable_that_loads_code(
    people: dict[str, Any], field: str, value: Any, filled: dict[str, str]
) -> None:
    await CatalogServer.objects.filter(pk=people["entry"].pk).aupdate(**{field: value})
    name = next(n for n in value if n not in ENTRY["env"] and n not in ENTRY["env_params"])
    with scripted_servers() as started:
        refused = await people["bob_client"].post(
            f"/catalog/{people['entry'].pk}/connect", {**VALUES, **filled}
        )
    assert refused.status_code == 409
    page = refused.content.decode()
    assert f"files cannot start: it sets {name}" in page and "A team admin must take that out" in page
    assert not started and not await McpSession.objects.aexists()


async def test_a_reconnect_of_an_entry_that_took_on_a_variable_that_loads_code_is_refused_saying_so(
    people: dict[str, Any],
) -> None:
    async with live_runtime():
        with scripted_servers():
            session = await _connected_then_closed(people)
    await CatalogServer.objects.filter(pk=people["entry"].pk).aupdate(env={"LD_PRELOAD": "/tmp/evil.so"})
    refused = await people["bob_client"].post(f"/s/{session.public_id}/reconnect")
    assert refused.status_code == 403 and "it sets LD_PRELOAD" in refused.content.decode()


async def test_a_person_cannot_add_a_variable_the_entry_does_not_declare(people: dict[str, Any]) -> None:
    with scripted_servers() as started:
        refused = await people["bob_client"].post(
            f"/catalog/{people['entry'].pk}/connect", {**VALUES, "env:NODE_OPTIONS": "--require /tmp/x.js"}
        )
    assert refused.status_code == 422
    assert "does not let a person set NODE_OPTIONS" in refused.content.decode()
    assert not started and not await McpSession.objects.aexists()


# --- the policy underneath -----------------------------------------------------------------------------


@database_sync_to_async
def _start_problem(people: dict[str, Any], change: Any) -> str | None:
    entry = CatalogServer.objects.get(pk=people["entry"].pk)
    config = policy.catalog_config(entry, VALUES)
    change(config)
    scope = access.scope_for(people["bob"])
    assert scope is not None
    return policy.connect_problem(scope, config)


async def test_a_catalog_config_starts_only_with_what_its_entry_declares(people: dict[str, Any]) -> None:
    assert await _start_problem(people, lambda config: None) is None
    problem = await _start_problem(people, lambda config: config["env"].update(EXTRA="1"))
    assert problem == "files does not let anyone set EXTRA."
    problem = await _start_problem(people, lambda config: config["env"].update(LD_AUDIT="/x.so"))
    assert problem is not None and "it sets LD_AUDIT" in problem
    # A config of an entry gone, of another team's, or of no fingerprint (made before there were any).
    for change in (
        lambda config: config["catalog"].update(id=10**9),
        lambda config: config["catalog"].update(id="1"),
        lambda config: config["catalog"].pop("fingerprint"),
        lambda config: config.update(catalog=["files"]),
    ):
        assert await _start_problem(people, change) == policy.ENTRY_CHANGED


def test_the_fingerprint_covers_what_reaches_the_process_and_only_that(settings: Any) -> None:
    entry = CatalogServer(**ENTRY)
    base = entry.fingerprint()
    assert entry.has_fingerprint(base) and not entry.has_fingerprint("") and not entry.has_fingerprint(None)
    for field in CatalogServer.PROCESS_FIELDS:
        if field in ("args", "params", "env_params", "secret_env"):
            changed = CatalogServer(**{**ENTRY, field: [*ENTRY[field], "extra"]})
        elif field == "env":
            changed = CatalogServer(**{**ENTRY, "env": {"API_KEY": "sk-rotated"}})
        else:
            changed = CatalogServer(**{**ENTRY, field: f"{ENTRY[field]}-changed"})
        assert not changed.has_fingerprint(base), field
    assert CatalogServer(**{**ENTRY, "name": "renamed", "description": "d"}).has_fingerprint(base)
    # A parameter's label is only shown; its pattern and whether it is required decide what it takes.
    (param,) = ENTRY["params"]
    relabelled = [{"name": "root", "pattern": param["pattern"], "label": "Another label"}]
    assert CatalogServer(**{**ENTRY, "params": relabelled}).has_fingerprint(base)
    optional = [{**param, "required": False}]
    assert not CatalogServer(**{**ENTRY, "params": optional}).has_fingerprint(base)
    # A rotated secret key keeps sessions reconnectable while the old key is a fallback.
    old_key = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-key-" + "x" * 50, [old_key]
    assert entry.fingerprint() != base and entry.has_fingerprint(base)
    settings.SECRET_KEY_FALLBACKS = []
    assert not entry.has_fingerprint(base)
