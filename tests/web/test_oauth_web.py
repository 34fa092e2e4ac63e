"""OAuth in the web app: the callback (state checked, one use, bound to its person), the settings a
server config carries to the engine, tokens kept encrypted per team and forgotten on request."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import connection
from django.test import AsyncClient
from support.oauth import protected_web
from support.teams import ateam_of, team_of
from support.web import live_runtime, logged_in_client, make_user, wait_until

from sessions.engine import HttpTarget
from sessions.models import (
    McpSession,
    OAuthAuthorization,
    OAuthTokens,
    ServerConfig,
    TimelineFrame,
    masked_config,
)
from sessions.runtime import client as runtime_client
from sessions.runtime import oauth as runtime_oauth
from sessions.runtime.oauth import state_hash
from sessions.servers import build_target
from sessions.teams.models import Activity, Membership, Role
from sessions.web.forms import ConnectForm, ServerForm

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def protected_url() -> Iterator[str]:
    with protected_web() as url:
        yield url


def _http_config(url: str) -> dict:
    return {
        "name": "protected",
        "transport": "http",
        "url": url,
        "headers": {},
        "bearer_token": "",
        "oauth": {"enabled": True, "redirect_uri": "http://testserver/oauth/callback"},
        "timeout": 30,
    }


@pytest.mark.slow
async def test_bob_cannot_complete_alices_authorization_and_alice_completes_it_once(
    protected_url: str,
) -> None:
    async with live_runtime():
        alice = await make_user("alice")
        bob = await make_user("bob")
        team = await ateam_of(alice)
        await Membership.objects.acreate(team=team, user=bob, role=Role.OPERATOR)
        session = await McpSession.objects.acreate(
            owner=alice, team=team, name="protected", config=_http_config(protected_url)
        )
        await runtime_client.start_session(session)
        waiting = await wait_until(
            lambda: OAuthAuthorization.objects.filter(session=session, ended__isnull=True).first(),
            what="an authorization waiting for alice",
        )
        assert waiting.user_id == alice.pk and waiting.host == urlsplit(protected_url).netloc
        # The test authorization server approves at once and sends the browser to our callback.
        async with httpx.AsyncClient() as http:
            answer = await http.get(waiting.url)
        back = urlsplit(answer.headers["location"])
        assert back.path == "/oauth/callback"
        callback = f"{back.path}?{back.query}"

        as_bob, as_alice = await logged_in_client(bob), await logged_in_client(alice)
        refused = await as_bob.get(callback)
        assert refused.status_code == 400
        assert "someone else started it" in refused.content.decode()
        assert await OAuthAuthorization.objects.filter(pk=waiting.pk, ended__isnull=True).aexists()

        taken = await as_alice.get(callback)
        assert taken.status_code == 200, taken.content.decode()
        assert "Back to the session" in taken.content.decode()
        await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").exists())
        again = await as_alice.get(callback)
        assert again.status_code == 400 and "used already" in again.content.decode()

        # The tokens are the team's, encrypted at rest: the column holds no access token in clear.
        stored = await wait_until(lambda: OAuthTokens.objects.filter(team=team).first())
        assert stored.data["token"]["access_token"]
        raw = await database_sync_to_async(_raw_tokens_column)(stored.pk)
        assert stored.data["token"]["access_token"] not in raw and raw.startswith("gAAAA")

        # Forgetting them (bob is an operator of the team) deletes them.
        forgot = await as_bob.post(f"/s/{session.public_id}/oauth/forget")
        assert forgot.status_code == 302
        assert not await OAuthTokens.objects.filter(team=team).aexists()


def _raw_tokens_column(pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT data FROM {OAuthTokens._meta.db_table} WHERE id = %s", [pk])
        return str(cursor.fetchone()[0])


async def test_an_unknown_state_is_a_400_that_says_so() -> None:
    alice = await make_user("alice")
    client = await logged_in_client(alice)
    assert (await client.get("/oauth/callback?code=x")).status_code == 400
    response = await client.get("/oauth/callback?code=x&state=never-issued")
    assert response.status_code == 400
    assert "No authorization of yours is waiting" in response.content.decode()


async def test_a_callback_without_the_session_cookie_moves_on_by_itself_to_our_own_site() -> None:
    """The session cookie is SameSite=Strict: the redirect from the authorization server has none."""
    response = await AsyncClient().get("/oauth/callback?code=c&state=s")
    assert response.status_code == 200
    assert response.headers["Refresh"] == "0; url=/oauth/callback?code=c&state=s&inspector_moved=1"
    still = await AsyncClient().get("/oauth/callback?code=c&state=s&inspector_moved=1")
    assert still.status_code == 403 and "Sign in to the inspector" in still.content.decode()


def test_the_connect_forms_oauth_settings_reach_the_engine_target_and_the_secret_is_masked() -> None:
    form = ConnectForm(
        {
            "transport": "http",
            "url": "https://mcp.example.com/mcp",
            "oauth": "on",
            "client_id": " app-1 ",
            "client_secret": "s3cret-value",
            "client_metadata_url": "https://app.example.com/client.json",
            "oauth_scope": "read  write",
            "protocol_version": "2025-11-25",
            "timeout": "60",
            "max_total_timeout": "600",
        }
    )
    assert form.is_valid(), form.errors
    config = form.snapshot()
    target = build_target(config)
    assert isinstance(target, HttpTarget) and target.oauth is not None
    assert (target.oauth.client_id, target.oauth.client_secret) == ("app-1", "s3cret-value")
    assert target.oauth.client_metadata_url == "https://app.example.com/client.json"
    assert target.oauth.scope == "read write"
    assert masked_config(config)["oauth"]["client_secret"] == "••••••"
    off = ConnectForm({**form.data, "oauth": ""})
    assert off.is_valid() and build_target(off.snapshot()).oauth is None  # type: ignore[union-attr]
    http_metadata = ConnectForm({**form.data, "client_metadata_url": "http://app.example.com/c.json"})
    assert not http_metadata.is_valid() and "https://" in str(http_metadata.errors["client_metadata_url"])


def test_a_saved_servers_client_secret_is_kept_when_left_blank_and_never_shown() -> None:
    alice, _ = User.objects.get_or_create(username="alice")
    server = ServerConfig.objects.create(
        team=team_of(alice),
        name="api",
        transport="http",
        url="https://mcp.example.com/mcp",
        oauth={"enabled": True, "client_id": "app-1", "client_secret": "kept-secret"},
    )
    shown = ServerForm(server)
    assert "kept-secret" not in str(shown["client_secret"]) and shown.has_client_secret
    form = ServerForm(
        server,
        {
            "name": "api",
            "transport": "http",
            "url": "https://mcp.example.com/mcp",
            "oauth": "on",
            "client_id": "app-2",
            "client_secret": "",
            "protocol_version": "2025-11-25",
            "timeout": "60",
            "max_total_timeout": "600",
        },
    )
    assert form.is_valid(), form.errors
    config = form.config()
    assert config["oauth"]["client_secret"] == "kept-secret" and config["oauth"]["client_id"] == "app-2"
    # A server saved before OAuth existed authorizes when asked.
    old = ServerConfig.objects.create(team=team_of(alice), name="old", transport="http", url="https://x/mcp")
    assert old.snapshot()["oauth"] == {"enabled": True}


async def test_forgetting_a_saved_servers_tokens_deletes_only_its_own() -> None:
    alice = await make_user("alice")
    team = await ateam_of(alice)
    server = await ServerConfig.objects.acreate(
        team=team, name="api", transport="http", url="https://mcp.example.com/mcp"
    )
    mine = OAuthTokens.key_for("https://mcp.example.com/mcp")
    await OAuthTokens.objects.acreate(team=team, key=mine, data={"token": {"access_token": "a"}})
    await OAuthTokens.objects.acreate(team=team, key="https://other.example/mcp", data={})
    client = await logged_in_client(alice)
    response = await client.post(f"/servers/{server.pk}/oauth/forget")
    assert response.status_code == 302
    assert [t.key async for t in OAuthTokens.objects.filter(team=team)] == ["https://other.example/mcp"]


def test_the_state_is_stored_only_as_its_hash() -> None:
    assert state_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


@pytest.mark.slow
async def test_an_authorization_nobody_comes_back_from_fails_the_flow_and_says_why(
    protected_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime_oauth, "AUTHORIZE_WAIT", 0.5)
    async with live_runtime():
        alice = await make_user("alice")
        session = await McpSession.objects.acreate(
            owner=alice, team=await ateam_of(alice), name="protected", config=_http_config(protected_url)
        )
        await runtime_client.start_session(session)
        await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="failed").exists())
        expired = await OAuthAuthorization.objects.aget(session=session)
        assert expired.outcome == "expired" and expired.ended is not None
        notes = [f.note async for f in TimelineFrame.objects.filter(session=session, kind="state")]
        assert any("nobody came back from the authorization server" in note for note in notes), notes


async def test_the_page_of_the_person_who_started_an_authorization_opens_it_once() -> None:
    alice, bob = await make_user("alice"), await make_user("bob")
    team = await ateam_of(alice)
    await Membership.objects.acreate(team=team, user=bob, role=Role.OPERATOR)
    session = await McpSession.objects.acreate(owner=alice, team=team, name="protected", status="connecting")
    url = "https://auth.example/authorize?client_id=c&state=s&x=<b>"
    waiting = await OAuthAuthorization.objects.acreate(
        session=session, user=alice, state_sha256=state_hash("open-once"), url=url
    )
    as_alice, as_bob = await logged_in_client(alice), await logged_in_client(bob)
    base = f"/s/{session.public_id}/"
    page = (await as_alice.get(base)).content.decode()
    opening = f'hx-post="{base}oauth/{waiting.pk}/open" hx-trigger="load"'
    assert opening in page and f'hx-post="{base}oauth/{waiting.pk}/cancel"' in page
    assert f"the session waits {int(runtime_oauth.AUTHORIZE_WAIT // 60)} minutes" in page
    assert opening not in (await as_bob.get(base)).content.decode()  # only alice can complete it

    first = (await as_alice.post(f"{base}oauth/{waiting.pk}/open")).content.decode()
    assert (
        'data-open-authorization="https://auth.example/authorize?client_id=c&amp;state=s&amp;x=&lt;b&gt;"'
        in first
    )
    # A reload, another tab, a card redrawn: opened already, not again.
    again = (await as_alice.post(f"{base}oauth/{waiting.pk}/open")).content.decode()
    assert "data-open-authorization" not in again and "opened already" in again
    assert (
        "data-open-authorization"
        not in (await as_bob.post(f"{base}oauth/{waiting.pk}/open")).content.decode()
    )
    assert (await as_alice.get(f"{base}oauth/{waiting.pk}/open")).status_code == 405

    # Cancel, with no owner waiting on it: the card goes all the same, and the activity log says who.
    cancelled = await as_bob.post(f"{base}oauth/{waiting.pk}/cancel", headers={"HX-Request": "true"})
    assert cancelled.status_code == 200 and f"authorization-{waiting.pk}" not in cancelled.content.decode()
    ended = await OAuthAuthorization.objects.aget(pk=waiting.pk)
    assert ended.outcome == "cancelled" and ended.ended is not None
    assert (await as_alice.post(f"{base}oauth/{waiting.pk}/open")).status_code == 404
    assert await Activity.objects.filter(session=session, user=bob, action__startswith="cancelled").aexists()


@pytest.mark.slow
async def test_cancelling_an_authorization_ends_the_sessions_wait_and_says_who(protected_url: str) -> None:
    async with live_runtime():
        alice = await make_user("alice")
        session = await McpSession.objects.acreate(
            owner=alice, team=await ateam_of(alice), name="protected", config=_http_config(protected_url)
        )
        await runtime_client.start_session(session)
        waiting = await wait_until(
            lambda: OAuthAuthorization.objects.filter(session=session, ended__isnull=True).first(),
            what="an authorization waiting for alice",
        )
        client = await logged_in_client(alice)
        response = await client.post(f"/s/{session.public_id}/oauth/{waiting.pk}/cancel")
        assert response.status_code == 302
        await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="failed").exists())
        assert (await OAuthAuthorization.objects.aget(pk=waiting.pk)).outcome == "cancelled"
        notes = [f.note async for f in TimelineFrame.objects.filter(session=session, kind="state")]
        assert any("the authorization was cancelled by alice" in note for note in notes), notes
