"""What the client knows about the connection: the agreed revision, both sides' capabilities, the books.

The session owns one ``PeerState``; negotiation fills it, the verdict rules read it, and the
session's public attributes (``protocol_version``, ``server_capabilities`` …) show it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ._frames import Frame
from ._listen import Listens
from ._protocol import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION
from ._tasks import TaskBook

__all__ = ["PeerState"]


@dataclass(slots=True, eq=False)
class PeerState:
    """The facts of one connection, as negotiated and as seen so far."""

    validate: bool = True
    """Hold received messages to the negotiated revision's schema (``ClientOptions.validate``)."""
    state: str = "idle"
    mode: str | None = None
    """``handshake`` or ``stateless`` once connected."""
    protocol_version: str | None = None
    stamp_version: str | None = None
    """Stateless mode: the revision every request names in ``_meta`` (also while server/discover probes)."""
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    """Stateless mode: the log level each request asks for in ``_meta``."""
    initialized_sent: bool = False
    """The server may now send anything (``initialized`` sent, or a stateless connection)."""
    server_capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None
    discover_result: dict[str, Any] | None = None
    server_ids: set[int | str] = field(default_factory=set)
    """Every id the server has used for a request (ids must not be reused)."""
    answering: dict[int | str, asyncio.Task[None]] = field(default_factory=dict)
    """Server requests being answered now, which a notifications/cancelled may withdraw."""
    listens: Listens = field(default_factory=Listens)
    tool_headers: dict[str, dict[tuple[str, ...], str]] = field(default_factory=dict)
    """Stateless mode: per tool, the arguments its calls mirror into Mcp-Param-* headers."""
    dropped_tools: dict[str, str] = field(default_factory=dict)
    """Stateless mode: tools whose x-mcp-header annotations are invalid, with what is wrong (a
    conforming client drops them; the inspector keeps them, and ``session.tool_problem`` says why)."""
    tools_learned: bool = False
    tasks: TaskBook = field(default_factory=TaskBook)
    """2025-11-25 tasks: every task seen, the client's task requests in flight, the tools' task support."""
    output_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per tool, the ``outputSchema`` of its latest listing (its calls' structuredContent is held to it)."""
    subscribed: set[str] = field(default_factory=set)
    """Every URI the client sent resources/subscribe for (an update must name one, or one under it)."""

    def enter(self, state: str, note: str = "") -> Frame:
        """Move to ``state``; return the state frame that records why."""
        self.state = state
        return Frame("state", "local", transport={"state": state}, note=note or state)

    def forget_agreement(self) -> None:
        """Drop what the last negotiation agreed, before a new one."""
        self.protocol_version = None
        self.mode = None
        self.stamp_version = None
        self.discover_result = None

    def stamp(self, params: dict[str, Any] | None) -> dict[str, Any] | None:
        """Stateless mode: put the revision's protocol metadata into ``params._meta``."""
        if self.stamp_version is None:
            return params
        params = params or {}
        meta = dict(params.get("_meta") or {})
        meta[META_PROTOCOL_VERSION] = self.stamp_version
        meta[META_CLIENT_INFO] = self.client_info
        meta[META_CLIENT_CAPABILITIES] = self.client_capabilities
        if self.log_level is not None:
            meta.setdefault(META_LOG_LEVEL, self.log_level)
        params["_meta"] = meta
        return params
