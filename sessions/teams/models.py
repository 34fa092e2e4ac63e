"""Teams and their members, invitations, the approved server catalog, and people's login sessions."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from sessions.secrets import EncryptedJSONField, EncryptedTextField
from sessions.teams.process_env import refusals

__all__ = [
    "Activity",
    "CatalogServer",
    "Invitation",
    "LoginSession",
    "Membership",
    "Note",
    "Role",
    "Share",
    "ShareOpening",
    "SsoIdentity",
    "TapEndpoint",
    "Team",
    "TeamModel",
    "token_digest",
]


class Role(models.TextChoices):
    """What a member may do; each role may do everything the ones before it may."""

    VIEWER = "viewer"  # read timelines, watch live
    OPERATOR = "operator"  # connect, call, answer review cards
    ADMIN = "admin"  # members, the server catalog, team secrets, settings

    @classmethod
    def rank(cls, role: str) -> int:
        return {cls.VIEWER: 1, cls.OPERATOR: 2, cls.ADMIN: 3}.get(role, 0)  # type: ignore[call-overload]

    @classmethod
    def allows(cls, role: str | None, needed: str) -> bool:
        """Whether a member with ``role`` may do what needs ``needed``."""
        return role is not None and cls.rank(role) >= cls.rank(needed)


def token_digest(token: str) -> str:
    """How a link's token is stored: its SHA-256, so the database never holds a usable link."""
    return hashlib.sha256(token.encode()).hexdigest()


