"""What a team allows when someone connects: approved stdio servers, command lines, live-session caps.

In the local mode everything is allowed (a developer runs what they like on their own machine). In the
hosted mode a stdio server comes from the team's catalog unless an admin allowed command lines for the
team; HTTP targets pass the egress rules, with the team's allow-list (``prepared`` puts it in the
session's config, where the runtime reads it). A catalog server starts only as its entry is now (a
session keeps the entry's ``fingerprint``, so a reconnect after the admin changed it is refused), with
only the variables the entry declares, none of them one that loads code (``process_env``).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

from sessions.models import McpSession
from sessions.servers import DEFAULT_PROTOCOL_VERSION
from sessions.teams.access import Scope
from sessions.teams.models import PARAM_NAME, CatalogServer, Team
from sessions.teams.process_env import refusals

__all__ = [
    "CatalogError",
    "catalog_config",
    "catalog_problem",
    "catalog_of",
    "command_line_problem",
    "connect_problem",
    "free_stdio",
    "live_cap",
    "prepared",
    "reconnect_config",
    "reconnect_problem",
    "save_problem",
]

# A value a person fills in for a catalog parameter, when the admin gave no pattern: one argument that
# cannot pass for an option of the command.
DEFAULT_PARAM = re.compile(r"[^-\s][^\x00-\x1f]{0,999}")
PLACEHOLDER = re.compile(r"\{(" + PARAM_NAME.pattern + r")\}")


class CatalogError(ValueError):
    """A person's values for a catalog server that the admin's rules refuse: ``errors`` by field."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def _team(scope: Scope) -> Team:
    return Team.objects.get(pk=scope.team_id)


def free_stdio(scope: Scope) -> bool:
    """Whether the person may start any command line (always, locally; if an admin allowed it, hosted)."""
    return not settings.INSPECTOR_HOSTED or _team(scope).allow_free_stdio


def catalog_of(scope: Scope) -> list[CatalogServer]:
    return list(CatalogServer.objects.filter(team_id=scope.team_id))


def live_cap(team: Team) -> int:
    """How many live sessions the team may have at once (0: no limit)."""
    if team.max_live_sessions is not None:
        return team.max_live_sessions
    return int(settings.INSPECTOR_MAX_LIVE_SESSIONS_PER_TEAM)


def command_line_problem(team: Team, config: dict[str, Any]) -> str | None:
    """Why the team does not allow this config's command line (hosted, catalog only), or None."""
    stdio = config.get("transport") == "stdio" and not config.get("catalog")
    if stdio and settings.INSPECTOR_HOSTED and not team.allow_free_stdio:
        return (
            "This team runs stdio servers from its approved catalog only. Pick one under "
            "“Approved servers”, or ask a team admin to add yours or to allow command lines."
        )
    return None


def save_problem(scope: Scope, config: dict[str, Any]) -> str | None:
    """Why the team does not allow saving a server with this config (its command line), or None."""
    return command_line_problem(_team(scope), config)


ENTRY_CHANGED = (
    "This server's catalog entry is not as it was when this session started (an admin changed or "
    "removed it): connect to it anew from “Approved servers” on the home page."
)


def catalog_problem(team: Team, config: dict[str, Any]) -> str | None:
    """Why a config made from a catalog entry may not start now, or None (and None for any other config).

    The entry must still be the team's, unchanged since the config was made from it, free of variables
    that load code (it may predate that rule), and the config may set no variable it does not declare.
    """
    catalog = config.get("catalog")
    if not catalog:
        return None
    entry_id = catalog.get("id") if isinstance(catalog, dict) else None
    entry = None
    if isinstance(entry_id, int):
        entry = CatalogServer.objects.filter(team_id=team.pk, pk=entry_id).first()
    if entry is None:
        return ENTRY_CHANGED
    env: dict[str, Any] = config["env"] if isinstance(config.get("env"), dict) else {}
    refused = entry.refused_env() | refusals(env)
    if refused:
        reasons = "; ".join(f"{name}: {why}" for name, why in refused.items())
        return (
            f"{entry.name} cannot start: it sets {', '.join(refused)}, which no catalog server may get "
            f"({reasons}). A team admin must take that out of the entry."
        )
    if not entry.has_fingerprint(catalog.get("fingerprint")):
        return ENTRY_CHANGED
    declared = set(entry.env if isinstance(entry.env, dict) else {}) | set(entry.env_params or [])
    undeclared = [str(name) for name in env if name not in declared]
    if undeclared:
        return f"{entry.name} does not let anyone set {', '.join(undeclared)}."
    return None


