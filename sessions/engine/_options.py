"""What a client offers and how it behaves: protocol version, capabilities, timeouts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._apps import UI_EXTENSION, UI_MIME_TYPE
from ._clock import Clock

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_MODERN_VERSION",
    "MODERN_VERSIONS",
    "ClientCapabilities",
    "ClientOptions",
]

# Kept here rather than imported from mcp-types: that package costs ~0.35 s to import,
# and the CLI must stay quick when no verdicts are asked for.
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]
# Revisions without a handshake: ``server/discover``, and protocol metadata in every request's ``_meta``.
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
LATEST_MODERN_VERSION = MODERN_VERSIONS[-1]
MODES = ("handshake", "stateless", "auto")


@dataclass(slots=True)
class ClientCapabilities:
    """Client capabilities, each switchable; ``to_wire`` shapes them for a protocol revision."""

    roots: bool = True
    roots_list_changed: bool = True
    sampling: bool = True
    sampling_tools: bool = False
    """2025-11-25: tool-enabled sampling (``sampling.tools``): requests that offer the model tools."""
    elicitation_form: bool = True
    elicitation_url: bool = False
    tasks: bool = True
    """2025-11-25: serve task-augmented sampling and elicitation (for those declared), and tasks/*."""
    apps: bool = True
    """MCP Apps: declare the ``io.modelcontextprotocol/ui`` extension (the host renders views)."""
    experimental: dict[str, Any] | None = None

    def to_wire(self, version: str) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        modern = version in MODERN_VERSIONS
        if self.roots:
            # 2026-07-28 dropped notifications/roots/list_changed, so there is nothing to declare.
            caps["roots"] = {"listChanged": True} if self.roots_list_changed and not modern else {}
        if self.sampling:
            caps["sampling"] = {"tools": {}} if self.sampling_tools and version >= "2025-11-25" else {}
        if version >= "2025-06-18" and (self.elicitation_form or self.elicitation_url):
            if version >= "2025-11-25":
                modes: dict[str, Any] = {}
                if self.elicitation_form:
                    modes["form"] = {}
                if self.elicitation_url:
                    modes["url"] = {}
                caps["elicitation"] = modes
            else:
                caps["elicitation"] = {}
        # 2026-07-28 moved tasks into the extension io.modelcontextprotocol/tasks, with another shape,
        # which the client does not offer yet.
        if self.tasks and version == "2025-11-25":
            requests: dict[str, Any] = {}
            if "sampling" in caps:
                requests["sampling"] = {"createMessage": {}}
            if "elicitation" in caps:
                requests["elicitation"] = {"create": {}}
            if requests:
                caps["tasks"] = {"list": {}, "cancel": {}, "requests": requests}
        if self.experimental:
            caps["experimental"] = dict(self.experimental)
        if self.apps:
            # Declared in every revision: MCP Apps servers read capabilities.extensions whatever the
            # revision (2026-07-28 carries them in each request's _meta, which copies these).
            caps["extensions"] = {UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}
        return caps


@dataclass(slots=True)
class ClientOptions:
    """How a session talks: the version it asks for, what it declares, and how long it waits."""

    protocol_version: str = LATEST_HANDSHAKE_VERSION
    """The revision to offer; a stateless one (2026-07-28) means stateless mode."""
    mode: str = "handshake"
    """``handshake`` (initialize), ``stateless`` (server/discover, ``_meta`` on every request) or
    ``auto`` (try server/discover, fall back to initialize when the server does not speak it)."""
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    client_info: dict[str, Any] = field(default_factory=lambda: {"name": "mcp-inspector", "version": "0.1.0"})
    timeout: float | None = 60.0
    """Seconds a request may wait without a response or progress; ``None`` waits forever."""
    max_total_timeout: float | None = 600.0
    """Upper bound for a request whose clock progress keeps resetting."""
    reset_timeout_on_progress: bool = True
    validate: bool = True
    """Check every received frame against the negotiated revision's schema (imports mcp-types)."""
    roots: list[dict[str, Any]] = field(default_factory=list)
    review_roots: bool = False
    """Let a person review (and edit) each roots/list answer, as for sampling and elicitation."""
    first_request_id: int = 0
    """Where request ids start; a reconnect within one recorded session continues the numbering."""
    log_level: str | None = None
    """Stateless mode: the ``io.modelcontextprotocol/logLevel`` each request carries (``None``: no logs)."""
    discover_timeout: float = 10.0
    """Seconds ``auto`` waits for the server/discover probe before falling back to initialize."""
    input_required_max_rounds: int = 10
    """Stateless mode: how many input-required retries one request may take before giving up."""
    learn_tools: bool = False
    """List the tools before the first tools/call of a session that has not listed them, to learn
    their output schemas, which call results are held to (the CLI sets it when it records)."""
    listen: bool = False
    """Stateless mode: open a subscriptions/listen stream for list changes right after discovery."""
    clock: Clock | None = None
    """What request timeouts and reconnection delays are measured on; ``None``: the event loop's clock
    (tests pass a ``testing.ManualClock`` to move time by hand)."""
    max_message_bytes: int = 16 * 1024 * 1024
    """The largest message the transports take in: a longer stdout line, SSE event or HTTP body is
    recorded as its first 4 KiB, flagged ``message-too-large``, and the rest skipped; a reply's request
    fails at once (``MessageTooLarge``) when the bytes kept show which request it answers."""
    max_message_bytes_name: str = "max_message_bytes"
    """What a person sets to raise ``max_message_bytes`` (a CLI option, a setting of the app), named
    in the error a request fails with when its reply is over the limit."""
    max_reconnects: int = 3
    """Streamable HTTP: how many times in a row a dropped SSE stream is resumed (GET with
    ``Last-Event-ID``) before its requests fail; a stream that delivers new events starts the count again."""
    reconnect_delay: float = 1.0
    """Seconds before the first reconnection when the server sent no ``retry:`` (doubling each time,
    at most 30 s); a ``retry:`` is honoured as given."""

    def effective_mode(self) -> str:
        """The mode a session connects in: a stateless ``protocol_version`` implies ``stateless``."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.mode == "handshake" and self.protocol_version in MODERN_VERSIONS:
            return "stateless"
        return self.mode

    def modern_version(self) -> str:
        """The stateless revision to ask for."""
        return self.protocol_version if self.protocol_version in MODERN_VERSIONS else LATEST_MODERN_VERSION

    def handshake_version(self) -> str:
        """The handshake revision to offer in initialize."""
        return (
            self.protocol_version
            if self.protocol_version not in MODERN_VERSIONS
            else LATEST_HANDSHAKE_VERSION
        )
