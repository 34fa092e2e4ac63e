"""Who a person signing in with single sign-on is here: their linked account, made at first sign-in.

A provider's account (its issuer and ``sub``) is linked to exactly one account here, the one made for
it at the first sign-in. Nothing else links: not the e-mail address, not the username. A provider that
lets people choose their address (or a typo in someone's profile) would otherwise hand a local account,
an admin's say, to whoever claims its address.

A first sign-in makes an account only for someone who is expected: they opened an invitation first, or
the installation names a team every such person joins (``INSPECTOR_OIDC_TEAM``). Anyone else the
provider knows gets no account, so pointing the inspector at a big provider lets in no strangers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions.teams import invitations
from sessions.teams.models import Membership, SsoIdentity, Team

__all__ = ["DefaultTeam", "NotAllowed", "accept_invitation", "person_for", "username_for"]

# What Django's username validator takes; anything else in a provider's name is dropped.
_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]", re.ASCII)
_USERNAME_MAX = 150


class NotAllowed(Exception):
    """The provider vouched for the person, but they may not sign in here; the message says why."""


@dataclass(frozen=True)
class DefaultTeam:
    """The team every person joins at their first single sign-on, and with which role."""

    name: str
    role: str


def username_for(claims: Mapping[str, Any]) -> str:
    """A free username from the provider's ``preferred_username``, else its e-mail, else its subject."""
    User = get_user_model()
    base = ""
    for claim in ("preferred_username", "email"):
        value = claims.get(claim)
        if isinstance(value, str):
            base = _NOT_IN_USERNAME.sub("", value)[: _USERNAME_MAX - 10]
            if base:
                break
    base = base or f"sso-{_NOT_IN_USERNAME.sub('', str(claims['sub']))[:40]}"
    name, n = base, 1
    # A local account of that name is someone else's: this person gets "alice-2", never their account.
    while User.objects.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


def accept_invitation(token: str, user: Any) -> Membership | None:
    """Make ``user`` a member of the team an open invitation is for (``sessions.teams.invitations``).

    None when the token names no usable invitation (unknown, used, revoked, expired) or the person is
    a member of that team already (the invitation then stays open for someone else).
    """
    try:
        return invitations.accept(token, user)
    except invitations.InvitationError:
        return None


def _claim(claims: Mapping[str, Any], name: str, limit: int) -> str:
    value = claims.get(name)
    return value[:limit] if isinstance(value, str) else ""


def _first_sign_in(
    issuer: str, claims: Mapping[str, Any], invitation: str, default_team: DefaultTeam | None
) -> Any:
    """Make the account for a provider's person we do not know yet, linked to them, in their teams.

    Runs in the caller's transaction: when the invitation turns out unusable (and there is no default
    team), the account made for it is rolled back with the refusal.
    """
    if not invitation and default_team is None:
        raise NotAllowed(
            "There is no account here for you yet. Ask a team admin for an invitation link, open it, "
            "and choose single sign-on there."
        )
    email = _claim(claims, "email", 254)
    user = get_user_model().objects.create_user(
        username=username_for(claims),
        email=email,
        first_name=_claim(claims, "given_name", 150),
        last_name=_claim(claims, "family_name", 150),
    )
    # Only the provider signs this account in (until the person sets a password, if ever).
    user.set_unusable_password()
    user.save(update_fields=["password"])
    SsoIdentity.objects.create(
        user=user, issuer=issuer, subject=claims["sub"], email=email, last_login=timezone.now()
    )
    accepted = accept_invitation(invitation, user) if invitation else None
    if default_team is not None:
        team, _ = Team.objects.get_or_create(name=default_team.name)
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": default_team.role})
    elif accepted is None:
        raise NotAllowed(
            "That invitation link has expired, was used already or was withdrawn: "
            "ask a team admin for a new one."
        )
    return user


def person_for(
    issuer: str, claims: Mapping[str, Any], invitation: str = "", default_team: DefaultTeam | None = None
) -> Any:
    """The account here of the person the provider's validated ID token ``claims`` describe.

    Known (issuer and ``sub`` linked before): that account, and the invitation they came with, if any,
    is accepted. First sign-in: a new account, linked, made only with a usable ``invitation`` token
    (which it accepts) or a ``default_team`` (which it joins). ``NotAllowed`` otherwise, or when the
    linked account was deactivated.
    """
    subject = claims["sub"]
    for _attempt in range(2):
        try:
            with transaction.atomic():
                identity = (
                    SsoIdentity.objects.select_for_update()
                    .select_related("user")
                    .filter(issuer=issuer, subject=subject)
                    .first()
                )
                if identity is None:
                    return _first_sign_in(issuer, claims, invitation, default_team)
                if not identity.user.is_active:
                    raise NotAllowed("This account is turned off here: ask a team admin.")
                identity.email = _claim(claims, "email", 254)
                identity.last_login = timezone.now()
                identity.save(update_fields=["email", "last_login"])
                if invitation:
                    accept_invitation(invitation, identity.user)
                return identity.user
        except IntegrityError:
            # Two first sign-ins of one person at once: the other made the link; use it.
            continue
    raise NotAllowed("Signing in failed twice at once; try again.")
