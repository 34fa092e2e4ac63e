"""The template context of the signed-in person: their current team and role, and their teams.

A context processor (settings.TEMPLATES): ``person.scope`` and ``person.memberships`` are looked up
only when a template reads them (the top bar), never for the fragments that do not.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from sessions.teams import access
from sessions.teams.models import Membership

__all__ = ["Person", "people"]


class Person:
    """The signed-in person as templates see them."""

    def __init__(self, request: HttpRequest) -> None:
        self._request = request

    @cached_property
    def scope(self) -> access.Scope | None:
        user = getattr(self._request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        return access.scope_for(user, self._request.session.get(access.TEAM_KEY))

    @cached_property
    def memberships(self) -> list[Membership]:
        if self.scope is None:  # also makes the local mode's personal team before it is listed
            return []
        return access.teams_of(self.scope.user_id)

    @property
    def is_admin(self) -> bool:
        scope = self.scope
        return scope is not None and scope.allows("admin")


def people(request: HttpRequest) -> dict[str, Any]:
    """``hosted`` and ``person`` (``sso``, the sign-in button, comes from ``inspector.sso.login_options``);
    nothing is looked up here (async views render fragments too)."""
    return {"hosted": settings.INSPECTOR_HOSTED, "person": Person(request)}
