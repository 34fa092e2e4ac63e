"""The home page's session list follows new sessions while it is open (an htmx poll of its fragment)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from support.teams import team_of

from sessions.models import McpSession

pytestmark = pytest.mark.django_db

FRAGMENT = {"HX-Request": "true", "HX-Target": "home-sessions"}


def person() -> tuple[Client, User]:
    user = User.objects.create_user("alice")
    client = Client()
    client.force_login(user)
    return client, user


def test_the_home_page_asks_for_its_session_list_again_every_few_seconds() -> None:
    client, _ = person()
    page = client.get("/").content.decode()
    assert 'id="home-sessions"' in page and 'hx-trigger="every 3s"' in page and 'hx-get="/"' in page


def test_the_list_fragment_shows_a_session_started_after_the_page_was_loaded_and_nothing_else() -> None:
    client, user = person()
    assert "No sessions yet" in client.get("/", headers=FRAGMENT).content.decode()
    McpSession.objects.create(team=team_of(user), name="a tap that just started", config={}, status="ready")
    fragment = client.get("/", headers=FRAGMENT).content.decode()
    assert "a tap that just started" in fragment and fragment.lstrip().startswith('<div id="home-sessions"')
    assert "Connect to an MCP server" not in fragment and "<html" not in fragment


def test_another_teams_new_session_never_shows_in_the_fragment() -> None:
    client, _ = person()
    bob = User.objects.create_user("bob")
    McpSession.objects.create(team=team_of(bob), name="bob's secret session", config={}, status="ready")
    assert "bob's secret session" not in client.get("/", headers=FRAGMENT).content.decode()
