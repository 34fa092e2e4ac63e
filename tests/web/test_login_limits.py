"""The login limit cannot be walked around: parallel guesses, look-alike usernames, one address written
many ways, invitation links as a username oracle; and a password change keeps its browser's login row.

alice is an admin of team A. Passwords are hashed with a fast hasher; what is tested is how many
password checks happen and who gets in.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.models import User
from django.core.cache import cache, caches
from django.db import connections
from django.test import Client, override_settings
from support.caches import shared_redis_cache

from sessions.teams import logins
from sessions.teams.models import Invitation, LoginSession, Membership, Role, Team
from sessions.teams.throttle import address_group, username_key

pytestmark = pytest.mark.django_db

PASSWORD = "plover-kettle-49"
WAIT = 30.0


@pytest.fixture(autouse=True)
def hosted(settings: Any) -> Iterator[None]:
    """The hosted mode and no failures counted by an earlier test."""
    settings.INSPECTOR_HOSTED = True
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


def log_in(client: Client, username: str, password: str = PASSWORD, **extra: Any) -> Any:
    return client.post("/auth/login", {"username": username, "password": password}, **extra)


def logged_in_as(client: Client) -> str | None:
    pk = client.session.get(SESSION_KEY)
    return User.objects.get(pk=pk).username if pk else None


# --- parallel guesses --------------------------------------------------------------------------------


class HeldChecks:
    """Every password check waits at the hasher until the test lets them all through, and is counted:
    the widest window a check-then-count limit could leave open, held open on purpose."""

    def __init__(self) -> None:
        self.checks = 0
        self.answered: list[int] = []
        self.changed = threading.Condition()
        self.opened = threading.Event()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        verify = MD5PasswordHasher.verify

        def held(hasher: MD5PasswordHasher, password: str, encoded: str) -> bool:
            with self.changed:
                self.checks += 1
                self.changed.notify_all()
            assert self.opened.wait(WAIT), "the test never let the checks through"
            return verify(hasher, password, encoded)

        monkeypatch.setattr(MD5PasswordHasher, "verify", held)

    def answer(self, status: int) -> None:
        with self.changed:
            self.answered.append(status)
            self.changed.notify_all()

    def wait_until_all_are_checking_or_answered(self, attempts: int) -> None:
        with self.changed:
            settled = self.changed.wait_for(lambda: self.checks + len(self.answered) >= attempts, WAIT)
        assert settled, (self.checks, self.answered)


@pytest.fixture(params=["local memory", "redis"])
def shared_cache(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    """The cache one web process has (its memory) and the one many share (Redis)."""
    if request.param == "redis":
        settings.CACHES = shared_redis_cache()
    yield request.param
    caches["default"].clear()
    caches["default"].close()


@pytest.mark.django_db(transaction=True)
def test_sixty_parallel_wrong_passwords_for_one_user_get_five_checks_and_fifty_five_refusals(
    alice: User, shared_cache: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldChecks()
    held.install(monkeypatch)
    attempts = 60

    def guess(n: int) -> None:
        try:
            response = log_in(Client(REMOTE_ADDR="198.51.100.7"), "alice", f"wrong-guess-{n}")
            held.answer(response.status_code)
        finally:
            connections.close_all()
            caches["default"].close()

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(attempts)]
    for thread in threads:
        thread.start()
    try:
        # Every guess is now either at the hasher or answered: a limit checked before the hash and
        # counted after it would have all sixty at the hasher here.
        held.wait_until_all_are_checking_or_answered(attempts)
        checking = held.checks
    finally:
        held.opened.set()
        for thread in threads:
            thread.join(WAIT)
    limit = settings.INSPECTOR_LOGIN_FAILURES_PER_USER
    assert checking == held.checks == limit
    assert Counter(held.answered) == {403: limit, 429: attempts - limit}
    # The five failures are counted: the right password is refused too, from anywhere.
    assert log_in(Client(REMOTE_ADDR="192.0.2.50"), "alice").status_code == 429


@pytest.mark.django_db
def test_while_the_counters_cannot_be_reached_logins_are_refused_with_a_503_not_checked(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldChecks()
    held.install(monkeypatch)
    held.opened.set()
    # A Redis that is not there (nothing listens on port 1): the counters cannot be kept.
    absent = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    with override_settings(CACHES={"default": absent}):
        try:
            response = log_in(Client(), "alice")
        finally:
            caches["default"].close()
    assert response.status_code == 503
    assert "cannot be reached" in response.content.decode()
    assert held.checks == 0  # refused before any password is checked, the right one included


def test_an_attempt_whose_password_is_never_checked_uses_up_no_try(alice: User, settings: Any) -> None:
    client = Client()
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS + 5):
        assert client.post("/auth/login", {"username": "alice"}).status_code == 400
    assert log_in(client, "alice").status_code == 302


def test_a_right_password_gives_its_place_back_and_clears_the_username(alice: User, settings: Any) -> None:
    client = Client()
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER - 1):
        assert log_in(client, "alice", "wrong-guess").status_code == 403
    assert log_in(client, "alice").status_code == 302
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
        assert log_in(Client(), "alice", "wrong-guess").status_code == 403
    assert log_in(Client(), "alice").status_code == 429


# --- look-alike usernames ----------------------------------------------------------------------------

# Each is alice after Django's NFKC normalisation, or differs from it only by case.
SPELLINGS = ["ａlice", "ＡＬＩＣＥ", "ⓐlice", "𝐚𝐥𝐢𝐜𝐞", " Alice ", "ALICE"]


def test_a_full_width_spelling_logs_in_as_alice_so_it_is_counted_as_alice(alice: User) -> None:
    client = Client()
    assert log_in(client, "ａlice").status_code == 302
    assert logged_in_as(client) == "alice"


def test_every_spelling_of_a_username_shares_one_count(alice: User, settings: Any) -> None:
    assert {username_key(name) for name in SPELLINGS} == {username_key("alice")}
    for n, name in enumerate(SPELLINGS[: settings.INSPECTOR_LOGIN_FAILURES_PER_USER]):
        assert log_in(Client(REMOTE_ADDR=f"192.0.2.{n + 1}"), name, "wrong-guess").status_code == 403
    for name in ("alice", "ａlice", "𝐚lice"):
        refused = log_in(Client(REMOTE_ADDR="192.0.2.99"), name)
        assert refused.status_code == 429, name
        assert "Too many failed logins" in refused.content.decode()


def test_a_name_that_only_looks_alike_but_is_another_username_has_its_own_count(alice: User) -> None:
    # A Cyrillic а is not a Latin a after NFKC: that name cannot log in as alice, so need not share.
    assert username_key("\u0430lice") != username_key("alice")
    client = Client(REMOTE_ADDR="192.0.2.60")
    assert log_in(client, "\u0430lice").status_code == 403
    assert logged_in_as(client) is None


# --- one address, written many ways ------------------------------------------------------------------

IPV6_SPELLINGS = [
    "2001:db8:5:6::1",
    "2001:0DB8:0005:0006:0000:0000:0000:0001",
    "2001:db8:5:6:0:0:0:1",
    "[2001:db8:5:6::1]",
    "2001:db8:5:6:ffff:1:2:42",  # another host of the same /64
]


@pytest.mark.parametrize(
    ("spellings", "same", "other"),
    [
        (IPV6_SPELLINGS, "[2001:db8:5:6::9]:443", "2001:db8:5:7::1"),
        (
            ["::ffff:192.0.2.9", "::FFFF:c000:209", "192.0.2.9", "192.0.2.9:51234", "::ffff:192.0.2.9"],
            "192.0.2.9",
            "192.0.2.10",
        ),
    ],
    ids=["ipv6", "ipv4-mapped"],
)
def test_one_address_written_five_ways_counts_as_one(
    alice: User, settings: Any, spellings: list[str], same: str, other: str
) -> None:
    settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS = 5
    assert len({address_group(a) for a in [*spellings, same]}) == 1
    for n, address in enumerate(spellings):
        assert log_in(Client(REMOTE_ADDR=address), f"guess{n}", "wrong").status_code == 403
    assert log_in(Client(REMOTE_ADDR=same), "alice").status_code == 429
    assert log_in(Client(REMOTE_ADDR=other), "alice").status_code == 302


def test_behind_a_proxy_the_forwarded_address_is_grouped_the_same_way(alice: User, settings: Any) -> None:
    settings.INSPECTOR_PROXIES = 1
    settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS = 5
    for n, address in enumerate(IPV6_SPELLINGS):
        forwarded = f"6.6.6.{n}, {address}"
        log_in(Client(REMOTE_ADDR="10.0.0.2"), f"guess{n}", "wrong", HTTP_X_FORWARDED_FOR=forwarded)
    assert log_in(Client(), "alice", HTTP_X_FORWARDED_FOR="2001:db8:5:6::77").status_code == 429
    assert log_in(Client(), "alice", HTTP_X_FORWARDED_FOR="2001:db8:5:8::77").status_code == 302


def test_what_is_not_an_address_is_counted_as_written() -> None:
    assert address_group(" Unknown ") == "unknown"
    assert address_group("") == ""


# --- a password change keeps this browser's login ----------------------------------------------------


def change_password(client: Client, old: str, new: str) -> Any:
    return client.post("/account/password", {"old_password": old, "new_password1": new, "new_password2": new})


def test_after_a_password_change_this_browser_is_listed_and_ending_others_elsewhere_ends_it(
    alice: User,
) -> None:
    laptop, phone = Client(HTTP_USER_AGENT="laptop"), Client(HTTP_USER_AGENT="phone")
    log_in(laptop, "alice")
    before = laptop.session.session_key
    new = "another-plover-77"
    assert change_password(laptop, PASSWORD, new).status_code == 302
    # Django gave the laptop a new session key; its login row went with it.
    assert laptop.session.session_key != before
    row = LoginSession.objects.get(user=alice)
    assert row.session_key == laptop.session.session_key and row.user_agent == "laptop"
    assert [r.pk for r in logins.live_logins(alice.pk)] == [row.pk]
    assert "this browser" in laptop.get("/account").content.decode()

    assert log_in(phone, "alice", new).status_code == 302
    listed = phone.get("/account").content.decode()
    assert "laptop" in listed and "phone" in listed
    assert phone.post("/account/sessions/end-others").status_code == 302
    # The laptop's next request is logged out.
    assert laptop.get("/").status_code == 302 and logged_in_as(laptop) is None
    assert phone.get("/").status_code == 200


def test_after_a_password_change_this_browser_can_be_ended_alone_from_elsewhere(alice: User) -> None:
    laptop, phone = Client(), Client()
    log_in(laptop, "alice")
    new = "another-plover-77"
    change_password(laptop, PASSWORD, new)
    log_in(phone, "alice", new)
    row = LoginSession.objects.get(session_key=laptop.session.session_key)
    assert phone.post(f"/account/sessions/{row.pk}/end").status_code == 302
    assert laptop.get("/").status_code == 302


def test_a_wrong_current_password_is_counted_and_a_weak_new_one_is_not(alice: User, settings: Any) -> None:
    client = Client()
    log_in(client, "alice")
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER * 2):
        assert change_password(client, PASSWORD, "12345").status_code == 400
    for _ in range(settings.INSPECTOR_LOGIN_FAILURES_PER_USER):
        assert change_password(client, "guess", "x-plover-99").status_code == 400
    assert change_password(client, PASSWORD, "x-plover-99").status_code == 429


# --- invitations as a username oracle ----------------------------------------------------------------


def invite(team: Team, by: User) -> str:
    return Invitation.make(team, Role.OPERATOR, by, "for bob", 7)[1]


def sign_up(client: Client, token: str, username: str, password: str = PASSWORD) -> Any:
    data = {"token": token, "action": "create", "username": username, "password1": password}
    return client.post("/auth/invite", {**data, "password2": password})


def test_an_invitation_link_answers_only_so_many_failed_sign_ups(
    team_a: Team, alice: User, settings: Any
) -> None:
    token = invite(team_a, alice)
    limit = settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS
    for n in range(limit):
        # A weak password, so that no account is made: the answer says only whether the name is taken.
        probe = sign_up(Client(REMOTE_ADDR=f"192.0.2.{n + 1}"), token, "alice" if n % 2 else f"x{n}", "1")
        assert probe.status_code == 400
    refused = sign_up(Client(REMOTE_ADDR="198.51.100.1"), token, "alice", "1")
    page = refused.content.decode()
    assert refused.status_code == 429
    assert "too many failed attempts" in page and "already exists" not in page
    assert Invitation.objects.get().state == "open"
    # The link is spent for probing, not the people: a new one works from anywhere.
    assert sign_up(Client(REMOTE_ADDR="198.51.100.1"), invite(team_a, alice), "bob").status_code == 302


def test_failed_sign_ups_count_against_the_address_with_its_failed_logins(
    team_a: Team, alice: User, settings: Any
) -> None:
    settings.INSPECTOR_LOGIN_FAILURES_PER_ADDRESS = 4
    client = Client(REMOTE_ADDR="203.0.113.5")
    for n in range(2):
        assert log_in(client, f"guess{n}", "wrong").status_code == 403
    for _ in range(2):
        assert sign_up(client, invite(team_a, alice), "alice", "1").status_code == 400
    refused = sign_up(client, invite(team_a, alice), "bob")
    assert refused.status_code == 429 and "from your address" in refused.content.decode()
    assert log_in(client, "alice").status_code == 429
    assert sign_up(Client(REMOTE_ADDR="203.0.113.6"), invite(team_a, alice), "bob").status_code == 302
