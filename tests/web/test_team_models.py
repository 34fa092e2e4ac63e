"""A team's own models on the team page, as the named people (no process started): an admin adds,
replaces and removes them, the key stored encrypted and never shown again; nobody else may.

alice is the admin of team A, bob an operator there, carol a viewer; dave is the admin of team B.
A chat with such a model, and its egress held to the rules, is tests/web/test_team_models_live.py's.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import connection
from django.test import AsyncClient

from sessions.playground import turns
from sessions.teams import team_models
from sessions.teams.models import Membership, Role, Team, TeamModel

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "sk-live-0123456789abcdefSECRET"
PEOPLE = {
    "alice": ("A", Role.ADMIN),
    "bob": ("A", Role.OPERATOR),
    "carol": ("A", Role.VIEWER),
    "dave": ("B", Role.ADMIN),
}
FIELDS = {
    "name": "team-gpt",
    "label": "Team GPT",
    "api": "openai",
    "url": "http://127.0.0.1:9/v1",
    "model": "gpt-test",
    "api_key": KEY,
    "timeout": "30",
}


@pytest.fixture
def hosted(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_EGRESS_ALLOW = ["127.0.0.1"]
    settings.INSPECTOR_LLM_MODELS = '[{"name": "shared", "url": "http://127.0.0.1:9/v1", "model": "m"}]'


@database_sync_to_async
def _people() -> dict[str, User]:
    teams = {"A": Team.objects.create(name="team A"), "B": Team.objects.create(name="team B")}
    people = {}
    for name, (team, role) in PEOPLE.items():
        people[name] = User.objects.create_user(name)
        Membership.objects.create(team=teams[team], user=people[name], role=role)
    return people


async def _client(user: User) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


@database_sync_to_async
def _stored_column(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT api_key FROM teams_teammodel WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


@database_sync_to_async
def _configs(team_name: str) -> dict[str, Any]:
    team = Team.objects.get(name=team_name)
    return {config.key: config for config in turns.configured(team.pk)[0]}


@pytest.mark.usefixtures("hosted")
async def test_an_admin_adds_a_model_whose_key_is_encrypted_at_rest_and_never_shown_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    people = await _people()
    alice = await _client(people["alice"])
    response = await alice.post("/team/models", FIELDS)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = await TeamModel.objects.aget()
    assert (entry.name, entry.api, entry.url, entry.model, entry.timeout) == (
        "team-gpt",
        "openai",
        "http://127.0.0.1:9/v1",
        "gpt-test",
        30.0,
    )
    stored = await _stored_column(entry.pk)
    assert KEY not in stored and "SECRET" not in stored and stored.startswith("gAAAA")
    assert entry.api_key == KEY
    page = (await alice.get("/team")).content.decode()
    assert "team-gpt" in page and "••••••••" in page and KEY not in page
    edit = (await alice.get(f"/team/models/{entry.pk}")).content.decode()
    assert "gpt-test" in edit and KEY not in edit
    # Team A's chats and evals may use it besides the installation's; team B's do not see it.
    configs = await _configs("team A")
    assert list(configs) == ["shared", "team-gpt"] and configs["team-gpt"].api_key == KEY
    assert configs["team-gpt"].connect is not None  # held to the egress rules on every request
    assert list(await _configs("team B")) == ["shared"]
    assert KEY not in caplog.text


@pytest.mark.usefixtures("hosted")
async def test_replacing_without_a_key_keeps_it_and_a_new_key_replaces_it() -> None:
    people = await _people()
    alice = await _client(people["alice"])
    assert (await alice.post("/team/models", FIELDS)).status_code == 302
    entry = await TeamModel.objects.aget()
    changed = {**FIELDS, "model": "gpt-other", "api_key": "", "api": "anthropic"}
    assert (await alice.post(f"/team/models/{entry.pk}", changed)).status_code == 302
    await entry.arefresh_from_db()
    assert (entry.model, entry.api, entry.api_key) == ("gpt-other", "anthropic", KEY)
    response = await alice.post(f"/team/models/{entry.pk}", {**changed, "api_key": "sk-new-key"})
    assert response.status_code == 302
    await entry.arefresh_from_db()
    assert entry.api_key == "sk-new-key"
    assert (await alice.post(f"/team/models/{entry.pk}/delete")).status_code == 302
    assert not await TeamModel.objects.aexists()


@pytest.mark.usefixtures("hosted")
async def test_an_operator_or_a_viewer_may_not_add_replace_or_remove_a_model() -> None:
    people = await _people()
    alice = await _client(people["alice"])
    assert (await alice.post("/team/models", FIELDS)).status_code == 302
    entry = await TeamModel.objects.aget()
    for name in ("bob", "carol"):
        client = await _client(people[name])
        assert (await client.post("/team/models", {**FIELDS, "name": name})).status_code == 403
        assert (await client.get(f"/team/models/{entry.pk}")).status_code == 403
        assert (await client.post(f"/team/models/{entry.pk}", FIELDS)).status_code == 403
        assert (await client.post(f"/team/models/{entry.pk}/delete")).status_code == 403
        page = (await client.get("/team")).content.decode()
        # They see the model, the key masked, and no form to change it.
        assert "team-gpt" in page and KEY not in page and 'action="/team/models"' not in page
    await entry.arefresh_from_db()
    assert (await TeamModel.objects.acount(), entry.model, entry.api_key) == (1, "gpt-test", KEY)


@pytest.mark.usefixtures("hosted")
async def test_another_teams_admin_gets_404_for_each_model_id_and_cannot_pick_it() -> None:
    people = await _people()
    alice, dave = await _client(people["alice"]), await _client(people["dave"])
    assert (await alice.post("/team/models", FIELDS)).status_code == 302
    entry = await TeamModel.objects.aget()
    for response in (
        await dave.get(f"/team/models/{entry.pk}"),
        await dave.post(f"/team/models/{entry.pk}", {**FIELDS, "api_key": "sk-dave"}),
        await dave.post(f"/team/models/{entry.pk}/delete"),
    ):
        assert response.status_code == 404 and "No such model" in response.content.decode()
    await entry.arefresh_from_db()
    assert (entry.api_key, entry.model) == (KEY, "gpt-test")
    assert "team-gpt" not in (await dave.get("/team")).content.decode()
    # dave may have a model of the same name in his team: names are per team.
    assert (await dave.post("/team/models", {**FIELDS, "api_key": "sk-dave"})).status_code == 302
    assert await TeamModel.objects.acount() == 2


@pytest.mark.usefixtures("hosted")
async def test_what_the_form_refuses_is_said_and_nothing_is_stored(settings: Any) -> None:
    people = await _people()
    alice = await _client(people["alice"])
    refused = {
        "http://10.1.2.3/v1": "egress rules refuse",
        "http://user:pw@127.0.0.1/v1": "Leave credentials out",
        "http://127.0.0.1/v1?key=abc": "no ?query",
        "ftp://127.0.0.1/v1": "http:// or https://",
    }
    for url, reason in refused.items():
        response = await alice.post("/team/models", {**FIELDS, "url": url})
        assert response.status_code == 400 and reason in response.content.decode(), url
    for name, reason in {"shared": "installation already has", "bad name!": "1 to 64 letters"}.items():
        response = await alice.post("/team/models", {**FIELDS, "name": name})
        assert response.status_code == 400 and reason in response.content.decode(), name
    response = await alice.post("/team/models", {**FIELDS, "api_key": "sk\nx"})
    assert response.status_code == 400 and "one line" in response.content.decode()
    assert not await TeamModel.objects.aexists()
    # The team's own allow-list lets a private address through.
    await Team.objects.filter(name="team A").aupdate(egress_allow=["10.1.2.0/24"])
    assert (await alice.post("/team/models", {**FIELDS, "url": "http://10.1.2.3/v1"})).status_code == 302


async def test_locally_a_team_model_takes_any_url_and_the_environments_models_are_unchanged(
    settings: Any,
) -> None:
    settings.INSPECTOR_LLM_URL, settings.INSPECTOR_LLM_MODEL = "http://127.0.0.1:9/v1", "llama"
    people = await _people()
    alice = await _client(people["alice"])
    response = await alice.post("/team/models", {**FIELDS, "url": "http://10.1.2.3/v1"})
    assert response.status_code == 302
    configs = await _configs("team A")
    assert list(configs) == ["default", "team-gpt"] and configs["team-gpt"].connect is None
    assert [c.key for c in (await database_sync_to_async(turns.configured)())[0]] == ["default"]
    assert (
        await database_sync_to_async(team_models.configs_of)(
            (await Team.objects.aget(name="team A")).pk, {"team-gpt"}
        )
        == []
    )