class Team(models.Model):
    """People who share sessions, saved servers, recordings, a server catalog and settings."""

    name = models.CharField(max_length=200, unique=True)
    personal = models.BooleanField(default=False, help_text="the one team of the local mode's person")
    allow_free_stdio = models.BooleanField(
        default=False, help_text="hosted: operators may run any command line, not only the catalog's"
    )
    egress_allow = models.JSONField(
        default=list, blank=True, help_text="hosted: hosts or CIDRs HTTP targets may reach despite the rules"
    )
    max_live_sessions = models.PositiveIntegerField(
        null=True, blank=True, help_text="live sessions at once; empty: the installation's default"
    )
    allow_public_shares = models.BooleanField(
        default=True, help_text="members may make share links that anyone with the link can open"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A person in a team, with a role."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    joined = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__name"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


def _week_from_now() -> Any:
    return timezone.now() + timedelta(days=7)


class Invitation(models.Model):
    """A one-use link an admin made for someone to join a team with a role (the token stored hashed)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    note = models.CharField(max_length=200, blank=True, help_text="who it is for")
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(default=_week_from_now)
    used_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    used = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"invitation to {self.team} as {self.role}"

    @classmethod
    def make(cls, team: Team, role: str, by: Any, note: str = "", days: int = 7) -> tuple[Invitation, str]:
        """A new invitation and its token (shown once, to the admin who made it)."""
        token = secrets.token_urlsafe(32)
        invitation = cls.objects.create(
            team=team,
            role=role,
            note=note,
            digest=token_digest(token),
            created_by=by,
            expires=timezone.now() + timedelta(days=days),
        )
        return invitation, token

    @property
    def usable(self) -> bool:
        return not self.revoked and self.used is None and self.expires > timezone.now()

    @property
    def state(self) -> str:
        if self.revoked:
            return "revoked"
        if self.used is not None:
            return "used"
        return "expired" if self.expires <= timezone.now() else "open"


# A catalog parameter's name, as it appears in "{name}" placeholders.
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class CatalogServer(models.Model):
    """A stdio server an admin approved: the command, and exactly what a person may fill in.

    ``args`` may hold ``{name}`` placeholders for the ``params`` a person fills (each
    ``{"name", "label", "pattern", "required"}``); ``env`` holds the admin's fixed values;
    ``env_params`` names the variables a person may set, and ``secret_env`` which values are secret.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="catalog")
    name = models.CharField(max_length=200)
    description = models.CharField(max_length=500, blank=True)
    command = models.CharField(max_length=1000)
    args = models.JSONField(default=list, blank=True)
    params = models.JSONField(default=list, blank=True)
    env = EncryptedJSONField(default=dict, blank=True)  # the admin's fixed values are secrets
    env_params = models.JSONField(default=list, blank=True)
    secret_env = models.JSONField(default=list, blank=True)
    cwd = models.CharField(max_length=1000, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_catalog_name_per_team")]

    def __str__(self) -> str:
        return self.name

    # Everything of the entry that reaches the process a session starts (its name and description do not).
    PROCESS_FIELDS = ("command", "args", "params", "env", "env_params", "secret_env", "cwd")

    def refused_env(self) -> dict[str, str]:
        """The variables this entry sets or lets a person set that no catalog server may get, with why."""
        fixed = list(self.env) if isinstance(self.env, dict) else []
        filled = [str(n) for n in self.env_params] if isinstance(self.env_params, list) else []
        return refusals(dict.fromkeys([*fixed, *filled]))

    def fingerprint(self, secret: str | bytes | None = None) -> str:
        """A hash of what shapes the process, kept with a session to tell whether the entry changed since."""
        # Keyed with Django's secret key: it covers the fixed values, which are secrets.
        shape = json.dumps(
            [self._checked_params() if f == "params" else getattr(self, f) for f in self.PROCESS_FIELDS],
            sort_keys=True,
            default=str,
        )
        return salted_hmac("teams.CatalogServer", shape, secret=secret, algorithm="sha256").hexdigest()

    def _checked_params(self) -> list[Any]:
        """What of each parameter decides the values it takes (its label is only shown)."""
        params = self.params if isinstance(self.params, list) else []
        return [
            [p.get("name"), str(p.get("pattern") or ""), bool(p.get("required", True))]
            if isinstance(p, dict)
            else p
            for p in params
        ]

    def has_fingerprint(self, value: object) -> bool:
        """Whether ``value`` is this entry's fingerprint as it is now (under the secret key or a fallback)."""
        if not isinstance(value, str) or not value:
            return False
        keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
        return any(constant_time_compare(value, self.fingerprint(key)) for key in keys)


class LoginSession(models.Model):
    """One browser signed in as a person, so they can see where they are signed in and end the others."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="logins")
    session_key = models.CharField(max_length=40, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    address = models.CharField(max_length=100, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.user} from {self.address or '?'}"


class Link(models.Model):
    """What every read-only link has: an expiry, and a revocation; usable while neither has come."""

    expires = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def state(self) -> str:
        if self.revoked is not None:
            return "revoked"
        if self.expires is not None and self.expires <= timezone.now():
            return "expired"
        return "open"

    @property
    def usable(self) -> bool:
        return self.state == "open"


class Share(Link):
    """A read-only link to a session (or part of it), redacted, with an expiry and an audience."""

    class Audience(models.TextChoices):
        TEAM = "team"  # members of the session's team, signed in
        ANYONE = "anyone"  # anyone with the link, no account needed

    session = models.ForeignKey("mcp_sessions.McpSession", on_delete=models.CASCADE, related_name="shares")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the link's token")
    label = models.CharField(max_length=200, blank=True)
    audience = models.CharField(max_length=10, choices=Audience.choices, default=Audience.TEAM)
    first_seq = models.BigIntegerField(null=True, blank=True, help_text="the first frame shown")
    last_seq = models.BigIntegerField(null=True, blank=True, help_text="the last frame shown")
    filter = models.JSONField(default=dict, blank=True, help_text="a timeline filter the view is held to")
    rules = models.JSONField(default=dict, blank=True, help_text="the sharer's redaction rules")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"share of {self.session_id} ({self.audience})"

    @property
    def group_name(self) -> str:
        """The channel-layer group of the share's open viewers (revoking closes their sockets)."""
        return f"mcp-share-{self.pk}"


class TapEndpoint(models.Model):
    """A secret URL a host is pointed at (hosted mode): the web processes forward what the host sends
    to ``url`` and record each host connection as a tap session of the team (``inspector/tap_route.py``).

    The token is shown once; the database keeps its SHA-256. Revoking refuses the host at once.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="tap_endpoints")
    name = models.CharField(max_length=200)
    url = models.CharField(max_length=2000, help_text="the upstream MCP server (Streamable HTTP or SSE)")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the URL's token")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    revoked = models.DateTimeField(null=True, blank=True)
    last_used = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"tap endpoint {self.name} of {self.team_id}"

    @classmethod
    def make(cls, team: Team, name: str, url: str, by: Any) -> tuple[TapEndpoint, str]:
        """A new endpoint and its token (shown once, to whoever made it)."""
        token = secrets.token_urlsafe(32)
        endpoint = cls.objects.create(
            team=team, name=name, url=url, digest=token_digest(token), created_by=by
        )
        return endpoint, token

    @staticmethod
    def group_for(digest: str) -> str:
        """The channel-layer group of the exchanges in flight through the endpoint of this digest.

        Named by the digest, which the tap route has before it looks anything up: it joins first, so a
        revocation between its lookup and its joining cannot be missed."""
        return f"mcp-tap-{digest[:40]}"

    @property
    def group_name(self) -> str:
        return self.group_for(self.digest)

    @property
    def usable(self) -> bool:
        return self.revoked is None


class TapConnection(models.Model):
    """One upstream MCP session through a tap endpoint (its ``Mcp-Session-Id``) and the tap session
    that records it: what the web processes share so that one host connection, whichever of them its
    requests land in, stays one session (``inspector/tap_sessions.py``)."""

    endpoint = models.ForeignKey(TapEndpoint, on_delete=models.CASCADE, related_name="connections")
    mcp_session_id = models.CharField(max_length=200)
    session = models.ForeignKey("mcp_sessions.McpSession", on_delete=models.CASCADE, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "mcp_session_id"], name="one_tap_connection_per_sid")
        ]

    def __str__(self) -> str:
        return f"tap connection {self.mcp_session_id[:12]} of endpoint {self.endpoint_id}"


class TeamModel(models.Model):
    """A model the team's chats and eval runs may use besides the installation's: where it is, and the
    key, stored encrypted and never shown again once saved (``sessions.teams.team_models``)."""

    class Api(models.TextChoices):
        OPENAI = "openai", "OpenAI-compatible (chat completions)"
        ANTHROPIC = "anthropic", "Anthropic (Messages)"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="llm_models")
    name = models.CharField(max_length=64, help_text="what a chat records and a form sends")
    label = models.CharField(max_length=200, blank=True)
    api = models.CharField(max_length=10, choices=Api.choices, default=Api.OPENAI)
    url = models.CharField(max_length=2000, help_text="the API's base URL")
    model = models.CharField(max_length=200, help_text="the model asked for")
    api_key = EncryptedTextField(null=True, blank=True, help_text="none: the API takes no key")
    timeout = models.FloatField(default=120.0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_model_name_per_team")]

    def __str__(self) -> str:
        return f"model {self.name} of {self.team_id}"


class ShareOpening(models.Model):
    """Someone opened a share: who (when signed in) or from where."""

    share = models.ForeignKey(Share, on_delete=models.CASCADE, related_name="openings")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    address = models.CharField(max_length=100, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.share} opened by {self.user or self.address or '?'}"


class Activity(models.Model):
    """Who did what in a session: connected, sent a request, answered a review, shared, noted."""

    session = models.ForeignKey("mcp_sessions.McpSession", on_delete=models.CASCADE, related_name="activity")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=40)
    detail = models.CharField(max_length=500, blank=True)
    frame_seq = models.BigIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]
        indexes = [models.Index(fields=["session", "at"], name="activity_session")]

    def __str__(self) -> str:
        return f"{self.user} {self.action} {self.detail}"


class Note(models.Model):
    """A comment pinned to a frame of a session; replies make a thread."""

    session = models.ForeignKey("mcp_sessions.McpSession", on_delete=models.CASCADE, related_name="notes")
    frame_seq = models.BigIntegerField()
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    text = models.TextField(max_length=10_000)
    reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created", "pk"]
        indexes = [models.Index(fields=["session", "frame_seq"], name="note_frame")]

    def __str__(self) -> str:
        return f"note on frame {self.frame_seq}"


class SsoIdentity(models.Model):
    """A person's account at an OpenID Connect provider, linked to their account here at first sign-in.

    Known by the provider's issuer and subject (``sub``), never by e-mail: an address is not proof of
    who holds an account here, so a provider's claim never takes over a local account that has it.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    email = models.CharField(
        max_length=254, blank=True, help_text="as the provider last said; never used to link"
    )
    created = models.DateTimeField(auto_now_add=True)
    last_login = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["issuer", "subject"]
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_account_per_sso_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
