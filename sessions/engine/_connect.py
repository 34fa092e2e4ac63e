"""Build the transport a target needs; HTTP support (and httpx) is imported only for a URL."""

from __future__ import annotations

from ._stdio import StdioTransport
from ._targets import StdioTarget, Target
from ._transport import Transport

__all__ = ["make_transport"]


def make_transport(target: Target) -> Transport:
    """Build the transport for a target; HTTP support is imported only when needed."""
    if isinstance(target, StdioTarget):
        return StdioTransport(target)
    from ._legacy_sse import LegacySseTransport
    from ._streamable import StreamableHttpTransport

    if target.transport == "sse":
        return LegacySseTransport(target)
    return StreamableHttpTransport(target, auto=target.transport == "auto")
