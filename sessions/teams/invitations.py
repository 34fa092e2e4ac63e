"""Joining a team by an invitation link: the rules every way in shares (a new account made on the
invitation page, a signed-in person, a single sign-on callback).

A link is ``/auth/invite?token=…``; only the token's SHA-256 is stored. It works once, until it expires,
unless an admin revokes it. ``accept(token, user)`` is the one place a link becomes a membership.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions.teams.models import Invitation, Membership, token_digest

__all__ = ["InvitationError", "accept", "find"]

MAX_TOKEN = 200  # Invitation.make's tokens are 43 characters; anything much longer is not one


class InvitationError(ValueError):
    """Why an invitation cannot be used; ``status`` is the HTTP answer (404 unknown, 410 gone, 409 member)."""

    def __init__(self, message: str, status: int = 410) -> None:
        super().__init__(message)
        self.status = status


def find(token: Any) -> Invitation:
    """The invitation a link's token names, if it can still be used; ``InvitationError`` says why not."""
    text = token if isinstance(token, str) else ""
    found = None
    if text and len(text) <= MAX_TOKEN:
        found = Invitation.objects.select_related("team").filter(digest=token_digest(text)).first()
    if found is None:
        raise InvitationError("This invitation link is not valid. Ask a team admin for a new one.", 404)
    if found.revoked:
        raise InvitationError("This invitation was revoked. Ask a team admin for a new one.")
    if found.used is not None:
        raise InvitationError("This invitation was already used. Ask a team admin for a new one.")
    if found.expires <= timezone.now():
        raise InvitationError("This invitation has expired. Ask a team admin for a new one.")
    return found


def accept(token: Any, user: Any) -> Membership:
    """Make ``user`` a member of the invitation's team with its role, and use the invitation up.

    ``InvitationError`` if the link is unknown, revoked, used or expired, or the person is already a
    member of the team (the invitation then stays open). Safe against two people using one link at once:
    the link is claimed by a conditional update, which only one of them wins.
    """
    try:
        with transaction.atomic():
            invitation = find(token)
            current = Membership.objects.filter(team_id=invitation.team_id, user_id=user.pk).first()
            if current is not None:
                raise InvitationError(
                    f"You are already a member of {invitation.team.name} (as {current.role}).", 409
                )
            now = timezone.now()
            claimed = Invitation.objects.filter(
                pk=invitation.pk, revoked=False, used__isnull=True, expires__gt=now
            ).update(used=now, used_by_id=user.pk)
            if claimed != 1:
                raise InvitationError("This invitation was used or revoked a moment ago.")
            return Membership.objects.create(
                team_id=invitation.team_id, user_id=user.pk, role=invitation.role
            )
    except IntegrityError:
        # The same person joined the team by another link at the same moment.
        raise InvitationError("You are already a member of this team.", 409) from None
