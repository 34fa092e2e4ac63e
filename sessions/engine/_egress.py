"""Egress rules: which addresses an HTTP target may be reached at (pure: no sockets, no HTTP client).

A hosted inspector connects wherever its users point it, from inside the operator's network: without
rules, a URL is a way to reach the loopback interface, the private network and the cloud's metadata
service (server-side request forgery). ``EgressPolicy`` says yes or no to a host name before it is
resolved and to every address it resolves to; ``_egress_net.EgressBackend`` applies it at connect time.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

__all__ = [
    "METADATA_ADDRESSES",
    "METADATA_HOSTS",
    "EgressPolicy",
    "EgressRefused",
    "IpAddress",
    "is_forbidden_address",
    "is_numeric_disguise",
]

IpAddress = IPv4Address | IPv6Address
IpNetwork = IPv4Network | IPv6Network

# Cloud instance metadata services (credentials live there): refused even when an allow-list entry
# covers them, since no MCP server is ever one of them.
METADATA_HOSTS = frozenset(
    {"metadata", "metadata.google.internal", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)
METADATA_ADDRESSES = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle, DigitalOcean...
        "169.254.170.2",  # AWS ECS task credentials
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure's wire server (a public-looking address inside every VNet)
    )
)

# IANA's special-purpose ranges: nothing here is a server on the public internet.
_FORBIDDEN = tuple(
    ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network", 0.0.0.0 included
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT (and Alibaba's metadata service)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local (the metadata services)
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",  # 6to4 relays
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
        "::/8",  # unspecified, loopback, IPv4-compatible and -mapped (their IPv4 part is judged first)
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard
        "2001::/23",  # IETF protocol assignments, Teredo included
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",  # unique-local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ip_network("64:ff9b::/96")
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")


class EgressRefused(Exception):
    """A connection the egress rules do not allow; the message says nothing about the port's state."""

    def __init__(self, host: str) -> None:
        super().__init__(f"refused by the egress rules: {host} is not an allowed address")
        self.host = host


def _embedded_ipv4(ip: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one carries: mapped, compatible, 6to4, NAT64 (well-known prefix)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip in _NAT64 or (int(ip) >> 32 == 0 and int(ip) > 1):  # NAT64, or IPv4-compatible ::a.b.c.d
        return IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_forbidden_address(ip: IpAddress) -> bool:
    """Whether an address is not on the public internet: loopback, private, link-local, CGNAT,
    unique-local, unspecified, multicast, reserved, or an IPv6 form of one of those."""
    if isinstance(ip, IPv6Address):
        ip = IPv6Address(int(ip))  # without its scope (%eth0), which changes nothing here
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return is_forbidden_address(inner)
    if any(ip in net for net in _FORBIDDEN):
        return True
    # Belt and braces: Python's own registry, in case it knows a range the list above misses.
    return ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_unspecified


def _is_metadata(ip: IpAddress) -> bool:
    if isinstance(ip, IPv6Address):
        ip = IPv6Address(int(ip))
        inner = _embedded_ipv4(ip)
        if inner is not None:
            return inner in METADATA_ADDRESSES
    return ip in METADATA_ADDRESSES


def is_numeric_disguise(host: str) -> bool:
    """Whether a host name is an IPv4 address written some other way: ``2130706433``, ``0x7f000001``,
    ``0177.0.0.1``, ``127.1``. The C resolver reads these as addresses; a person never means a name."""
    try:
        ip_address(host)
    except ValueError:
        pass
    else:
        return False  # a plain address: judged as one
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return True


def _normal_host(host: str) -> str:
    return host.strip().lower().rstrip(".")


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """Where HTTP targets may be: the public internet, and what the allow-list opens.

    ``allow_networks`` open address ranges (a single address is a /32 or /128); ``allow_hosts`` open
    host names, whatever they resolve to. Neither opens the cloud metadata services.
    """

    allow_networks: tuple[IpNetwork, ...] = ()
    allow_hosts: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_entries(cls, entries: Iterable[str]) -> EgressPolicy:
        """A policy from allow-list entries: host names, addresses, CIDR blocks (``10.1.0.0/16``)."""
        networks: list[IpNetwork] = []
        hosts: set[str] = set()
        for entry in entries:
            if not isinstance(entry, str):
                raise ValueError(f"an egress allow-list entry must be a string, not {entry!r}")
            text = entry.strip()
            if not text:
                continue
            try:
                networks.append(ip_network(text.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = _normal_host(text)
            if not _HOST_NAME.fullmatch(name) or is_numeric_disguise(name):
                raise ValueError(
                    f"egress allow-list entry {entry!r} is neither a host name nor an address or CIDR block"
                )
            hosts.add(name)
        return cls(tuple(networks), frozenset(hosts))

    def check_name(self, host: str) -> None:
        """Refuse, before any lookup, a name that is a metadata service or a numeric disguise."""
        name = _normal_host(host)
        if name in METADATA_HOSTS or is_numeric_disguise(name):
            raise EgressRefused(host)

    def allows_address(self, ip: IpAddress, *, host: str = "") -> bool:
        """Whether ``ip`` may be connected to (``host``: the name it was resolved from, if any)."""
        if _is_metadata(ip):
            return False
        if host and _normal_host(host) in self.allow_hosts:
            return True
        if any(ip.version == net.version and ip in net for net in self.allow_networks):
            return True
        return not is_forbidden_address(ip)

    def check_addresses(self, host: str, addresses: Iterable[IpAddress]) -> list[IpAddress]:
        """The addresses to connect to, in order; refused if any of them is not allowed, since a name
        that resolves to a public and a private address at once is someone's trick."""
        checked = list(dict.fromkeys(addresses))
        if not checked or not all(self.allows_address(ip, host=host) for ip in checked):
            raise EgressRefused(host)
        return checked
