"""Changing a team's members: roles, removal, the first admin. A team always keeps one admin."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions.teams.models import Membership, Role, Team

__all__ = ["MemberError", "change_role", "make_admin", "remove"]


class MemberError(ValueError):
    """A change the rules refuse (it would leave the team without an admin)."""


LAST_ADMIN = "{name} is the team's only admin: make someone else admin first."


def _locked(team_id: int, member_id: int) -> Membership:
    """The member, and every admin row of the team locked until the change commits (so two admins
    demoting each other at once cannot leave the team with none)."""
    list(Membership.objects.select_for_update().filter(team_id=team_id, role=Role.ADMIN))
    return Membership.objects.select_related("user").get(team_id=team_id, pk=member_id)


def _last_admin(member: Membership) -> bool:
    others = Membership.objects.filter(team_id=member.team_id, role=Role.ADMIN).exclude(pk=member.pk)
    return member.role == Role.ADMIN and not others.exists()


def change_role(team_id: int, member_id: int, role: str) -> Membership:
    """Give a member of the team another role; ``Membership.DoesNotExist`` if there is no such member."""
    if role not in Role.values:
        raise MemberError(f"{role!r} is not a role: choose viewer, operator or admin.")
    with transaction.atomic():
        member = _locked(team_id, member_id)
        if role != Role.ADMIN and _last_admin(member):
            raise MemberError(LAST_ADMIN.format(name=member.user.get_username()))
        member.role = role
        member.save(update_fields=["role"])
        return member


def remove(team_id: int, member_id: int) -> Membership:
    """Take a member out of the team; ``Membership.DoesNotExist`` if there is no such member."""
    with transaction.atomic():
        member = _locked(team_id, member_id)
        if _last_admin(member):
            raise MemberError(LAST_ADMIN.format(name=member.user.get_username()))
        member.delete()
        return member


def make_admin(user: Any, team_name: str) -> tuple[Team, bool]:
    """Make ``user`` an admin of the team called ``team_name``, made if missing; whether it was made."""
    with transaction.atomic():
        team, created = Team.objects.get_or_create(name=team_name)
        Membership.objects.update_or_create(team=team, user_id=user.pk, defaults={"role": Role.ADMIN})
    return team, created
