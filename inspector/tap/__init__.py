"""``mcp-inspector tap``: stand between a host and its stdio server, forward both ways, record both.

    mcp-inspector tap [--name NAME] [--record FILE] -- COMMAND [ARGS...]
    mcp-inspector tap --listen 127.0.0.1:PORT [--name NAME] [--record FILE] URL

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

With ``--listen`` the tap is a reverse proxy for a Streamable HTTP or legacy SSE server at URL instead
(``_proxy``: asyncio and h11 both ways, ``_upstream`` towards the server); its frames, in the engine's
HTTP shapes, go through the same spool (``_http_spool``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from inspector.tap._options import USAGE, TapOptions, UsageError, parse_args

__all__ = ["TapOptions", "UsageError", "main", "parse_args"]


def main(argv: Sequence[str]) -> int:
    """Run the tap (``argv``: what follows ``tap``); return the exit code the host should see."""
    try:
        options = parse_args(argv)
    except UsageError as exc:
        message = f"mcp-inspector tap: {exc}\n" if str(exc) else ""
        sys.stderr.write(f"{message}{USAGE}\n")
        return 2 if message else 0
    if options.listen is not None:
        from inspector.tap._http import run as run_http

        return run_http(options)
    from inspector.tap._forward import run

    return run(options)
