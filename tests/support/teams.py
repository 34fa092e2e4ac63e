"""People and teams for tests: a person's personal team (as the local mode makes it)."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async

from sessions.teams.access import personal_team
from sessions.teams.models import Team

__all__ = ["ateam_of", "team_of"]


def team_of(user: Any) -> Team:
    """The person's (first) team, made as the local mode makes it when they have none."""
    return personal_team(user)


ateam_of = database_sync_to_async(team_of)
