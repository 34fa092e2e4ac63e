"""Who may see and do what: a person's scope (their current team and role there), and the rules.

Every query of sessions, saved servers and recordings is made through a team the person belongs to;
a session is reached only by a member of its team, and what a member may do there depends on their
role (``Role``). In the local mode the one person is the admin of their personal team, made here at
their first request, so the same rules hold with nothing to set up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery

from sessions.models import McpSession, ServerConfig
from sessions.teams.models import Membership, Role, Team

__all__ = [
    "TEAM_KEY",
    "Scope",
    "personal_team",
    "role_in",
    "scope_for",
    "session_with_role",
    "teams_of",
]

# Where the person's current team is kept in their login session.
TEAM_KEY = "inspector_team"


@dataclass(frozen=True)
class Scope:
    """A person acting in one team, with their role there."""

    user_id: int
    team_id: int
    team_name: str
    role: str

    def allows(self, needed: str) -> bool:
        return Role.allows(self.role, needed)

    def sessions(self) -> Any:
        """The team's sessions (a queryset)."""
        return McpSession.objects.filter(team_id=self.team_id)

    def servers(self) -> Any:
        """The team's saved servers (a queryset)."""
        return ServerConfig.objects.filter(team_id=self.team_id)


def personal_team(user: Any) -> Team:
    """The local mode's team of one: made at the person's first request, with them as its admin."""
    membership = Membership.objects.filter(user_id=user.pk).select_related("team").first()
    if membership is not None:
        return membership.team
    base = f"{user.get_username()}'s team"
    for attempt in range(100):
        name = base if attempt == 0 else f"{base} {attempt + 1}"
        try:
            with transaction.atomic():
                team = Team.objects.create(name=name, personal=True)
                Membership.objects.create(team=team, user_id=user.pk, role=Role.ADMIN)
                return team
        except IntegrityError:
            # The name is taken (or a concurrent first request made the team): look again.
            membership = Membership.objects.filter(user_id=user.pk).select_related("team").first()
            if membership is not None:
                return membership.team
    raise RuntimeError("could not name a personal team")


def teams_of(user_id: int) -> list[Membership]:
    """The person's memberships, their teams loaded, by team name."""
    return list(Membership.objects.filter(user_id=user_id).select_related("team").order_by("team__name"))


def role_in(user_id: int, team_id: int | None) -> str | None:
    """The person's role in the team, or None when they are not a member."""
    if team_id is None:
        return None
    return Membership.objects.filter(user_id=user_id, team_id=team_id).values_list("role", flat=True).first()


def scope_for(user: Any, chosen: Any = None) -> Scope | None:
    """The person's scope: the team they chose (if they still belong to it), else their first.

    None when they belong to no team (a hosted account whose memberships were all removed).
    """
    memberships = teams_of(user.pk)
    if not memberships and not settings.INSPECTOR_HOSTED:
        personal_team(user)  # the local mode's first request makes the person's team
        memberships = teams_of(user.pk)
    if not memberships:
        return None
    current = next((m for m in memberships if m.team_id == chosen), memberships[0])
    return Scope(user.pk, current.team_id, current.team.name, current.role)


def session_with_role(user_id: int, public_id: Any) -> tuple[McpSession, str] | None:
    """The session and the person's role in its team; None if there is no such session for them.

    Absent and not-a-member look the same, so ids of other teams' sessions stay private.
    """
    # One query (the role a subquery beside the session), which every session view asks.
    role = Membership.objects.filter(user_id=user_id, team_id=OuterRef("team_id")).values("role")[:1]
    try:
        found = McpSession.objects.annotate(person_role=Subquery(role)).get(public_id=public_id)
    except (McpSession.DoesNotExist, ValidationError, ValueError, TypeError):
        return None
    person_role: str | None = found.person_role  # type: ignore[attr-defined]
    return None if person_role is None else (found, person_role)
