"""Exceptions the engine raises to callers of its async methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._frames import Frame
    from ._transport import Transport

__all__ = [
    "ConnectionClosed",
    "EngineError",
    "FallbackToLegacy",
    "HttpStatusError",
    "InputRequiredRoundsExceeded",
    "McpError",
    "MessageTooLarge",
    "RequestCancelled",
    "RequestTimeout",
    "SessionExpired",
    "TransportError",
    "VersionNegotiationFailed",
    "error_name",
]

# JSON-RPC and MCP error codes, named; -32020 … -32022 belong to the stateless revision (2026-07-28).
ERROR_NAMES = {
    -32700: "Parse error",
    -32600: "Invalid request",
    -32601: "Method not found",
    -32602: "Invalid params",
    -32603: "Internal error",
    -32002: "Resource not found",
    -32020: "Header mismatch",
    -32021: "Missing required client capability",
    -32022: "Unsupported protocol version",
    -32042: "URL elicitation required",
    -1: "User rejected",
}


def error_name(code: int) -> str | None:
    """A readable name for a JSON-RPC / MCP error code, or ``None`` when the code has no known name."""
    return ERROR_NAMES.get(code)


class EngineError(Exception):
    """Base class of every error the engine raises."""


class McpError(EngineError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data

    @property
    def name(self) -> str | None:
        """The code's name (``Header mismatch`` for -32020 …), when it has one."""
        return error_name(self.code)


class RequestTimeout(EngineError):
    """A request got no response in time; ``notifications/cancelled`` was sent."""


class RequestCancelled(EngineError):
    """A request was cancelled by the caller; ``notifications/cancelled`` was sent."""


class TransportError(EngineError):
    """The transport could not deliver a message or lost its connection."""


class ConnectionClosed(TransportError):
    """The connection ended while a request was in flight."""

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class MessageTooLarge(TransportError):
    """The server's reply was larger than ``max_message_bytes``: its request fails as soon as the bytes
    kept of it (``frame``, flagged ``message-too-large``) show which request it answers."""

    def __init__(self, message: str, *, frame: Frame | None = None) -> None:
        super().__init__(message)
        self.frame = frame


class HttpStatusError(TransportError):
    """An HTTP exchange ended with a status the transport cannot turn into a message."""

    def __init__(self, status: int, body: bytes) -> None:
        snippet = body[:200].decode("utf-8", errors="replace").strip()
        super().__init__(f"HTTP {status}" + (f": {snippet}" if snippet else ""))
        self.status = status
        self.body = body


class FallbackToLegacy(TransportError):
    """The URL refused a Streamable HTTP initialize with a 4xx: try ``replacement`` (legacy HTTP+SSE)."""

    def __init__(self, status: int, replacement: Transport) -> None:
        super().__init__(f"POST initialize answered {status}; trying the legacy HTTP+SSE transport")
        self.status = status
        self.replacement = replacement


class SessionExpired(TransportError):
    """The server no longer knows the HTTP session (404, or 400 from some servers); re-initialize."""


class VersionNegotiationFailed(EngineError):
    """The server answered initialize (or server/discover) with no protocol version this client speaks."""


class SkillError(EngineError):
    """A skill cannot be used as asked: not offered, not found, an invalid entry, an unlisted file."""


class InputRequiredRoundsExceeded(EngineError):
    """A stateless server kept answering input-required past ``ClientOptions.input_required_max_rounds``."""
