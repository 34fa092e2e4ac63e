"""The team page: members and roles, invitations, the server catalog, settings, and the team switcher.

alice is an admin of team A, bob an operator there, carol a viewer; dave is the admin of team B. What
each may do is a table below; every id of another team's member, invitation or catalog entry is a 404.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from sessions.teams import access, policy
from sessions.teams.models import CatalogServer, Invitation, Membership, Role, Team
from sessions.web.team_forms import MASK, CatalogForm

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def hosted(settings: Any) -> Iterator[None]:
    settings.INSPECTOR_HOSTED = True
    yield


@pytest.fixture
def people() -> dict[str, Any]:
    a, b = Team.objects.create(name="A"), Team.objects.create(name="B")
    made: dict[str, Any] = {"A": a, "B": b}
    for name, team, role in (
        ("alice", a, Role.ADMIN),
        ("bob", a, Role.OPERATOR),
        ("carol", a, Role.VIEWER),
        ("dave", b, Role.ADMIN),
    ):
        user = User.objects.create_user(name)
        made[name] = user
        made[f"{name}_member"] = Membership.objects.create(team=team, user=user, role=role)
    made["a_entry"] = CatalogServer.objects.create(
        team=a, name="files", command="npx", args=["-y", "server-files", "{folder}"],
        params=[{"name": "folder", "label": "Folder", "pattern": "/srv/[a-z]+", "required": True}],
        env={"API_KEY": "sk-live-123456"}, secret_env=["API_KEY"],
    )  # fmt: skip
    made["b_entry"] = CatalogServer.objects.create(team=b, name="b-only", command="b-server")
    made["b_invitation"] = Invitation.make(b, Role.VIEWER, made["dave"], "for B")[0]
    made["a_invitation"] = Invitation.make(a, Role.VIEWER, made["alice"], "for A")[0]
    return made


def as_(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


CATALOG_FORM = {
    "name": "everything",
    "description": "the reference server",
    "command": "node",
    "args": "/opt/everything/index.js\n{mode}",
    "params": "mode|Transport|stdio|sse|optional",
    "env": "LOG_LEVEL=debug\nAPI_TOKEN=tok-very-secret",
    "env_params": "USER_TOKEN",
    "secret_env": "API_TOKEN\nUSER_TOKEN",
    "cwd": "/tmp",
}


# --- who may do what ---------------------------------------------------------------------------------

# (method, path, data) → the status each of alice (admin), bob (operator), carol (viewer) gets on team A.
ACTIONS = [
    ("get", "/team", {}, (200, 200, 200)),
    ("post", "/team/settings", {"max_live_sessions": "3"}, (302, 403, 403)),
    ("post", "/team/members/{carol_member}/role", {"role": "operator"}, (302, 403, 403)),
    ("post", "/team/members/{carol_member}/remove", {}, (302, 403, 403)),
    ("post", "/team/invitations", {"role": "viewer", "note": "x", "days": "7"}, (200, 403, 403)),
    ("post", "/team/invitations/{a_invitation}/revoke", {}, (302, 403, 403)),
    ("get", "/team/catalog/new", {}, (200, 403, 403)),
    ("post", "/team/catalog/new", CATALOG_FORM, (302, 403, 403)),
    ("get", "/team/catalog/{a_entry}", {}, (200, 403, 403)),
    ("post", "/team/catalog/{a_entry}", {**CATALOG_FORM, "name": "files2"}, (302, 403, 403)),
    ("post", "/team/catalog/{a_entry}/delete", {}, (302, 403, 403)),
]


def fill(path: str, made: dict[str, Any]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: str(made[m.group(1)].pk), path)


@pytest.mark.parametrize(
    ("method", "path", "data", "expected"), ACTIONS, ids=[a[1] + " " + a[0] for a in ACTIONS]
)
def test_what_each_role_may_do_on_the_team_page(
    people: dict[str, Any], method: str, path: str, data: dict[str, str], expected: tuple[int, ...]
) -> None:
    got = []
    # The admin last: what the others tried must still be there for them to fail on.
    for name in ("bob", "carol", "alice"):
        response = getattr(as_(people[name]), method)(fill(path, people), data)
        got.append(response.status_code)
    assert tuple(got[-1:] + got[:-1]) == expected


@pytest.mark.parametrize(
    "path",
    [
        "/team/members/{dave_member}/role",
        "/team/members/{dave_member}/remove",
        "/team/invitations/{b_invitation}/revoke",
        "/team/catalog/{b_entry}",
        "/team/catalog/{b_entry}/delete",
    ],
)
def test_an_admin_of_team_a_cannot_touch_team_b_by_id(people: dict[str, Any], path: str) -> None:
    alice = as_(people["alice"])
    data = {**CATALOG_FORM, "role": "viewer"}
    assert alice.post(fill(path, people), data).status_code == 404
    if path.startswith("/team/catalog/{b_entry}") and not path.endswith("delete"):
        assert alice.get(fill(path, people)).status_code == 404
    dave, b_entry, b_invitation = people["dave_member"], people["b_entry"], people["b_invitation"]
    assert Membership.objects.get(pk=dave.pk).role == Role.ADMIN
    b_entry.refresh_from_db()
    b_invitation.refresh_from_db()
    assert (b_entry.name, b_entry.command, b_invitation.revoked) == ("b-only", "b-server", False)


def test_members_see_the_member_list_but_no_controls_nor_invitations(people: dict[str, Any]) -> None:
    page = as_(people["carol"]).get("/team").content.decode()
    for name in ("alice", "bob", "carol"):
        assert name in page
    assert "dave" not in page
    assert "/remove" not in page and "Invitations" not in page and "Save settings" not in page
    assert "files" in page  # the catalog is listed
    admin = as_(people["alice"]).get("/team").content.decode()
    assert "/remove" in admin and "Invitations" in admin and "Save settings" in admin


# --- members -------------------------------------------------------------------------------------------


def test_an_admin_changes_a_role_and_removes_a_member(people: dict[str, Any]) -> None:
    alice = as_(people["alice"])
    carol = people["carol_member"]
    assert alice.post(f"/team/members/{carol.pk}/role", {"role": "operator"}).status_code == 302
    assert Membership.objects.get(pk=carol.pk).role == Role.OPERATOR
    assert alice.post(f"/team/members/{carol.pk}/remove").status_code == 302
    assert not Membership.objects.filter(pk=carol.pk).exists()
    # carol, in no team now, is told so.
    response = as_(people["carol"]).get("/")
    assert response.status_code == 403 and "not a member of any team" in response.content.decode()


def test_a_bad_role_is_a_400_that_says_so(people: dict[str, Any]) -> None:
    response = as_(people["alice"]).post(f"/team/members/{people['bob_member'].pk}/role", {"role": "owner"})
    assert response.status_code == 400 and "Choose viewer, operator or admin" in response.content.decode()


def test_the_last_admin_can_be_neither_demoted_nor_removed(people: dict[str, Any]) -> None:
    alice = as_(people["alice"])
    me = people["alice_member"]
    for path, data in (
        (f"/team/members/{me.pk}/role", {"role": "viewer"}),
        (f"/team/members/{me.pk}/remove", {}),
    ):
        response = alice.post(path, data)
        assert response.status_code == 409, path
        assert "the team&#x27;s only admin" in response.content.decode()
        assert Membership.objects.get(pk=me.pk).role == Role.ADMIN
    # With a second admin, the first may step down.
    assert alice.post(f"/team/members/{people['bob_member'].pk}/role", {"role": "admin"}).status_code == 302
    assert alice.post(f"/team/members/{me.pk}/role", {"role": "viewer"}).status_code == 302
    assert Membership.objects.get(pk=me.pk).role == Role.VIEWER
    # And bob, admin now and the only one, cannot leave either.
    bob = as_(people["bob"])
    assert bob.post(f"/team/members/{people['bob_member'].pk}/remove").status_code == 409


# --- invitations ---------------------------------------------------------------------------------------


def test_an_admin_makes_an_invitation_link_shown_once_with_only_its_digest_kept(
    people: dict[str, Any],
) -> None:
    alice = as_(people["alice"])
    response = alice.post("/team/invitations", {"role": "operator", "note": "for erin", "days": "3"})
    assert response.status_code == 200
    link = re.search(r'value="(http://testserver/auth/invite\?token=([^"]+))"', response.content.decode())
    assert link is not None
    invitation = Invitation.objects.get(note="for erin")
    assert (invitation.team, invitation.role, invitation.created_by) == (
        people["A"],
        "operator",
        people["alice"],
    )
    assert link.group(2) not in invitation.digest
    assert "no-store" in response["Cache-Control"]
    # The page lists it, open; the link is not shown again.
    page = alice.get("/team").content.decode()
    assert "for erin" in page and "state-open" in page and link.group(2) not in page


def test_invitation_input_is_checked(people: dict[str, Any]) -> None:
    alice = as_(people["alice"])
    for data in (
        {"role": "owner", "days": "7"},
        {"role": "viewer", "days": "0"},
        {"role": "viewer", "days": "91"},
    ):
        assert alice.post("/team/invitations", data).status_code == 400, data
    assert Invitation.objects.filter(team=people["A"]).count() == 1


def test_invitations_list_their_state(people: dict[str, Any]) -> None:
    a, alice = people["A"], people["alice"]
    Invitation.make(a, Role.VIEWER, alice, "revoked one")[0].__class__.objects.filter(
        note="revoked one"
    ).update(revoked=True)
    page = as_(alice).get("/team").content.decode()
    assert "state-revoked" in page and "state-open" in page


# --- the catalog ---------------------------------------------------------------------------------------


def test_an_admin_adds_a_catalog_server_from_lines(people: dict[str, Any]) -> None:
    assert as_(people["alice"]).post("/team/catalog/new", CATALOG_FORM).status_code == 302
    entry = CatalogServer.objects.get(name="everything")
    assert entry.team == people["A"]
    assert entry.args == ["/opt/everything/index.js", "{mode}"]
    assert entry.params == [{"name": "mode", "label": "Transport", "pattern": "stdio|sse", "required": False}]
    assert entry.env == {"LOG_LEVEL": "debug", "API_TOKEN": "tok-very-secret"}
    assert (entry.env_params, entry.secret_env, entry.cwd) == (
        ["USER_TOKEN"],
        ["API_TOKEN", "USER_TOKEN"],
        "/tmp",
    )
    # What the team's policy makes of it: the person's value fills the placeholder.
    scope = access.scope_for(people["bob"])
    assert scope is not None
    config = policy.catalog_config(entry, {"param:mode": "sse", "env:USER_TOKEN": "u"})
    assert config["args"] == ["/opt/everything/index.js", "sse"]
    assert config["env"] == {"LOG_LEVEL": "debug", "API_TOKEN": "tok-very-secret", "USER_TOKEN": "u"}


def test_fixed_values_are_never_shown_again_and_a_masked_line_keeps_its_value(people: dict[str, Any]) -> None:
    alice, entry = as_(people["alice"]), people["a_entry"]
    for page in (
        alice.get("/team"),
        alice.get(f"/team/catalog/{entry.pk}"),
        as_(people["carol"]).get("/team"),
    ):
        assert "sk-live-123456" not in page.content.decode()
    form = alice.get(f"/team/catalog/{entry.pk}").content.decode()
    assert f"API_KEY={MASK}" in form
    data = {
        "name": "files",
        "command": "npx",
        "args": "-y\nserver-files\n{folder}",
        "params": "folder|Folder|/srv/[a-z]+|required",
        "env": f"API_KEY={MASK}\nREGION=eu",
        "secret_env": "API_KEY",
    }
    assert alice.post(f"/team/catalog/{entry.pk}", data).status_code == 302
    entry.refresh_from_db()
    assert entry.env == {"API_KEY": "sk-live-123456", "REGION": "eu"}
    # A line taken out removes the variable; a new value replaces the old.
    assert alice.post(f"/team/catalog/{entry.pk}", {**data, "env": "API_KEY=sk-new"}).status_code == 302
    entry.refresh_from_db()
    assert entry.env == {"API_KEY": "sk-new"}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("name", "files", "already has a server of that name"),
        ("command", "", "This field is required"),
        ("args", "--root\n{nowhere}", "{nowhere} names no parameter"),
        ("params", "1bad|Label", "is not a parameter name"),
        ("params", "x|X|([a-z]+|required", "is not a regular expression"),
        ("params", "x|X|[[a]|required", "Possible nested set"),
        ("params", "x|X\nx|Y", "x is there twice"),
        ("env", "NOT A LINE", "write KEY=value"),
        ("env", f"NEW_KEY={MASK}", "type NEW_KEY"),
        ("env_params", "BAD-NAME", "is not a variable name"),
        ("secret_env", "GHOST", "GHOST is neither a fixed variable nor one a person fills"),
        ("cwd", "x" * 1001, "at most 1000 characters"),
    ],
)
def test_bad_catalog_input_is_a_400_that_says_what(
    people: dict[str, Any], field: str, value: str, message: str
) -> None:
    response = as_(people["alice"]).post("/team/catalog/new", {**CATALOG_FORM, field: value})
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not CatalogServer.objects.filter(name="everything").exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "env",
            "LD_PRELOAD=/tmp/evil.so",
            "LD_PRELOAD cannot be set on a catalog server: the dynamic loader",
        ),
        ("env", "API_TOKEN=t\nPATH=/tmp/bin", "PATH cannot be set on a catalog server"),
        ("env", "HOME=/srv/shared", "HOME cannot be set on a catalog server"),
        ("env", "npm_config_registry=https://evil.example", "npm_config_registry cannot be set"),
        ("env_params", "NODE_OPTIONS", "NODE_OPTIONS cannot be set on a catalog server: Node.js"),
        ("env_params", "USER_TOKEN PYTHONPATH PYTHONSTARTUP", "PYTHONSTARTUP cannot be set"),
        ("env_params", "UV_INDEX_URL", "UV_INDEX_URL cannot be set"),
        ("env_params", "GIT_SSH_COMMAND", "GIT_SSH_COMMAND cannot be set"),
    ],
)
def test_a_variable_that_loads_code_is_refused_on_saving_with_the_reason(
    people: dict[str, Any], field: str, value: str, message: str
) -> None:
    alice = as_(people["alice"])
    response = alice.post("/team/catalog/new", {**CATALOG_FORM, field: value, "secret_env": ""})
    assert response.status_code == 400
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not CatalogServer.objects.filter(name="everything").exists()
    # Nor can an existing entry take one on.
    entry = people["a_entry"]
    data = {**CatalogForm.initial_of(entry), field: value, "secret_env": ""}
    assert alice.post(f"/team/catalog/{entry.pk}", data).status_code == 400
    entry.refresh_from_db()
    assert entry.env == {"API_KEY": "sk-live-123456"} and entry.env_params == []


def test_switches_that_name_no_code_may_be_set(people: dict[str, Any]) -> None:
    data = {**CATALOG_FORM, "env": "NODE_ENV=production\nPYTHONUNBUFFERED=1", "secret_env": "USER_TOKEN"}
    assert as_(people["alice"]).post("/team/catalog/new", data).status_code == 302
    assert CatalogServer.objects.get(name="everything").env == {
        "NODE_ENV": "production",
        "PYTHONUNBUFFERED": "1",
    }


def test_the_team_page_flags_an_entry_saved_before_the_rule(people: dict[str, Any]) -> None:
    CatalogServer.objects.filter(pk=people["a_entry"].pk).update(env_params=["LD_PRELOAD"])
    page = as_(people["bob"]).get("/team").content.decode()
    assert "Cannot start: it sets LD_PRELOAD" in page


def test_json_braces_in_an_argument_are_not_placeholders(people: dict[str, Any]) -> None:
    data = {**CATALOG_FORM, "args": '--config\n{"a": 1}', "params": ""}
    assert as_(people["alice"]).post("/team/catalog/new", data).status_code == 302


# --- settings ------------------------------------------------------------------------------------------


def test_an_admin_saves_the_team_settings(people: dict[str, Any]) -> None:
    data = {
        "allow_free_stdio": "on",
        "egress_allow": "10.20.0.0/16\nMCP.Internal.Example.\n192.168.1.7",
        "allow_public_shares": "on",
        "max_live_sessions": "4",
    }
    assert as_(people["alice"]).post("/team/settings", data).status_code == 302
    team = Team.objects.get(name="A")
    assert team.allow_free_stdio and team.allow_public_shares and team.max_live_sessions == 4
    assert team.egress_allow == ["10.20.0.0/16", "mcp.internal.example", "192.168.1.7/32"]
    assert as_(people["alice"]).post("/team/settings", {"max_live_sessions": ""}).status_code == 302
    team.refresh_from_db()
    assert (team.allow_free_stdio, team.egress_allow, team.max_live_sessions) == (False, [], None)
    assert not team.allow_public_shares


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"egress_allow": "http://x.example/path"}, "neither a host name nor an address or CIDR"),
        ({"egress_allow": "10.0.0.0/33"}, "neither a host name"),
        # The engine takes exact names only: a wildcard saved here would fail every session.
        ({"egress_allow": "*.corp.example"}, "neither a host name"),
        ({"max_live_sessions": "-1"}, "greater than or equal to 0"),
        ({"max_live_sessions": "many"}, "Enter a whole number"),
    ],
)
def test_bad_settings_are_a_400_that_says_what(
    people: dict[str, Any], data: dict[str, str], message: str
) -> None:
    response = as_(people["alice"]).post("/team/settings", data)
    assert response.status_code == 400 and message in response.content.decode()
    assert Team.objects.get(name="A").max_live_sessions is None


# --- the team switcher ---------------------------------------------------------------------------------


def test_the_switcher_shows_with_two_teams_and_switches_only_to_ones_own(people: dict[str, Any]) -> None:
    alice = as_(people["alice"])
    assert 'name="team"' not in alice.get("/").content.decode()
    Membership.objects.create(team=people["B"], user=people["alice"], role=Role.VIEWER)
    home = alice.get("/").content.decode()
    assert 'action="/team/switch"' in home and "A (admin)" in home and "B (viewer)" in home

    response = alice.post("/team/switch", {"team": str(people["B"].pk)})
    assert response.status_code == 302 and response["Location"] == "/"
    assert alice.session[access.TEAM_KEY] == people["B"].pk
    assert "Team B" in alice.get("/team").content.decode()
    # As a viewer of B, alice cannot change B's catalog.
    assert alice.post(f"/team/catalog/{people['b_entry'].pk}/delete").status_code == 403

    bob = as_(people["bob"])
    assert bob.post("/team/switch", {"team": str(people["B"].pk)}).status_code == 404
    assert access.TEAM_KEY not in bob.session
    for bad in ("", "x", "²", "9" * 40):
        assert bob.post("/team/switch", {"team": bad}).status_code in (400, 404), bad