def connect_problem(scope: Scope, config: dict[str, Any]) -> str | None:
    """Why the team does not allow starting this config now, or None."""
    return _start_problem(_team(scope), config)


def _start_problem(team: Team, config: dict[str, Any]) -> str | None:
    problem = command_line_problem(team, config) or catalog_problem(team, config)
    if problem:
        return problem
    cap = live_cap(team)
    if cap:
        live = McpSession.objects.filter(team=team, status__in=McpSession.LIVE).count()
        if live >= cap:
            return f"This team has {live} live sessions, its limit. Disconnect one before starting another."
    return None


def reconnect_problem(session: McpSession) -> str | None:
    """Why the session's team does not allow starting its recorded config again now, or None."""
    config = session.config if isinstance(session.config, dict) else {}
    return _start_problem(Team.objects.get(pk=session.team_id), config)


def reconnect_config(session: McpSession) -> dict[str, Any]:
    """The recorded config to start again, held to its team's egress allow-list as it is now."""
    config = session.config if isinstance(session.config, dict) else {}
    return _prepared(Team.objects.get(pk=session.team_id), config)


def prepared(scope: Scope, config: dict[str, Any]) -> dict[str, Any]:
    """The config a session of this team starts from: the team's egress allow-list added (hosted)."""
    return _prepared(_team(scope), config)


def _prepared(team: Team, config: dict[str, Any]) -> dict[str, Any]:
    if not settings.INSPECTOR_HOSTED:
        return config
    allow = team.egress_allow
    return {**config, "egress_allow": [str(a) for a in allow] if isinstance(allow, list) else []}


def catalog_config(entry: CatalogServer, values: dict[str, str]) -> dict[str, Any]:
    """The config to start a catalog server with the person's ``values`` (``param:<name>``, ``env:<NAME>``).

    Every value is checked against the admin's rules; a placeholder fills its whole argument or a part
    of it, never adds one. ``CatalogError`` says what is wrong, by field.
    """
    errors: dict[str, str] = {}
    filled: dict[str, str] = {}
    for param in entry.params if isinstance(entry.params, list) else []:
        if not isinstance(param, dict) or not PARAM_NAME.fullmatch(str(param.get("name", ""))):
            continue
        name = str(param["name"])
        value = str(values.get(f"param:{name}", "")).strip()
        pattern = str(param.get("pattern") or "")
        if not value:
            if param.get("required", True):
                errors[f"param:{name}"] = "required"
            filled[name] = ""
            continue
        rule = re.compile(pattern) if pattern else DEFAULT_PARAM
        if "\x00" in value or not rule.fullmatch(value):
            errors[f"param:{name}"] = f"must match {pattern}" if pattern else "one value, not an option"
        filled[name] = value
    env = {str(k): str(v) for k, v in (entry.env or {}).items()}
    fillable = [str(n) for n in entry.env_params] if isinstance(entry.env_params, list) else []
    for key in values:
        name = str(key).removeprefix("env:")
        if key.startswith("env:") and name not in fillable:
            errors[key] = f"{entry.name} does not let a person set {name}"
    for name in fillable:
        value = str(values.get(f"env:{name}", ""))
        if "\x00" in value or len(value) > 4000:
            errors[f"env:{name}"] = "at most 4,000 characters, no NUL"
        elif value:
            env[str(name)] = value
    if errors:
        raise CatalogError(errors)

    def fill(arg: str) -> str:
        return PLACEHOLDER.sub(lambda match: filled.get(match.group(1), match.group(0)), arg)

    args = [fill(str(arg)) for arg in (entry.args or [])]
    # An optional parameter left empty leaves no empty argument behind.
    raw_args = [str(arg) for arg in entry.args or []]
    args = [arg for arg, raw in zip(args, raw_args, strict=True) if arg or not PLACEHOLDER.search(raw)]
    return {
        "name": entry.name,
        "transport": "stdio",
        "command": entry.command,
        "args": args,
        "env": env,
        "secret_env": sorted({str(n) for n in entry.secret_env or []}),
        "cwd": entry.cwd,
        "url": "",
        "headers": {},
        "bearer_token": "",
        "verify_tls": True,
        "ca_file": "",
        "protocol_version": DEFAULT_PROTOCOL_VERSION,
        "mode": "handshake",
        "capabilities": {},
        "timeout": 60.0,
        "max_total_timeout": 600.0,
        "catalog": {"id": entry.pk, "name": entry.name, "fingerprint": entry.fingerprint()},
    }
