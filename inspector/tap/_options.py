"""The tap's command line: its own options, then the server's command after ``--`` (stdio), or
``--listen`` and the server's URL (HTTP)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["USAGE", "TapOptions", "UsageError", "parse_args"]

USAGE = (
    "usage: mcp-inspector tap [--name NAME] [--record FILE] -- COMMAND [ARGS...]\n"
    "       mcp-inspector tap --listen 127.0.0.1:PORT [--allow-remote] [--rewrite-resource] [--name NAME]\n"
    "                         [--record FILE] URL"
)
_VALUED = ("--name", "--record", "--listen")


class UsageError(ValueError):
    """The command line is not one the tap takes."""


@dataclass(slots=True)
class TapOptions:
    command: str
    args: list[str]
    name: str
    record: str | None = None
    listen: tuple[str, int] | None = None
    """HTTP: the address the tap listens on (host, port); ``None`` for a stdio tap."""
    url: str | None = None
    """HTTP: the upstream server's URL, which the host reaches at the same path on ``listen``."""
    rewrite_resource: bool = False
    """HTTP: give the host the tap's URL as the protected resource (OAuth through the tap)."""


def parse_args(argv: Sequence[str]) -> TapOptions:
    """Read the tap's options (everything after ``tap``); the server's command line follows ``--``.

    Written by hand rather than with argparse: a server's own options (``--help``, ``-y``) must never be
    taken for the tap's, and the tap starts before its server, so it imports as little as it can.
    """
    args = list(argv)
    given: dict[str, str] = {}
    allow_remote = rewrite_resource = False
    url: str | None = None
    while args:
        arg = args.pop(0)
        if arg == "--":
            break
        if arg in ("-h", "--help"):
            raise UsageError("")
        if arg == "--allow-remote":
            allow_remote = True
            continue
        if arg == "--rewrite-resource":
            rewrite_resource = True
            continue
        key, has_value, value = arg.partition("=")
        if key not in _VALUED:
            if not arg.startswith("-") and url is None:
                url = arg  # an HTTP tap's URL; a stdio tap refuses it below
                continue
            raise UsageError(f"unknown option {arg!r} (the server's command goes after --)")
        if not has_value:
            if not args:
                raise UsageError(f"{key} needs a value")
            value = args.pop(0)
        given[key.removeprefix("--")] = value
    else:
        if "listen" not in given and url is None:
            raise UsageError("no server command: put it after --")
    name, record = given.get("name"), given.get("record")
    if "listen" in given:
        if args or url is None:
            raise UsageError("an HTTP tap takes the server's URL, not a command: --listen HOST:PORT URL")
        listen = _listen_address(given["listen"], allow_remote)
        _check_url(url)
        return TapOptions(
            "",
            [],
            name or urlsplit(url).netloc,
            record,
            listen=listen,
            url=url,
            rewrite_resource=rewrite_resource,
        )
    if url is not None:
        raise UsageError(
            f"unknown argument {url!r} (the server's command goes after --; a URL needs --listen)"
        )
    if allow_remote or rewrite_resource:
        raise UsageError(f"{'--allow-remote' if allow_remote else '--rewrite-resource'} goes with --listen")
    if not args or not args[0]:
        raise UsageError("no server command after --")
    command, rest = args[0], args[1:]
    return TapOptions(command, rest, name or os.path.basename(command) or command, record)


def _listen_address(value: str, allow_remote: bool) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6); a host that is not loopback only with ``--allow-remote``."""
    host, sep, port_text = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isascii() or not port_text.isdigit() or int(port_text) > 65535:
        raise UsageError(f"--listen takes HOST:PORT (127.0.0.1:8931), not {value!r}")
    if not allow_remote and not _loopback(host):
        raise UsageError(
            f"--listen {value}: {host} is not a loopback address; anyone who reaches it could use the "
            "server through the tap (and the host's credentials with it). Add --allow-remote if you mean it"
        )
    return host, int(port_text)


def _loopback(host: str) -> bool:
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError as exc:
        raise UsageError(f"not a URL the tap can reach: {url!r} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the server's URL must be http:// or https:// with a host, not {url!r}")
