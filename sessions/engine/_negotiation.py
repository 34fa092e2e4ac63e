"""How a session agrees on a revision: the initialize handshake, server/discover, or auto (both).

Each flow fills the session's ``PeerState`` (revision, mode, both sides' capabilities, server
info) and records ``state`` frames that say what was chosen and why.
"""

from __future__ import annotations

from types import EllipsisType
from typing import Any, Protocol

from ._errors import (
    EngineError,
    FallbackToLegacy,
    HttpStatusError,
    McpError,
    RequestTimeout,
    VersionNegotiationFailed,
)
from ._options import HANDSHAKE_VERSIONS, MODERN_VERSIONS, ClientOptions
from ._peer import PeerState
from ._protocol import META_SERVER_INFO
from ._transport import FrameSink, Transport

__all__ = ["Connection", "discover", "handshake", "initialize", "reinitialize"]


class Connection(FrameSink, Protocol):
    """What negotiation drives: the session's options, its peer state, its transport and its requests."""

    options: ClientOptions
    peer: PeerState
    transport: Transport

    async def request(
        self, method: str, params: dict[str, Any] | None = None, **options: Any
    ) -> dict[str, Any]: ...

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None: ...


def _enter(conn: Connection, state: str, note: str = "") -> None:
    conn.record(conn.peer.enter(state, note))


async def initialize(conn: Connection) -> dict[str, Any]:
    """Connect in the options' mode: the handshake, server/discover (stateless), or auto.

    ``auto`` probes server/discover and falls back to initialize when the server shows it does not
    speak the stateless revision; the ``state`` frames say which mode was chosen and why.
    """
    mode = conn.options.effective_mode()
    if mode == "handshake":
        return await handshake(conn)
    if mode == "stateless":
        try:
            return await discover(conn)
        except EngineError as exc:
            if conn.peer.state != "failed":
                _enter(conn, "failed", f"server/discover failed: {exc}")
            raise
    try:
        return await discover(conn, timeout=conn.options.discover_timeout)
    except (McpError, HttpStatusError, RequestTimeout, VersionNegotiationFailed) as exc:
        if isinstance(exc, McpError) and exc.code == -32022 and _modern_only(exc.data):
            _enter(conn, "failed", f"server/discover failed: {exc}; the server speaks no revision we do")
            raise
        if isinstance(exc, McpError):
            why = f"{exc.code} {exc.name or exc.message}"
        elif isinstance(exc, HttpStatusError):
            why = f"HTTP {exc.status}"
        else:
            why = str(exc)
        conn.peer.stamp_version = None
        return await handshake(conn, f"handshake: server/discover failed ({why}); falling back to initialize")


def _modern_only(data: Any) -> bool:
    """A -32022 whose supported list names no revision this client speaks: a real incompatibility."""
    supported = data.get("supported") if isinstance(data, dict) else None
    return isinstance(supported, list) and not any(
        v in HANDSHAKE_VERSIONS or v in MODERN_VERSIONS for v in supported
    )


