"""Who is signed in: ``inspector.users.Users`` finds the same person as Django's ModelBackend (issue 10)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db.models import Model

from inspector.users import Users


def _fields(user: Model) -> dict[str, object]:
    return {f.attname: getattr(user, f.attname) for f in user._meta.concrete_fields}


@pytest.mark.django_db
def test_the_compiled_lookup_makes_the_user_django_makes() -> None:
    joined = dt.datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=dt.UTC)
    alice = User.objects.create_user("alice", "a@example.org", "pw-of-alice", first_name="Ålice")
    User.objects.filter(pk=alice.pk).update(last_login=joined, date_joined=joined, is_staff=True)
    found, expected = Users().get_user(alice.pk), ModelBackend().get_user(alice.pk)
    assert found is not None and expected is not None
    assert _fields(found) == _fields(expected)
    assert found.last_login == joined and found.is_staff is True and found.is_superuser is False
    assert found._state.adding is False and found._state.db == "default"
    found.first_name = "Alice"
    found.save(update_fields=["first_name"])  # a real instance, saved like any other
    assert User.objects.get(pk=alice.pk).first_name == "Alice"


@pytest.mark.django_db
def test_nobody_for_a_missing_an_inactive_or_a_malformed_id() -> None:
    bob = User.objects.create_user("bob", password="pw-of-bob", is_active=False)
    users = Users()
    assert users.get_user(bob.pk) is None  # ModelBackend refuses an inactive person too
    assert ModelBackend().get_user(bob.pk) is None
    assert users.get_user(bob.pk + 1000) is None
    assert users.get_user("not a number") is None
    assert users.get_user(str(User.objects.create_user("carol").pk)) is not None  # as the session stores it


@pytest.mark.django_db
def test_a_session_read_as_sql_is_the_session_the_orm_reads_with_the_role_beside_it() -> None:
    from sessions.models import McpSession
    from sessions.teams.access import personal_team, session_with_role

    alice, eve = User.objects.create_user("alice"), User.objects.create_user("eve")
    session = McpSession.objects.create(
        team=personal_team(alice),
        name="everything",
        config={"transport": "stdio", "command": "npx", "env": {"API_KEY": "s3cret"}},
        server_info={"name": "everything", "version": "1.0"},
        server_capabilities={"tools": {"listChanged": True}},
        phases=[{"phase": "ready", "ms": 3.5}],
        ended=dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        exit_code=None,
    )
    found = session_with_role(alice.pk, session.public_id)
    assert found is not None
    read, role = found
    assert role == "admin" and read.person_role == "admin"  # type: ignore[attr-defined]
    assert _fields(read) == _fields(McpSession.objects.get(pk=session.pk))
    assert read.config["env"]["API_KEY"] == "s3cret" and read.ended == session.ended
    assert session_with_role(eve.pk, session.public_id) is None  # not of her team: as if absent
    assert session_with_role(alice.pk, "not-a-uuid") is None
