"""The small contract between a transport and the session that owns it."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from ._clock import Clock
from ._frames import Frame
from ._options import ClientOptions

__all__ = ["FrameSink", "Transport", "request_ids_in"]


class FrameSink(Protocol):
    """Where a transport delivers what it sees; implemented by the session."""

    options: ClientOptions
    """The session's options; transports read their limits there (``max_message_bytes``, reconnection)."""
    clock: Clock
    """What transports wait on between reconnections (a ``testing.ManualClock`` in tests)."""

    def record(self, frame: Frame) -> Frame:
        """Number and publish a frame that carries no message to interpret (out, http, stderr, exit)."""
        ...

    def receive(self, frame: Frame) -> None:
        """Take an incoming frame that should carry a JSON-RPC message (or a batch)."""
        ...

    def requests_failed(self, request_ids: list[int | str], error: Exception) -> None:
        """Fail in-flight requests whose messages the transport could not deliver or answer."""
        ...

    def is_pending(self, request_id: int | str) -> bool:
        """Tell whether a request still waits for its response."""
        ...

    def connection_lost(self, error: Exception) -> None:
        """Fail everything in flight: the connection is gone."""
        ...

    def param_headers(self, message: dict[str, Any]) -> dict[str, str]:
        """The ``Mcp-Param-*`` headers a stateless tools/call carries over HTTP (from the tool's schema)."""
        ...

    def clocks_held(self) -> AbstractContextManager[None]:
        """Stop the requests' clocks while a person acts for the connection (authorizes, say)."""
        ...


class Transport(Protocol):
    """Moves raw frames between the session and one MCP server."""

    name: str

    async def open(self, sink: FrameSink) -> None: ...

    async def send(self, raw: bytes, message: Any) -> Frame:
        """Record ``raw`` as an outgoing frame, then deliver it."""
        ...

    def set_protocol_version(self, version: str) -> None: ...

    async def close(self) -> None: ...


def request_ids_in(message: Any) -> list[int | str]:
    """Return the ids of the requests in a message or batch (not of responses or notifications)."""
    items = message if isinstance(message, list) else [message]
    return [
        m["id"] for m in items if isinstance(m, dict) and "method" in m and isinstance(m.get("id"), int | str)
    ]
