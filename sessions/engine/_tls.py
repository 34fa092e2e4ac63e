"""TLS contexts for HTTP clients, built once per CA file, and the OAuth flow's own client.

Imported with httpx (``_http`` imports it), so it also settles, once, what httpcore would otherwise
look up on every request: see ``_no_sniffio``.
"""

from __future__ import annotations

import functools
import importlib.util
import ssl
import sys

import httpx

from ._errors import TransportError
from ._targets import HttpTarget

__all__ = ["oauth_client", "tls_context"]


def _no_sniffio() -> None:
    """Remember, once, that ``sniffio`` is not installed.

    httpcore 1.x runs ``import sniffio`` whenever it sets up a lock, an event or a cancellation
    shield: several times a request. Without sniffio (anyio 4.x no longer needs it) every one of
    those is a failed import that searches the whole ``sys.path``, which a thousand sessions'
    DELETEs at stop feel. A ``None`` entry makes it fail at once, as it would anyway; when
    sniffio is installed nothing changes.
    """
    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


_no_sniffio()


@functools.cache
def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    if ca_file is not None:
        try:
            return ssl.create_default_context(cafile=ca_file)
        except OSError as exc:  # ssl.SSLError included: not a PEM file of certificates
            raise TransportError(f"cannot use {ca_file} as CA certificates: {exc}") from None
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def oauth_client(target: HttpTarget) -> httpx.AsyncClient:
    """The client the OAuth flow uses: TLS always verified (unless turned off for this server) even
    when the MCP server itself is plain HTTP, and held to the same egress rules."""
    timeout = httpx.Timeout(connect=target.connect_timeout, read=30.0, write=30.0, pool=None)
    verify: bool | ssl.SSLContext = tls_context(target.ca_file) if target.verify_tls else False
    if target.egress is not None:
        from ._egress_net import confined_transport

        transport = confined_transport(target.egress, verify=verify, limits=httpx.Limits())
        return httpx.AsyncClient(
            timeout=timeout, transport=transport, trust_env=False, follow_redirects=False
        )
    return httpx.AsyncClient(timeout=timeout, verify=verify, follow_redirects=False)
