"""A server's configuration, and the one function that turns it into an engine target and options.

The CLI and the session runtime both start connections from the same config shape (what the connect
form, a saved server and an imported ``mcpServers`` entry produce), so the mapping lives here once.
The protocol constants live here too, each in one place. Pure Python: the CLI imports it, and it
imports nothing from Django.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessions.engine import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_VERSIONS,
    ClientCapabilities,
    ClientOptions,
    HttpTarget,
    StdioTarget,
    Target,
)

if TYPE_CHECKING:  # the CLI's HTTP call needs none of them: they load where a config asks for them
    from sessions.engine import EgressPolicy, OAuthConfig, Sandbox

__all__ = [
    "CLIENT_INFO",
    "Confinement",
    "DEFAULT_PROTOCOL_VERSION",
    "HANDSHAKE_VERSIONS",
    "HOSTED_PATH",
    "LOG_LEVELS",
    "MODES",
    "SANDBOX_ADVICE",
    "STATELESS_VERSIONS",
    "TRANSPORTS",
    "URL_ELICITATION_REQUIRED",
    "build_options",
    "build_target",
    "is_secret_name",
    "level_rank",
    "oauth_config",
    "secret_env_names",
    "split_command",
]

DEFAULT_PROTOCOL_VERSION = LATEST_HANDSHAKE_VERSION
STATELESS_VERSIONS: tuple[str, ...] = MODERN_VERSIONS
MODES = ("handshake", "stateless", "auto")
# RFC 5424 severities, least severe first (the order logging/setLevel uses).
# A request the server will not serve until the person opens a URL (2025-11-25): the error's data
# holds the URL elicitations, as elicitation/create params in "url" mode.
URL_ELICITATION_REQUIRED = -32042

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
TRANSPORTS = (
    ("stdio", "stdio"),
    ("http", "Streamable HTTP"),
    ("sse", "HTTP+SSE (legacy)"),
    ("auto", "auto-detect"),
)
CLIENT_INFO = {"name": "mcp-inspector", "title": "MCP Inspector", "version": "0.1.0"}
# Environment names whose values are credentials: masked wherever a config is shown.
_SECRET_NAME = re.compile(r"token|secret|key|password|auth|credential", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is a credential."""
    return bool(_SECRET_NAME.search(name))


def secret_env_names(env: dict[str, Any], marked: Any = ()) -> list[str]:
    """The env names to mask: those that look secret, and those marked so."""
    return sorted({name for name in env if is_secret_name(name)} | {str(n) for n in marked or ()})


def level_rank(level: Any) -> int:
    """A log level's place among the RFC 5424 levels (an unknown level counts as debug)."""
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 0


def split_command(text: str) -> list[str]:
    """Split a command line into words as a POSIX shell would (quotes, backslashes), without running one.

    Raises ``ValueError`` saying what is wrong (an unclosed quote, say).
    """
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot split the command: {exc}") from None


# The PATH of a stdio server in the hosted set-up, unless its config declares one.
HOSTED_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True, slots=True)
class Confinement:
    """What a server the app starts may get and reach; decided by whoever runs the session.

    The CLI passes none: it is the user's own process, and its servers get the user's environment and
    reach anything, as any program the user runs would.
    """

    hosted: bool = False
    """The hosted team tool: a stdio server gets only its declared environment (with ``HOSTED_PATH``
    and a fresh HOME unless declared); HTTP targets are held to the egress rules."""
    withheld_env: frozenset[str] = field(default_factory=frozenset)
    """Local mode: variables of this process a stdio server never gets (the app's own secrets)."""
    egress_allow: tuple[str, ...] = ()
    """Hosted mode: the operator's allow-list (host names, addresses, CIDR blocks); each config's
    ``egress_allow`` (a team's list) is added to it."""
    sandbox: Sandbox | None = None
    """Hosted mode: the sandbox every stdio server runs in; a server is refused where it cannot run
    here. None: servers run unsandboxed (the local mode, or an administrator who switched it off)."""


# What a deployment does where the hosted sandbox cannot run (``Sandbox.advice``).
SANDBOX_ADVICE = (
    "Install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap) and let the engine workers create "
    "user namespaces (in a container: a seccomp profile that allows them), or set INSPECTOR_SANDBOX=off "
    "to run stdio servers unsandboxed, as the worker's user, able to read its files and secrets"
)


