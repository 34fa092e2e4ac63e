"""A team's own models: added, replaced and removed by its admins, their keys stored encrypted.

A chat or an eval run of the team chooses among the installation's models (``INSPECTOR_LLM_MODELS``,
``INSPECTOR_LLM_URL``) and these; a name the installation uses is the installation's. In the hosted mode
a model's URL passes the egress rules when it is saved (its host resolved, every address checked) and
again on every request (``sessions.engine``'s confined transport), so a name that later resolves
elsewhere is refused then.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import BooleanField, ExpressionWrapper, Q

from sessions.providers import ModelConfig
from sessions.providers._types import Api
from sessions.secrets import SecretUnreadable
from sessions.teams.models import Team, TeamModel
from sessions.teams.tap_endpoints import egress_policy, reach_problem

__all__ = ["MODEL_LIMIT", "NAME", "configs_of", "listed", "save", "url_problem"]

MODEL_LIMIT = 50
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def url_problem(team: Team, url: str) -> str | None:
    """Why ``url`` cannot be a model's base URL for this team, or None."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return "The URL's port is not a number from 0 to 65535."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "Give the API's http:// or https:// base URL (https://api.openai.com/v1, say)."
    if parts.username or parts.password:
        return "Leave credentials out of the URL: put the key in the key field, where it is kept encrypted."
    if parts.query or parts.fragment:
        return "A base URL has no ?query or #fragment (a key in it would not be kept secret)."
    if not settings.INSPECTOR_HOSTED:
        return None
    return reach_problem(team, parts.scheme, parts.hostname, port)


def save(team: Team, entry: TeamModel | None, fields: dict[str, Any], by: Any, taken: set[str]) -> TeamModel:
    """Add a model (``entry`` None) or replace one; an empty ``api_key`` keeps the stored key when
    replacing. ``ValueError`` says why the team may not have it; ``taken`` are the installation's names."""
    name = fields["name"]
    if name in taken:
        raise ValueError(f"The installation already has a model named {name!r}: choose another name.")
    others = TeamModel.objects.filter(team=team, name=name)
    if entry is not None:
        others = others.exclude(pk=entry.pk)
    if others.exists():
        raise ValueError(f"This team already has a model named {name!r}.")
    if entry is None and TeamModel.objects.filter(team=team).count() >= MODEL_LIMIT:
        raise ValueError(f"This team has {MODEL_LIMIT} models, its limit: remove one first.")
    problem = url_problem(team, fields["url"])
    if problem:
        raise ValueError(problem)
    if entry is None:
        entry = TeamModel(team=team, created_by=by)
    for field in ("name", "label", "api", "url", "model", "timeout"):
        setattr(entry, field, fields[field])
    if fields.get("api_key") or entry.pk is None:
        entry.api_key = fields.get("api_key") or None
    entry.save()
    return entry


def listed(team_id: int) -> list[TeamModel]:
    """The team's models for a page: each with ``has_key``, its key neither decrypted nor loaded."""
    has_key = ExpressionWrapper(Q(api_key__isnull=False), output_field=BooleanField())
    rows = TeamModel.objects.filter(team_id=team_id).defer("api_key").annotate(has_key=has_key)
    return list(rows.select_related("created_by"))


def _confined(allow: tuple[str, ...]) -> Any:
    import httpx

    from sessions.engine._egress_net import confined_transport

    policy = egress_policy(list(allow))
    return confined_transport(policy, verify=True, limits=httpx.Limits())


def configs_of(team_id: int, taken: set[str] | frozenset[str] = frozenset()) -> list[ModelConfig]:
    """The team's models as the providers take them (keys decrypted here, for the request only).

    A model whose name the installation uses, or whose key cannot be decrypted, is left out."""
    # The key deferred: one that cannot be decrypted leaves its model out, not the others.
    rows = list(TeamModel.objects.filter(team_id=team_id).exclude(name__in=list(taken)).defer("api_key"))
    if not rows:
        return []
    connect = None
    if settings.INSPECTOR_HOSTED:
        allow = Team.objects.filter(pk=team_id).values_list("egress_allow", flat=True).first()
        entries = tuple(str(a) for a in allow) if isinstance(allow, list) else ()
        connect = functools.partial(_confined, entries)
    found = []
    for row in rows:
        try:
            key = row.api_key or ""
        except SecretUnreadable:
            continue
        api: Api = "anthropic" if row.api == TeamModel.Api.ANTHROPIC else "openai"
        found.append(
            ModelConfig(
                row.name, row.label or row.name, api, row.url, row.model, key, row.timeout, connect=connect
            )
        )
    return found
