"""``mcp-inspector tap``: stand between a host and its stdio server, forward both ways, record both.

    mcp-inspector tap [--name NAME] [--record FILE] -- COMMAND [ARGS...]

A host (Claude Desktop, an IDE, an agent) runs this in place of the server's command. The server is
started as given (same environment, same working directory); what the host writes reaches the server's
stdin and what the server writes reaches the host, byte for byte, as soon as it is read; the server's
stderr is the tap's; its exit code is the tap's. Every line, both ways, with stderr and the process's
start and exit, becomes a frame: appended to a spool file in the data folder, which the running
inspector turns into a live session named NAME (``sessions/runtime/taps.py``), and with ``--record``
to a JSON Lines file like the CLI's ``--record``.

Forwarding never waits for the inspector, for the disk or for the verdicts: the pumps are plain
threads that read and write file descriptors (``_forward``); the frames are made and written by a
thread of their own (``_spool``), which loads the engine after the server has started. Nothing here
imports Django.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TapOptions", "main", "parse_args"]

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


def main(argv: Sequence[str]) -> int:
    """Run the tap (``argv``: what follows ``tap``); return the exit code the host should see."""
    try:
        options = parse_args(argv)
    except UsageError as exc:
        message = f"mcp-inspector tap: {exc}\n" if str(exc) else ""
        sys.stderr.write(f"{message}{USAGE}\n")
        return 2 if message else 0
    from inspector.tap._forward import run

    return run(options)
