"""The tap's command line: its own options, then the server's command after ``--``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["USAGE", "TapOptions", "UsageError", "parse_args"]

USAGE = "usage: mcp-inspector tap [--name NAME] [--record FILE] -- COMMAND [ARGS...]"


class UsageError(ValueError):
    """The command line is not one the tap takes."""


@dataclass(slots=True)
class TapOptions:
    command: str
    args: list[str]
    name: str
    record: str | None = None


def parse_args(argv: Sequence[str]) -> TapOptions:
    """Read the tap's options (everything after ``tap``); the server's command line follows ``--``.

    Written by hand rather than with argparse: a server's own options (``--help``, ``-y``) must never be
    taken for the tap's, and the tap starts before its server, so it imports as little as it can.
    """
    args = list(argv)
    name: str | None = None
    record: str | None = None
    while args:
        arg = args.pop(0)
        if arg == "--":
            break
        if arg in ("-h", "--help"):
            raise UsageError("")
        key, has_value, value = arg.partition("=")
        if key not in ("--name", "--record"):
            raise UsageError(f"unknown option {arg!r} (the server's command goes after --)")
        if not has_value:
            if not args:
                raise UsageError(f"{key} needs a value")
            value = args.pop(0)
        if key == "--name":
            name = value
        else:
            record = value
    else:
        raise UsageError("no server command: put it after --")
    if not args or not args[0]:
        raise UsageError("no server command after --")
    command, rest = args[0], args[1:]
    return TapOptions(command, rest, name or os.path.basename(command) or command, record)
