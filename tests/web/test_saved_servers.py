"""Saved servers edited from the home page, and the home page's sessions a page at a time."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from support.teams import team_of

from sessions.models import McpSession, ServerConfig
from sessions.teams.models import Membership, Role, Team

pytestmark = pytest.mark.django_db

SECRETS = ("sekrit-bearer", "sekrit-header", "sekrit-env")
FORM = {"protocol_version": "2025-11-25", "mode": "handshake", "timeout": "60", "max_total_timeout": "600"}


def person(name: str = "alice") -> tuple[Client, Team]:
    user = User.objects.create_user(name)
    client = Client()
    client.force_login(user)
    return client, team_of(user)


def servers(team: Team) -> tuple[ServerConfig, ServerConfig]:
    http = ServerConfig.objects.create(
        team=team,
        name="remote",
        transport="http",
        url="https://mcp.example.com/mcp",
        headers={"Authorization": "Bearer sekrit-header", "X-Trace": "on"},
        bearer_token="sekrit-bearer",
    )
    stdio = ServerConfig.objects.create(
        team=team,
        name="local",
        command="/usr/bin/node",
        args=["server.js", "--port", "3001"],
        env={"API_KEY": "sekrit-env", "MODE": "fast"},
        secret_env=["API_KEY"],
    )
    return http, stdio


def test_the_edit_form_shows_a_saved_servers_settings_and_none_of_its_secrets() -> None:
    client, team = person()
    http, stdio = servers(team)
    for server in (http, stdio):
        page = client.get(f"/servers/{server.pk}/edit").content.decode()
        assert not [s for s in SECRETS if s in page], server.name
    page = client.get(f"/servers/{http.pk}/edit").content.decode()
    assert "https://mcp.example.com/mcp" in page and "X-Trace: on" in page
    assert "Remove Authorization" in page and "Remove the stored bearer token" in page
    page = client.get(f"/servers/{stdio.pk}/edit").content.decode()
    assert "/usr/bin/node server.js --port 3001" in page and "MODE=fast" in page
    assert "Remove API_KEY" in page


def test_a_blank_secret_keeps_the_stored_value_a_typed_one_replaces_it_and_remove_drops_it() -> None:
    client, team = person()
    http, stdio = servers(team)
    form = {**FORM, "name": "remote", "transport": "http", "url": "https://mcp.example.com/v2", "headers": ""}
    assert client.post(f"/servers/{http.pk}/edit", form).status_code == 302
    http.refresh_from_db()
    assert http.url == "https://mcp.example.com/v2"
    assert http.bearer_token == "sekrit-bearer"
    assert http.headers == {"Authorization": "Bearer sekrit-header"}  # X-Trace was in the box, now empty

    form |= {"bearer_token": "new-bearer", "clear:header:Authorization": "on"}
    assert client.post(f"/servers/{http.pk}/edit", form).status_code == 302
    http.refresh_from_db()
    assert (http.bearer_token, http.headers) == ("new-bearer", {})
    form = {**form, "bearer_token": "", "clear_bearer_token": "on"}
    assert client.post(f"/servers/{http.pk}/edit", form).status_code == 302
    http.refresh_from_db()
    assert http.bearer_token == ""

    form = {**FORM, "name": "renamed", "transport": "stdio", "command": "node server.js", "env": "MODE=slow"}
    assert client.post(f"/servers/{stdio.pk}/edit", form).status_code == 302
    stdio.refresh_from_db()
    assert (stdio.name, stdio.command, stdio.args) == ("renamed", "node", ["server.js"])
    assert stdio.env == {"MODE": "slow", "API_KEY": "sekrit-env"} and stdio.secret_env == ["API_KEY"]
    form |= {"secret:env:API_KEY": "rotated"}
    assert client.post(f"/servers/{stdio.pk}/edit", form).status_code == 302
    stdio.refresh_from_db()
    assert stdio.env["API_KEY"] == "rotated"
    form = {**form, "secret:env:API_KEY": "", "clear:env:API_KEY": "on"}
    assert client.post(f"/servers/{stdio.pk}/edit", form).status_code == 302
    stdio.refresh_from_db()
    assert stdio.env == {"MODE": "slow"}


def test_a_form_with_errors_changes_nothing_and_keeps_no_stored_secret_on_the_page() -> None:
    client, team = person()
    http, stdio = servers(team)
    form = {**FORM, "name": "local", "transport": "http", "url": "https://mcp.example.com/mcp"}
    taken = client.post(f"/servers/{http.pk}/edit", form)
    assert taken.status_code == 422
    assert "another saved server of the team has this name" in taken.content.decode()
    bad = client.post(f"/servers/{http.pk}/edit", {**form, "name": "remote", "url": "javascript:alert(1)"})
    assert bad.status_code == 422 and "http:// or https://" in bad.content.decode()
    assert not [s for s in SECRETS if s in taken.content.decode() + bad.content.decode()]
    http.refresh_from_db()
    assert (http.name, http.url) == ("remote", "https://mcp.example.com/mcp")


def test_only_the_teams_operators_edit_and_only_by_post() -> None:
    client, team = person()
    http, _ = servers(team)
    viewer = User.objects.create_user("carol")
    Membership.objects.create(team=team, user=viewer, role=Role.VIEWER)
    as_viewer = Client()
    as_viewer.force_login(viewer)
    assert as_viewer.get(f"/servers/{http.pk}/edit").status_code == 403
    assert "edit" not in as_viewer.get("/").content.decode().split("Saved servers")[1].split("Import")[0]
    stranger, _ = person("dave")
    assert stranger.get(f"/servers/{http.pk}/edit").status_code == 404
    form = {**FORM, "name": "hijacked", "transport": "http", "url": "https://evil.example/mcp"}
    assert stranger.post(f"/servers/{http.pk}/edit", form).status_code == 404
    assert client.put(f"/servers/{http.pk}/edit").status_code == 405
    http.refresh_from_db()
    assert http.name == "remote"


def test_the_hosted_mode_refuses_a_command_line_unless_the_team_allows_them(settings: Any) -> None:
    settings.INSPECTOR_HOSTED = True
    client, team = person()
    http, stdio = servers(team)
    form = {**FORM, "name": "remote", "transport": "stdio", "command": "sh -c id"}
    refused = client.post(f"/servers/{http.pk}/edit", form)
    assert refused.status_code == 422 and "approved catalog only" in refused.content.decode()
    http.refresh_from_db()
    assert http.transport == "http"
    form = {**FORM, "name": "local", "transport": "http", "url": "https://mcp.example.com/mcp"}
    assert client.post(f"/servers/{stdio.pk}/edit", form).status_code == 302  # HTTP: allowed
    team.allow_free_stdio = True
    team.save()
    form = {**FORM, "name": "remote", "transport": "stdio", "command": "sh -c id"}
    assert client.post(f"/servers/{http.pk}/edit", form).status_code == 302


def test_the_home_page_lists_sessions_fifty_a_page_with_older_and_newer_links() -> None:
    client, team = person()
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    made = McpSession.objects.bulk_create(
        McpSession(team=team, name=f"session {i:03}", config={}, status="closed") for i in range(120)
    )
    for i, session in enumerate(made):  # created is auto_now_add: set it after
        McpSession.objects.filter(pk=session.pk).update(created=start + datetime.timedelta(minutes=i))
    first = client.get("/").content.decode()
    assert "session 119" in first and "session 070" in first and "session 069" not in first
    assert 'href="/?page=2"' in first and "Newer sessions" not in first and "page 1 of 3" in first
    last = client.get("/?page=3").content.decode()
    assert "session 019" in last and "session 000" in last and "session 020" not in last
    assert 'href="/?page=2"' in last and "Older sessions" not in last
    for bad in ("4", "0", "x", "-1", "²"):
        response = client.get(f"/?page={bad}")
        assert response.status_code == 400, bad
        assert "page must be a whole number from 1 to 3" in response.content.decode(), bad


def test_the_tasks_switch_is_saved_with_the_server_and_reaches_the_engine_options() -> None:
    from sessions.servers import build_options

    client, team = person()
    _, stdio = servers(team)
    box = 'name="tasks"'
    page = client.get(f"/servers/{stdio.pk}/edit").content.decode()
    assert re.search(box + r"[^>]*checked", page)  # on for a server saved before the switch
    form = {**FORM, "name": "local", "transport": "stdio", "command": "node server.js", "sampling": "on"}
    assert client.post(f"/servers/{stdio.pk}/edit", form).status_code == 302
    stdio.refresh_from_db()
    assert stdio.capabilities["tasks"] is False
    assert not re.search(box + r"[^>]*checked", client.get(f"/servers/{stdio.pk}/edit").content.decode())
    options = build_options(stdio.snapshot())
    assert options.capabilities.tasks is False and "tasks" not in options.capabilities.to_wire("2025-11-25")
    assert client.post(f"/servers/{stdio.pk}/edit", {**form, "tasks": "on"}).status_code == 302
    stdio.refresh_from_db()
    assert build_options(stdio.snapshot()).capabilities.to_wire("2025-11-25")["tasks"]["requests"] == {
        "sampling": {"createMessage": {}}
    }