async def discover(conn: Connection, *, timeout: float | None | EllipsisType = ...) -> dict[str, Any]:
    """Connect statelessly: server/discover, then every request carries the protocol in ``_meta``.

    Fills ``protocol_version``, ``server_info`` (the result's ``_meta`` serverInfo),
    ``server_capabilities`` and ``instructions``; a -32022 answer naming a revision we speak is
    probed once more at that revision, even the one just asked for (never more than once).
    """
    peer, capabilities = conn.peer, conn.options.capabilities
    version = conn.options.modern_version()
    peer.client_capabilities = capabilities.to_wire(version)
    _enter(conn, "discovering", f"server/discover at protocol {version}")
    result: dict[str, Any] = {}
    for attempt in range(2):
        peer.stamp_version = version
        try:
            result = await conn.request("server/discover", None, progress=False, timeout=timeout)
        except McpError as exc:
            supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
            mutual = [v for v in MODERN_VERSIONS if isinstance(supported, list) and v in supported]
            if exc.code == -32022 and mutual and attempt == 0:
                asked, version = version, mutual[-1]
                peer.client_capabilities = capabilities.to_wire(version)
                again = "again" if version == asked else f"at {version}"
                _enter(
                    conn,
                    "discovering",
                    f"server/discover {again}: the server refused {asked} (-32022) "
                    f"but lists {', '.join(map(str, supported or []))} as supported",
                )
                continue
            peer.stamp_version = None
            raise
        except BaseException:
            peer.stamp_version = None
            raise
        break
    supported = result.get("supportedVersions")
    mutual = [v for v in MODERN_VERSIONS if isinstance(supported, list) and v in supported]
    if not mutual:
        peer.stamp_version = None
        raise VersionNegotiationFailed(
            f"server/discover listed {supported!r}; this client speaks {', '.join(MODERN_VERSIONS)}"
        )
    chosen = version if version in mutual else mutual[-1]
    peer.stamp_version = chosen
    peer.protocol_version = chosen
    peer.mode = "stateless"
    peer.discover_result = result
    conn.transport.set_protocol_version(chosen)
    peer.client_capabilities = capabilities.to_wire(chosen)
    caps = result.get("capabilities")
    peer.server_capabilities = caps if isinstance(caps, dict) else {}
    meta = result.get("_meta")
    info = meta.get(META_SERVER_INFO) if isinstance(meta, dict) else None
    peer.server_info = info if isinstance(info, dict) else {}
    instructions = result.get("instructions")
    peer.instructions = instructions if isinstance(instructions, str) else None
    peer.initialized_sent = True  # nothing to wait for: the server may talk from now on
    _enter(conn, "ready", f"stateless: server/discover answered {chosen}")
    return result


async def handshake(conn: Connection, why: str | None = None) -> dict[str, Any]:
    """Run the handshake: initialize, check the version, then notifications/initialized."""
    peer, capabilities = conn.peer, conn.options.capabilities
    requested = conn.options.handshake_version()
    peer.client_capabilities = capabilities.to_wire(requested)
    offer = f"offering protocol {requested}"
    _enter(conn, "initializing", f"{why}, {offer}" if why else offer)
    params = {
        "protocolVersion": requested,
        "capabilities": peer.client_capabilities,
        "clientInfo": conn.options.client_info,
    }
    try:
        result = await conn.request("initialize", params, progress=False)
    except FallbackToLegacy as exc:
        # Auto-detection, as the spec's backward-compatibility section describes.
        await conn.transport.close()
        conn.transport = exc.replacement
        _enter(conn, "connecting", f"{exc}")
        await conn.transport.open(conn)
        return await handshake(conn, why)
    except EngineError as exc:
        _enter(conn, "failed", f"initialize failed: {exc}")
        raise
    version = result.get("protocolVersion")
    if version not in HANDSHAKE_VERSIONS:
        _enter(conn, "failed", f"server answered protocol {version!r}, which this client does not speak")
        spoken = ", ".join(HANDSHAKE_VERSIONS)
        raise VersionNegotiationFailed(f"server answered protocol {version!r}; client speaks {spoken}")
    peer.protocol_version = str(version)
    peer.mode = "handshake"
    conn.transport.set_protocol_version(peer.protocol_version)
    if version != requested:
        # Capabilities were shaped for the offered revision; reshape them for the agreed one.
        peer.client_capabilities = capabilities.to_wire(peer.protocol_version)
    caps = result.get("capabilities")
    peer.server_capabilities = caps if isinstance(caps, dict) else {}
    info = result.get("serverInfo")
    peer.server_info = info if isinstance(info, dict) else {}
    instructions = result.get("instructions")
    peer.instructions = instructions if isinstance(instructions, str) else None
    peer.initialized_sent = True
    await conn.notify("notifications/initialized")
    note = f"protocol {version}" + (f" (offered {requested})" if version != requested else "")
    _enter(conn, "ready", note)
    return result


async def reinitialize(conn: Connection) -> dict[str, Any]:
    """Start a new HTTP session after the server expired the old one."""
    reset = getattr(conn.transport, "reset", None)
    if reset is None:
        raise EngineError(f"the {conn.transport.name} transport cannot start a new session")
    reset()
    conn.peer.forget_agreement()
    return await initialize(conn)
