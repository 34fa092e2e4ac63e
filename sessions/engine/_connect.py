"""Build the transport a target needs; each transport (httpx for a URL, process control for stdio) is
imported only when a target needs it."""

from __future__ import annotations

from ._targets import StdioTarget, Target
from ._transport import Transport

__all__ = ["make_transport"]


def make_transport(target: Target) -> Transport:
    """Build the transport for a target."""
    if isinstance(target, StdioTarget):
        from ._stdio import StdioTransport

        return StdioTransport(target)
    if target.transport == "sse":
        from ._legacy_sse import LegacySseTransport

        return LegacySseTransport(target)
    from ._streamable import StreamableHttpTransport

    return StreamableHttpTransport(target, auto=target.transport == "auto")