def _only_from_catalog(config: dict[str, Any], key: str) -> None:
    # A path on the machine that runs the session: a user could read (or probe) any file of the
    # worker's through it. The catalog's entries are an administrator's.
    if config.get(key) and not config.get("catalog"):
        raise ValueError(
            f"{key} names a file on the inspector's own machine: in the hosted set-up only a server "
            f"from the catalog may set it"
        )


def _stdio_target(config: dict[str, Any], confinement: Confinement | None) -> StdioTarget:
    command, args = config["command"], list(config.get("args", []))
    declared = {str(k): str(v) for k, v in dict(config.get("env", {})).items()}
    cwd = config.get("cwd") or None
    if confinement is None:
        return StdioTarget(command, args, env=declared, cwd=cwd)
    if confinement.hosted:
        _only_from_catalog(config, "cwd")
        env = {"PATH": HOSTED_PATH, **declared}
        return StdioTarget(
            command,
            args,
            env=env,
            cwd=cwd,
            inherit_env=False,
            fresh_home="HOME" not in declared,
            sandbox=confinement.sandbox,
            watchdog=True,
        )
    inherited = {k: v for k, v in os.environ.items() if k not in confinement.withheld_env}
    return StdioTarget(command, args, env=inherited | declared, cwd=cwd, inherit_env=False, watchdog=True)


def _egress_policy(config: dict[str, Any], confinement: Confinement | None) -> EgressPolicy | None:
    if confinement is None or not confinement.hosted:
        return None
    _only_from_catalog(config, "ca_file")
    team = config.get("egress_allow") or []
    if not isinstance(team, list):
        raise ValueError("egress_allow must be a list of host names, addresses and CIDR blocks")
    from sessions.engine import EgressPolicy

    return EgressPolicy.from_entries([*confinement.egress_allow, *team])


def oauth_config(config: dict[str, Any]) -> OAuthConfig | None:
    """The engine's OAuth settings of an HTTP server's config (``config["oauth"]``), if turned on.

    Who authorizes and where tokens are kept (``authorizer``, ``store``) is the runner's to add.
    """
    oauth = config.get("oauth") or {}
    if not isinstance(oauth, dict) or not oauth.get("enabled"):
        return None
    from sessions.engine import OAuthConfig

    return OAuthConfig(
        client_id=oauth.get("client_id") or None,
        client_secret=oauth.get("client_secret") or None,
        client_metadata_url=oauth.get("client_metadata_url") or None,
        scope=oauth.get("scope") or None,
    )


def build_target(config: dict[str, Any], confinement: Confinement | None = None) -> Target:
    """Turn a server config into an engine target, within ``confinement`` (none: the CLI's way).

    Raises ``ValueError`` for a config the confinement does not allow.
    """
    if config.get("transport", "stdio") == "stdio":
        return _stdio_target(config, confinement)
    return HttpTarget(
        config["url"],
        transport=config.get("transport", "auto"),
        headers=dict(config.get("headers", {})),
        bearer_token=config.get("bearer_token") or None,
        verify_tls=config.get("verify_tls", True),
        ca_file=config.get("ca_file") or None,
        egress=_egress_policy(config, confinement),
        oauth=oauth_config(config),
    )


def build_options(
    config: dict[str, Any],
    *,
    first_request_id: int = 0,
    roots: list[Any] | None = None,
    max_message_bytes: int | None = None,
) -> ClientOptions:
    """Turn a server config into the engine options of a session in the web runtime."""
    caps = config.get("capabilities", {})
    options = ClientOptions(
        protocol_version=config.get("protocol_version") or DEFAULT_PROTOCOL_VERSION,
        mode=config.get("mode") or "handshake",
        capabilities=ClientCapabilities(
            roots=caps.get("roots", True),
            roots_list_changed=caps.get("roots_list_changed", True),
            sampling=caps.get("sampling", True),
            sampling_tools=caps.get("sampling_tools", True),
            elicitation_form=caps.get("elicitation_form", True),
            elicitation_url=caps.get("elicitation_url", True),
            tasks=caps.get("tasks", True),
            apps=caps.get("apps", True),
            experimental=caps.get("experimental") or None,
        ),
        client_info=dict(CLIENT_INFO),
        timeout=config.get("timeout") or None,
        max_total_timeout=config.get("max_total_timeout") or None,
        roots=list(roots or []),
        review_roots=caps.get("review_roots", False),
        first_request_id=first_request_id,
        listen=True,  # stateless: a subscriptions/listen stream, so list changes reach the timeline
    )
    if max_message_bytes:
        options.max_message_bytes = max_message_bytes
    return options
