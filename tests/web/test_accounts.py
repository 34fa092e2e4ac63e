"""Accounts in the hosted mode: password login (rate-limited), logout, the account page and its login
sessions, invitations, the first admin from `create_admin`; and the local mode left as it was.

alice is an admin of team A, bob an operator there; dave is on team B. Passwords are hashed with a fast
hasher here: what is tested is who gets in, not the hasher.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.core.cache.backends.redis import RedisCache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone
from support.caches import shared_redis_cache
from support.paths import REPO

from inspector import auth
from sessions.teams import access, invitations
from sessions.teams.logins import local_user
from sessions.teams.models import Invitation, LoginSession, Membership, Role, Team

pytestmark = pytest.mark.django_db

PASSWORD = "plover-kettle-49"
ERROR = re.compile(r'<p class="error" role="alert">([^<]+)</p>')


@pytest.fixture(autouse=True)
def hosted(settings: Any) -> Iterator[None]:
    """The hosted mode, a fast password hasher, and no login failures counted by an earlier test."""
    settings.INSPECTOR_HOSTED = True
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def team_a() -> Team:
    return Team.objects.create(name="A")


@pytest.fixture
def alice(team_a: Team) -> User:
    user = User.objects.create_user("alice", password=PASSWORD)
    Membership.objects.create(team=team_a, user=user, role=Role.ADMIN)
    return user


@pytest.fixture
def dave() -> User:
    user = User.objects.create_user("dave", password=PASSWORD)
    Membership.objects.create(team=Team.objects.create(name="B"), user=user, role=Role.ADMIN)
    return user


def log_in(client: Client, username: str, password: str = PASSWORD, **extra: Any) -> Any:
    return client.post("/auth/login", {"username": username, "password": password}, **extra)


def logged_in(client: Client) -> bool:
    return SESSION_KEY in client.session


# --- password login -----------------------------------------------------------------------------------


def test_the_login_page_asks_for_a_username_and_password_and_offers_no_token_form(client: Client) -> None:
    page = client.get("/auth/login").content.decode()
    assert 'name="username"' in page and 'name="password"' in page
    assert 'name="token"' not in page


def test_a_right_password_logs_in_with_a_new_session_key_and_follows_next(
    client: Client, alice: User
) -> None:
    client.get("/auth/login")
    before = client.cookies.get(settings.SESSION_COOKIE_NAME)
    response = log_in(client, "alice", next="/search")
    assert response.status_code == 302 and response["Location"] == "/"
    response = client.post("/auth/login", {"username": "alice", "password": PASSWORD, "next": "/search"})
    assert response.status_code == 302 and response["Location"] == "/search"
    assert logged_in(client)
    assert client.cookies[settings.SESSION_COOKIE_NAME].value != (before.value if before else None)
    assert client.get("/").status_code == 200


def test_a_wrong_password_and_an_unknown_username_get_the_same_refusal(client: Client, alice: User) -> None:
    wrong = log_in(client, "alice", "not-the-password")
    unknown = log_in(client, "nobody", "not-the-password")
    assert wrong.status_code == unknown.status_code == 403
    assert ERROR.findall(wrong.content.decode()) == ERROR.findall(unknown.content.decode())
    assert not logged_in(client)


def test_a_user_made_with_createsuperuser_can_log_in(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)
    call_command("createsuperuser", "--noinput", "--username", "root", "--email", "root@example.com")
    response = log_in(client, "root")
    assert response.status_code == 302 and logged_in(client)


def test_the_token_login_is_off_in_the_hosted_mode(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auth, "login_token", auth.LoginToken())
    token = auth.login_token.issue()
    assert client.get("/auth/token", {"token": token}).status_code == 404
    response = client.post("/auth/token", {"token": token})
    assert response.status_code == 404 and "token login is off" in response.content.decode()
    assert not logged_in(client)


def test_five_failures_for_a_username_refuse_it_with_429_even_with_the_right_password(
    client: Client, alice: User
) -> None:
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
        assert log_in(client, "alice", "wrong-guess").status_code == 403
    refused = log_in(client, "alice")
    assert refused.status_code == 429
    assert "Too many failed logins" in refused.content.decode()
    assert int(refused["Retry-After"]) == settings.INSPECTOR_LOGIN_WINDOW
    assert not logged_in(client)
    # Another address does not help: the username is counted, whatever its case.
    assert log_in(Client(REMOTE_ADDR="10.9.9.9"), "ALICE").status_code == 429
    # Another account from the same address still gets in (20 per address).
    User.objects.create_user("erin", password=PASSWORD)
    assert log_in(client, "erin").status_code == 302


def test_an_unknown_username_is_limited_like_a_real_one(client: Client, alice: User) -> None:
    for name in ("alice", "nobody"):
        for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
            log_in(client, name, "wrong-guess")
    real, made_up = log_in(client, "alice", "wrong-guess"), log_in(client, "nobody", "wrong-guess")
    assert real.status_code == made_up.status_code == 429
    assert ERROR.findall(real.content.decode()) == ERROR.findall(made_up.content.decode())


def test_twenty_failures_from_one_address_refuse_it_whatever_the_username(
    client: Client, alice: User
) -> None:
    for n in range(settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS):
        assert log_in(client, f"guess{n}", "wrong-guess").status_code == 403
    assert log_in(client, "alice").status_code == 429
    assert log_in(Client(REMOTE_ADDR="10.1.2.3"), "alice").status_code == 302


def test_the_window_passing_lets_logins_in_again(client: Client, alice: User, settings: Any) -> None:
    settings.INSPECTOR_LOGIN_WINDOW = 60
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
        log_in(client, "alice", "wrong-guess")
    assert log_in(client, "alice").status_code == 429
    # What the window's end does, without waiting for it: the counters expire with it.
    cache.clear()
    assert log_in(client, "alice").status_code == 302


def test_behind_proxies_the_client_address_is_the_one_they_forwarded(
    client: Client, alice: User, settings: Any
) -> None:
    settings.INSPECTOR_PROXIES = 1
    for n in range(settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS):
        log_in(client, f"guess{n}", "wrong", HTTP_X_FORWARDED_FOR=f"6.6.6.6, 203.0.113.{n}")
    # Twenty different clients behind one proxy: none of them is blocked by the others.
    assert log_in(client, "alice", HTTP_X_FORWARDED_FOR="203.0.113.200").status_code == 302
    assert LoginSession.objects.get(user=alice).address == "203.0.113.200"


def test_the_rate_limit_is_shared_through_redis_when_redis_url_is_set(settings: Any, alice: User) -> None:
    """Two web processes share their counts: here two cache connections to one Redis database."""
    from django.core.cache import caches

    settings.CACHES = shared_redis_cache()
    try:
        assert isinstance(caches["default"], RedisCache)
        for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
            log_in(Client(), "alice", "wrong-guess")
        caches["default"].close()
        assert log_in(Client(), "alice").status_code == 429
    finally:
        caches["default"].clear()
        caches["default"].close()


@pytest.mark.slow
def test_settings_use_redis_for_the_cache_when_redis_url_is_set() -> None:
    script = "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "inspector.settings", "PYTHONPATH": str(REPO)}
    for redis_url, backend in (("redis://127.0.0.1:6379/12", "RedisCache"), ("", "LocMemCache")):
        out = subprocess.run(
            [sys.executable, "-c", f"import django; django.setup(); {script}"],
            env={**env, "REDIS_URL": redis_url},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert out.stdout.strip().endswith(backend)


# --- logout --------------------------------------------------------------------------------------------


def test_logout_is_a_post_that_ends_the_session(client: Client, alice: User) -> None:
    log_in(client, "alice")
    assert client.get("/auth/logout").status_code == 405
    assert logged_in(client)
    response = client.post("/auth/logout")
    assert response.status_code == 302 and response["Location"] == "/auth/login?logged_out=1"
    assert not logged_in(client)
    assert client.get("/").status_code == 302
    assert not LoginSession.objects.filter(user=alice).exists()
    assert "You are logged out" in client.get(response["Location"]).content.decode()


def test_logout_needs_the_csrf_token(alice: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post("/auth/logout").status_code == 403
    assert logged_in(client)


def test_every_page_has_a_logout_button(client: Client, alice: User) -> None:
    log_in(client, "alice")
    for page in ("/", "/search", "/account", "/team"):
        assert 'action="/auth/logout"' in client.get(page).content.decode(), page


def test_in_the_local_mode_logout_says_a_restart_prints_a_new_url(client: Client, settings: Any) -> None:
    settings.INSPECTOR_HOSTED = False
    client.force_login(local_user())
    client.post("/auth/logout")
    assert not logged_in(client)
    page = client.get("/auth/login?logged_out=1").content.decode()
    assert "restart <code>mcp-inspector</code> for a new one" in page
    # The local login page is the token's, as before; password logins are refused.
    assert 'name="token"' in page and 'name="password"' not in page
    assert log_in(client, local_user().username, "anything").status_code == 405


# --- the account page: login sessions ------------------------------------------------------------------


def test_a_login_is_recorded_with_where_and_when_and_listed_on_the_account_page(
    client: Client, alice: User
) -> None:
    log_in(client, "alice", HTTP_USER_AGENT="Firefox/140 on the laptop", REMOTE_ADDR="192.0.2.7")
    row = LoginSession.objects.get(user=alice)
    assert row.session_key == client.session.session_key
    assert (row.address, row.user_agent) == ("192.0.2.7", "Firefox/140 on the laptop")
    page = client.get("/account").content.decode()
    assert "192.0.2.7" in page and "Firefox/140 on the laptop" in page and "this browser" in page


def test_ending_my_other_sessions_signs_out_the_other_browsers_and_keeps_this_one(
    client: Client, alice: User
) -> None:
    laptop, phone = Client(), Client(HTTP_USER_AGENT="phone")
    for other in (laptop, phone):
        log_in(other, "alice")
        assert other.get("/").status_code == 200
    log_in(client, "alice")
    assert LoginSession.objects.filter(user=alice).count() == 3

    response = client.post("/account/sessions/end-others")
    assert response.status_code == 302
    for other in (laptop, phone):
        assert other.get("/").status_code == 302  # its cookie no longer works
    assert client.get("/").status_code == 200
    assert list(LoginSession.objects.filter(user=alice).values_list("session_key", flat=True)) == [
        client.session.session_key
    ]
    assert Session.objects.count() == 1


def test_ending_one_chosen_session(client: Client, alice: User) -> None:
    laptop, phone = Client(), Client()
    log_in(laptop, "alice")
    log_in(phone, "alice")
    log_in(client, "alice")
    chosen = LoginSession.objects.get(session_key=phone.session.session_key)
    assert client.post(f"/account/sessions/{chosen.pk}/end").status_code == 302
    assert phone.get("/").status_code == 302
    assert laptop.get("/").status_code == 200
    # This browser's own row is ended by logging out, not here.
    own = LoginSession.objects.get(session_key=client.session.session_key)
    response = client.post(f"/account/sessions/{own.pk}/end")
    assert response.status_code == 400 and "use Log out" in response.content.decode()


def test_no_one_ends_another_persons_session_by_its_id(client: Client, alice: User, dave: User) -> None:
    daves = Client()
    log_in(daves, "dave")
    log_in(client, "alice")
    row = LoginSession.objects.get(user=dave)
    assert client.post(f"/account/sessions/{row.pk}/end").status_code == 404
    assert client.post("/account/sessions/end-others").status_code == 302
    assert daves.get("/").status_code == 200


def test_changing_the_password_ends_the_other_sessions_and_keeps_this_one(
    client: Client, alice: User
) -> None:
    other = Client()
    log_in(other, "alice")
    log_in(client, "alice")
    new = "another-plover-77"
    wrong = client.post(
        "/account/password", {"old_password": "wrong", "new_password1": new, "new_password2": new}
    )
    assert wrong.status_code == 400
    weak = client.post(
        "/account/password", {"old_password": PASSWORD, "new_password1": "12345", "new_password2": "12345"}
    )
    assert weak.status_code == 400 and "too short" in weak.content.decode()
    response = client.post(
        "/account/password", {"old_password": PASSWORD, "new_password1": new, "new_password2": new}
    )
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    assert other.get("/").status_code == 302
    assert log_in(Client(), "alice", new).status_code == 302


def test_guessing_the_current_password_on_the_account_page_is_rate_limited(
    client: Client, alice: User
) -> None:
    log_in(client, "alice")
    data = {"old_password": "guess", "new_password1": "x-plover-99", "new_password2": "x-plover-99"}
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
        assert client.post("/account/password", data).status_code == 400
    data["old_password"] = PASSWORD
    assert client.post("/account/password", data).status_code == 429


# --- invitations -------------------------------------------------------------------------------------


def invite(team: Team, by: User, role: str = Role.OPERATOR, days: int = 7) -> str:
    return Invitation.make(team, role, by, "for bob", days)[1]


def sign_up(client: Client, token: str, username: str = "bob", password: str = PASSWORD) -> Any:
    data = {"token": token, "action": "create", "username": username, "password1": password}
    return client.post("/auth/invite", {**data, "password2": password})


def test_an_invitation_link_shows_the_team_and_role_and_changes_nothing_on_get(
    client: Client, team_a: Team, alice: User
) -> None:
    token = invite(team_a, alice)
    users, memberships = User.objects.count(), Membership.objects.count()
    response = client.get("/auth/invite", {"token": token})
    page = response.content.decode()
    assert response.status_code == 200
    assert "Join A" in page and "operator" in page and 'name="password1"' in page
    assert response["Referrer-Policy"] == "strict-origin"
    assert "no-store" in response["Cache-Control"]
    assert (User.objects.count(), Membership.objects.count()) == (users, memberships)
    assert Invitation.objects.get().state == "open"


def test_a_new_person_makes_an_account_joins_with_the_role_and_is_logged_in(
    client: Client, team_a: Team, alice: User
) -> None:
    token = invite(team_a, alice)
    response = sign_up(client, token)
    assert response.status_code == 302 and response["Location"] == "/"
    bob = User.objects.get(username="bob")
    assert Membership.objects.get(user=bob).role == Role.OPERATOR
    assert logged_in(client) and client.session[access.TEAM_KEY] == team_a.pk
    invitation = Invitation.objects.get()
    assert invitation.state == "used" and invitation.used_by == bob
    assert log_in(Client(), "bob").status_code == 302


def test_an_invitation_works_once(client: Client, team_a: Team, alice: User) -> None:
    token = invite(team_a, alice)
    assert sign_up(client, token).status_code == 302
    again = sign_up(Client(), token, "mallory")
    assert again.status_code == 410 and "already used" in again.content.decode()
    assert not User.objects.filter(username="mallory").exists()
    assert Client().get("/auth/invite", {"token": token}).status_code == 410


def test_an_expired_invitation_is_refused(client: Client, team_a: Team, alice: User) -> None:
    token = invite(team_a, alice)
    Invitation.objects.update(expires=timezone.now() - timedelta(seconds=1))
    response = sign_up(client, token)
    assert response.status_code == 410 and "expired" in response.content.decode()
    assert not User.objects.filter(username="bob").exists()


def test_a_revoked_invitation_is_refused(client: Client, team_a: Team, alice: User) -> None:
    token = invite(team_a, alice)
    admin = Client()
    admin.force_login(alice)
    invitation = Invitation.objects.get()
    assert admin.post(f"/team/invitations/{invitation.pk}/revoke").status_code == 302
    response = sign_up(client, token)
    assert response.status_code == 410 and "revoked" in response.content.decode()
    assert not User.objects.filter(username="bob").exists()


def test_an_unknown_token_is_a_404_and_leaves_nothing_behind(client: Client) -> None:
    for token in ("", "x" * 43, "x" * 5000):
        assert client.get("/auth/invite", {"token": token}).status_code == 404
        assert sign_up(client, token).status_code == 404
    assert not User.objects.exists()


def test_a_weak_password_or_a_taken_username_keeps_the_invitation_open(
    client: Client, team_a: Team, alice: User
) -> None:
    token = invite(team_a, alice)
    weak = sign_up(client, token, password="password")
    assert weak.status_code == 400 and "too common" in weak.content.decode()
    taken = sign_up(client, token, username="ALICE")
    assert taken.status_code == 400 and "already exists" in taken.content.decode()
    assert Invitation.objects.get().state == "open"
    assert sign_up(client, token).status_code == 302


def test_a_signed_in_person_joins_with_their_account(
    client: Client, team_a: Team, alice: User, dave: User
) -> None:
    token = invite(team_a, alice, Role.VIEWER)
    log_in(client, "dave")
    page = client.get("/auth/invite", {"token": token}).content.decode()
    assert "Join as dave" in page
    response = client.post("/auth/invite", {"token": token, "action": "join"})
    assert response.status_code == 302
    assert Membership.objects.get(user=dave, team=team_a).role == Role.VIEWER
    assert client.session[access.TEAM_KEY] == team_a.pk
    # Signed in, one cannot make a second account with the link; signed out, one cannot "join".
    other = invite(team_a, alice)
    assert sign_up(client, other, "eve").status_code == 400
    assert Client().post("/auth/invite", {"token": other, "action": "join"}).status_code == 403


def test_a_member_is_not_joined_twice_and_the_link_stays_open(
    client: Client, team_a: Team, alice: User
) -> None:
    token = invite(team_a, alice, Role.VIEWER)
    client.force_login(alice)
    response = client.post("/auth/invite", {"token": token, "action": "join"})
    assert response.status_code == 409 and "already a member" in response.content.decode()
    assert Membership.objects.get(user=alice).role == Role.ADMIN
    assert Invitation.objects.get().state == "open"


def test_accept_is_the_one_way_in_for_other_logins(team_a: Team, alice: User, dave: User) -> None:
    """What a single sign-on callback calls: a clear error, and no membership, when the link is spent."""
    token = invite(team_a, alice)
    membership = invitations.accept(token, dave)
    assert (membership.team, membership.role) == (team_a, Role.OPERATOR)
    with pytest.raises(invitations.InvitationError, match="already used") as raised:
        invitations.accept(token, User.objects.create_user("frank"))
    assert raised.value.status == 410


def test_the_invite_page_offers_single_sign_on_when_it_is_configured(
    client: Client, team_a: Team, alice: User, settings: Any
) -> None:
    token = invite(team_a, alice)
    assert "single sign-on" not in client.get("/auth/invite", {"token": token}).content.decode()
    settings.INSPECTOR_OIDC_ISSUER = "https://id.example.com"
    page = client.get("/auth/invite", {"token": token}).content.decode()
    assert "sign in with single sign-on" in page
    assert "/auth/oidc/login?next=%2Fauth%2Finvite%3Ftoken%3D" in page


def test_invitations_are_off_in_the_local_mode(
    client: Client, team_a: Team, alice: User, settings: Any
) -> None:
    token = invite(team_a, alice)
    settings.INSPECTOR_HOSTED = False
    assert client.get("/auth/invite", {"token": token}).status_code == 404
    assert sign_up(client, token).status_code == 404
    assert not User.objects.filter(username="bob").exists()


def test_the_invitation_token_is_redacted_from_logs() -> None:
    line = auth.strip_query_string('"GET /auth/invite?token=s3cr3t-T0ken HTTP/1.1" 200')
    assert "s3cr3t" not in line and "/auth/invite?[redacted]" in line


# --- create_admin --------------------------------------------------------------------------------------


def test_create_admin_makes_the_account_the_team_and_the_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECTOR_ADMIN_PASSWORD", PASSWORD)
    out = io.StringIO()
    call_command("create_admin", "root", "--team", "Platform", stdout=out)
    assert "Created the account root" in out.getvalue()
    membership = Membership.objects.get(user__username="root")
    assert (membership.team.name, membership.role) == ("Platform", Role.ADMIN)
    client = Client()
    assert log_in(client, "root").status_code == 302
    assert "Team Platform" in client.get("/team").content.decode()


def test_create_admin_on_an_existing_account_only_makes_it_admin(
    alice: User, team_a: Team, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INSPECTOR_ADMIN_PASSWORD", raising=False)
    bob = User.objects.create_user("bob", password=PASSWORD)
    Membership.objects.create(team=team_a, user=bob, role=Role.VIEWER)
    call_command("create_admin", "bob", "--team", "A", stdout=io.StringIO())
    assert Membership.objects.get(user=bob).role == Role.ADMIN
    assert User.objects.get(username="bob").check_password(PASSWORD)


def test_create_admin_refuses_a_weak_password_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECTOR_ADMIN_PASSWORD", "1234")
    with pytest.raises(CommandError, match="password is refused"):
        call_command("create_admin", "root", "--team", "Platform")
    monkeypatch.delenv("INSPECTOR_ADMIN_PASSWORD")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with pytest.raises(CommandError, match="Set INSPECTOR_ADMIN_PASSWORD"):
        call_command("create_admin", "root", "--team", "Platform")
    assert not User.objects.exists() and not Team.objects.exists()


def test_create_admin_asks_for_the_password_at_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INSPECTOR_ADMIN_PASSWORD", raising=False)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    typed = iter([PASSWORD, PASSWORD])
    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(typed))
    call_command("create_admin", "root", "--team", "Platform", stdout=io.StringIO())
    assert User.objects.get(username="root").check_password(PASSWORD)
