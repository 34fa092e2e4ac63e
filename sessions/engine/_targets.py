"""Where a server is and how to reach it; cheap to import (no HTTP client here)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ._egress import EgressPolicy
    from ._oauth_config import OAuthConfig
    from ._sandbox import Sandbox

__all__ = ["HttpKind", "HttpTarget", "StdioTarget", "Target", "mask_headers"]

HttpKind = Literal["auto", "http", "sse"]


@dataclass(slots=True)
class StdioTarget:
    """How to start a stdio server."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    inherit_env: bool = True
    """Start from this process's environment (``env`` on top); off: the server gets ``env`` alone."""
    fresh_home: bool = False
    """Set HOME to a new empty directory of the server's own, removed when the transport closes."""
    sandbox: Sandbox | None = None
    """Run the server in this sandbox (bubblewrap), in a new empty directory of its own (its HOME too,
    with ``fresh_home``); ``cwd`` is then shown to it read-only."""
    watchdog: bool = False
    """Have a watchdog process kill the server's whole tree when this process dies, even by SIGKILL."""
    # Shutdown, as the spec orders it: close stdin, wait, SIGTERM, wait, SIGKILL.
    close_grace: float = 2.0
    term_grace: float = 2.0


@dataclass(slots=True)
class HttpTarget:
    """An MCP server at a URL: Streamable HTTP, legacy HTTP+SSE, or ``auto`` to find out."""

    url: str
    transport: HttpKind = "auto"
    headers: dict[str, str] = field(default_factory=dict)
    bearer_token: str | None = None
    verify_tls: bool = True
    """Check the server's TLS certificate (off: accept any, e.g. a self-signed one; a state frame says so)."""
    ca_file: str | None = None
    """A PEM file of CA certificates to trust instead of the public ones (a local CA, mkcert, a proxy)."""
    connect_timeout: float = 10.0
    open_get_stream: bool = True
    """Open the standalone GET stream for server-initiated messages after initialization."""
    egress: EgressPolicy | None = None
    """Egress rules every connection is held to (resolved addresses checked, no proxy); ``None``: none."""
    oauth: OAuthConfig | None = None
    """Authorize when the server asks (401/403 with a challenge): OAuth 2.1 as the protocol describes."""


Target = StdioTarget | HttpTarget

_SECRET_HEADER = re.compile(r"authorization|cookie|token|secret|api[-_]?key|password|auth", re.IGNORECASE)


# Challenges and nonces carry no secret, and a person needs to read them (the metadata URL, the scope).
_PUBLIC_HEADERS = frozenset({"www-authenticate", "dpop-nonce", "dpop"})


def mask_headers(headers: dict[str, str]) -> dict[str, str]:
    """Return headers fit to record: values of credential-like headers are masked."""
    masked = {}
    for name, value in headers.items():
        if _SECRET_HEADER.search(name) and name.lower() not in _PUBLIC_HEADERS:
            scheme = value.split(" ", 1)[0] + " " if " " in value else ""
            masked[name] = f"{scheme}•••• ({len(value)} chars)"
        else:
            masked[name] = value
    return masked
