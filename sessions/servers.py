"""A server's configuration, and the one function that turns it into an engine target and options.

The CLI and the session runtime both start connections from the same config shape (what the connect
form, a saved server and an imported ``mcpServers`` entry produce), so the mapping lives here once.
The protocol constants live here too, each in one place. Pure Python: the CLI imports it, and it
imports nothing from Django.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

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

__all__ = [
    "CLIENT_INFO",
    "DEFAULT_PROTOCOL_VERSION",
    "HANDSHAKE_VERSIONS",
    "LOG_LEVELS",
    "MODES",
    "STATELESS_VERSIONS",
    "TRANSPORTS",
    "build_options",
    "build_target",
    "is_secret_name",
    "level_rank",
    "secret_env_names",
    "split_command",
]

DEFAULT_PROTOCOL_VERSION = LATEST_HANDSHAKE_VERSION
STATELESS_VERSIONS: tuple[str, ...] = MODERN_VERSIONS
MODES = ("handshake", "stateless", "auto")
# RFC 5424 severities, least severe first (the order logging/setLevel uses).
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


def build_target(config: dict[str, Any]) -> Target:
    """Turn a server config into an engine target."""
    if config.get("transport", "stdio") == "stdio":
        return StdioTarget(
            config["command"],
            list(config.get("args", [])),
            env=dict(config.get("env", {})),
            cwd=config.get("cwd") or None,
        )
    return HttpTarget(
        config["url"],
        transport=config.get("transport", "auto"),
        headers=dict(config.get("headers", {})),
        bearer_token=config.get("bearer_token") or None,
        verify_tls=config.get("verify_tls", True),
        ca_file=config.get("ca_file") or None,
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
            elicitation_form=caps.get("elicitation_form", True),
            elicitation_url=caps.get("elicitation_url", True),
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
