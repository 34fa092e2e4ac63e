"""The egress rules at connect time: an httpcore network backend that resolves, checks, then connects.

Checking a URL's host before the request and letting the HTTP client resolve it again leaves a gap
(DNS rebinding: the second answer differs). Here the one resolution is the one checked, and the
connection goes to the checked address itself. TLS is unaffected: httpcore starts it over this stream
with the origin's host name for SNI and certificate verification.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from ipaddress import ip_address

import httpcore
import httpx

from ._egress import EgressPolicy, EgressRefused, IpAddress

__all__ = ["EgressBackend", "confined_transport"]


class EgressBackend(httpcore.AsyncNetworkBackend):
    """Connect only to addresses the policy allows; every connection of a client goes through here."""

    def __init__(self, policy: EgressPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()

    async def resolve(self, host: str, port: int, timeout: float | None) -> list[IpAddress]:
        """The addresses ``host`` may be reached at, checked; raises ``EgressRefused`` before any packet
        goes to it."""
        self.policy.check_name(host)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror or exc}") from None
        return self.policy.check_addresses(host, (ip_address(info[4][0]) for info in infos))

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self.resolve(host, port, timeout)
        except EgressRefused as exc:
            # httpx turns an httpcore ConnectError into its own: the transports report it as any other
            # failure to connect, with this message.
            raise httpcore.ConnectError(str(exc)) from exc
        last: Exception | None = None
        for ip in addresses:
            try:
                return await self.inner.connect_tcp(
                    str(ip), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError(str(EgressRefused(path)))

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def confined_transport(
    policy: EgressPolicy, *, verify: ssl.SSLContext | bool, limits: httpx.Limits
) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose every connection goes through ``EgressBackend``, with no proxy.

    httpx takes no network backend, so its connection pool is replaced by one built with the same
    settings and ours (httpx is pinned; tests/engine/test_egress.py connects through it for real).
    """
    transport = httpx.AsyncHTTPTransport(verify=verify, limits=limits, trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=EgressBackend(policy),
    )
    return transport
