"""Tap endpoints (hosted mode): made for an upstream the team's egress rules allow, revoked at once.

An endpoint's upstream is checked when it is made (here: the URL's form, then its host resolved and
every address held to the rules) and again on every connection the tap route opens to it
(``sessions.engine.confined_transport``, with ``egress_policy``), so a name that later resolves
elsewhere is refused then.
"""

from __future__ import annotations

import socket
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from sessions.engine import EgressPolicy, EgressRefused
from sessions.models import McpSession
from sessions.teams.models import TapEndpoint, Team

__all__ = [
    "TAP_LIMIT",
    "egress_policy",
    "live_sessions_of",
    "make",
    "reach_problem",
    "revoke",
    "upstream_problem",
]

TAP_LIMIT = 100
"""Endpoints a team may have open at once: each is a way into the upstream from the inspector's network."""


def egress_policy(team_allow: list[str] | Any) -> EgressPolicy:
    """The rules an endpoint's upstream is held to: the installation's allow-list and the team's."""
    entries = [str(e) for e in team_allow] if isinstance(team_allow, list) else []
    return EgressPolicy.from_entries([*settings.INSPECTOR_EGRESS_ALLOW, *entries])


def upstream_problem(team: Team, url: str) -> str | None:
    """Why ``url`` cannot be a tap endpoint's upstream for this team, or None."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return "The URL's port is not a number from 0 to 65535."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Give the server's http:// or https:// URL (Streamable HTTP or SSE)."
    if parts.username or parts.password:
        return "Leave credentials out of the URL: the host sends its own Authorization header."
    if parts.fragment:
        return "A server URL has no #fragment."
    return reach_problem(team, parts.scheme, parts.hostname, port)


def reach_problem(team: Team, scheme: str, host: str, port: int | None) -> str | None:
    """Why the team's egress rules refuse ``host`` (every address it resolves to), or None."""
    try:
        policy = egress_policy(team.egress_allow)
        policy.check_name(host)
        infos = socket.getaddrinfo(host, port or (443 if scheme == "https" else 80), type=socket.SOCK_STREAM)
        policy.check_addresses(host, (ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    except EgressRefused as exc:
        return f"The team's egress rules refuse it: {exc}"
    except (OSError, UnicodeError) as exc:
        return f"Cannot resolve {host}: {getattr(exc, 'strerror', None) or exc}"
    except ValueError as exc:
        return f"The egress allow-list cannot be read: {exc}"
    return None


def make(team: Team, name: str, url: str, by: Any) -> tuple[TapEndpoint, str]:
    """A new endpoint (its token shown once); ``ValueError`` when the team may not have it."""
    if TapEndpoint.objects.filter(team=team, revoked__isnull=True).count() >= TAP_LIMIT:
        raise ValueError(f"This team has {TAP_LIMIT} open tap endpoints, its limit: revoke one first.")
    problem = upstream_problem(team, url)
    if problem:
        raise ValueError(problem)
    return TapEndpoint.make(team, name, url, by)


def live_sessions_of(endpoint: TapEndpoint) -> list[McpSession]:
    """The endpoint's tap sessions still live (their config is encrypted: matched here, not in SQL)."""
    found = []
    candidates = McpSession.objects.filter(
        team_id=endpoint.team_id, transport_name="tap", status__in=McpSession.LIVE
    )
    for session in candidates:
        tap = session.config.get("tap") if isinstance(session.config, dict) else None
        if isinstance(tap, dict) and tap.get("endpoint") == endpoint.pk:
            found.append(session)
    return found


def revoke(endpoint: TapEndpoint) -> list[McpSession]:
    """Refuse the endpoint from now on; its live sessions end. Return them (their tabs are told)."""
    if endpoint.revoked is None:
        endpoint.revoked = timezone.now()
        endpoint.save(update_fields=["revoked"])
    ended = live_sessions_of(endpoint)
    McpSession.objects.filter(pk__in=[s.pk for s in ended], status__in=McpSession.LIVE).update(
        status=McpSession.Status.CLOSED, status_note="the tap endpoint was revoked", ended=timezone.now()
    )
    return ended
