"""TLS contexts for HTTP clients, built once per CA file, and the OAuth flow's own client.

Every HTTP client of the engine comes through here, so this is also where httpcore's one costly habit
is undone: it tries to import sniffio (optional; anyio 4 no longer brings it) for every lock it sets
up, several per request, and a failed import is not remembered, so each try searched ``sys.path``
again (a few ms of a CLI call). ``None`` in ``sys.modules`` remembers the answer: the import fails at once.
"""

from __future__ import annotations

import functools
import importlib.util
import ssl
import sys

import httpx

if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # type: ignore[assignment]

from ._errors import TransportError
from ._targets import HttpTarget

__all__ = ["oauth_client", "tls_context"]


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
