"""The mcp-inspector command: the web inspector by default, a one-shot CLI with --cli, a tap with ``tap``,
a replay of a recording with ``replay``, an eval suite run with ``eval``."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

# Nothing here imports Django (nor asyncio, webbrowser, logging, ipaddress) at module level: the --cli
# and tap paths must start fast, and ``run`` tunes the collector before they import.

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 6274
GC_THRESHOLDS = (50_000, 20, 100)
"""The collector's thresholds in a process that runs sessions (Python's: 700, 10, 10)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the inspector; return the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["tap"]:
        from inspector import tap

        return tap.main(args[1:])
    if args[:1] == ["replay"]:
        from inspector.cli import replay

        return replay.main(args[1:])
    if args[:1] == ["eval"]:
        from inspector.cli import evals

        return evals.main(args[1:])
    if "--cli" in args:
        from inspector import cli

        return cli.main(args)
    return serve(args)


def run() -> NoReturn:
    """The ``mcp-inspector`` command (and ``python -m inspector``): ``main()``, then the process ends.

    A CLI call is a short process, and what it allocates mostly lives as long as it does (modules,
    classes, functions): its garbage collector looks at new objects every 100,000 allocations instead
    of every 700, from before it imports anything heavy (collections during imports find next to
    nothing), and it ends without the interpreter's teardown (``inspector.cli.end_process``).
    """
    if sys.argv[1:2] == ["tap"]:
        from inspector.tap._forward import end_process as end_tap

        end_tap(main())
    cli = "--cli" in sys.argv[1:] or sys.argv[1:2] in (["replay"], ["eval"])
    if cli:
        gc.set_threshold(100_000)
    code = main()
    if cli:
        from inspector.cli import end_process

        end_process(code)
    sys.exit(code)


def is_loopback(host: str) -> bool:
    """Tell whether host names this machine only."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        # A hostname other than localhost may resolve anywhere; treat it as remote.
        return False


def installed_version() -> str:
    """The installed package's version, from its metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp-inspector")
    except PackageNotFoundError:
        return "(not installed: running from a source tree)"


def parse_web_args(args: Sequence[str]) -> argparse.Namespace:
    """Parse the web mode's options, refusing a non-loopback bind without --allow-remote."""
    parser = argparse.ArgumentParser(
        prog="mcp-inspector",
        description="Inspect MCP servers from your browser. Use --cli for the command-line mode.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"interface to bind (default {DEFAULT_HOST})")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to bind (default {DEFAULT_PORT})"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {installed_version()}")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser window")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow binding to a non-loopback interface (the inspector can start processes)",
    )
    opts = parser.parse_args(args)
    if not is_loopback(opts.host) and not opts.allow_remote:
        parser.error(
            f"refusing to bind to {opts.host}: the inspector can launch local processes. "
            "Pass --allow-remote if you really mean it."
        )
    return opts


def _storage_problem(error: BaseException, folder: Any = None) -> str:
    """What stops the start when the database or the data folder cannot be written, and what to do."""
    import shutil

    from sessions.runtime import storage

    said = f"the database cannot be opened or written ({storage.cause(error)})"
    if folder is None:
        folder = os.environ.get("INSPECTOR_DATA_DIR") or "the data folder"
    try:
        full = storage.is_full(error) or shutil.disk_usage(folder).free < (1 << 20)
    except OSError:
        full = storage.is_full(error)
    if full:
        return f"the disk of {folder} is full: free some space there, then start again"
    return said


def serve(args: Sequence[str]) -> int:
    """Check the install, migrate the database and serve the web inspector with daphne until interrupted."""
    opts = parse_web_args(args)
    if opts.allow_remote and not is_loopback(opts.host):
        print(
            f"WARNING: listening on {opts.host}; anyone who can reach this port can make the "
            "inspector launch processes on this machine. Set ALLOWED_HOSTS to the names clients use.",
            file=sys.stderr,
        )

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import asyncio

    # daphne.server installs the asyncio Twisted reactor on import, so import it before
    # django.setup() loads apps that might import twisted.internet.reactor themselves.
    import webbrowser
    from urllib.parse import urlencode

    import django
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server
    from django.core.management import call_command
    from twisted.internet import reactor

    try:
        django.setup()  # settings make the data folder and its keys on the first run
    except OSError as exc:
        print(f"mcp-inspector cannot start: {_storage_problem(exc)}", file=sys.stderr)
        return 1
    from django.conf import settings
    from django.db import DatabaseError

    if settings.INSPECTOR_HOSTED:
        hide_environment()
    # Before anything is written: a broken install (no templates, no static files) stops here
    # with the reason, instead of serving a 500 for every page behind a green /healthz.
    from inspector.checks import startup_problems

    errors, warnings = startup_problems()
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    if errors:
        print("mcp-inspector cannot start:", *errors, sep="\n  ", file=sys.stderr)
        return 1
    from sessions.runtime.store import mark_orphans_lost

    try:
        # The first run creates the SQLite database.
        call_command("migrate", interactive=False, verbosity=0)
        mark_orphans_lost()
    except DatabaseError as exc:
        print(f"mcp-inspector cannot start: {_storage_problem(exc, settings.DATA_DIR)}", file=sys.stderr)
        return 1

    from inspector.asgi import application
    from inspector.auth import login_token

    if settings.INSPECTOR_EMBEDDED_RUNTIME:
        tune_for_sessions()

    shown_host = DEFAULT_HOST if opts.host in ("0.0.0.0", "::") else opts.host
    if ":" in shown_host and not shown_host.startswith("["):
        shown_host = f"[{shown_host}]"

    def announce() -> None:
        # The port the system chose for --port 0 is known once daphne listens.
        port = server.listening_addresses[0][1] if server.listening_addresses else opts.port
        url = f"http://{shown_host}:{port}/"
        if settings.INSPECTOR_HOSTED:
            # People log in with their accounts; the token login is off.
            login_url = f"{url}auth/login"
            how = "Log in with your account (the first admin: manage.py create_admin)"
        else:
            # The URL is the only place the token appears: the token page POSTs it and redirects away.
            login_url = f"{url}auth/token?{urlencode({'token': login_token.issue()})}"
            how = "Open this URL to log in (it works once)"
        print(f"MCP Inspector is running at {url}  (Ctrl-C to stop)", flush=True)
        print(f"{how}: {login_url}", flush=True)
        if not opts.no_browser:
            webbrowser.open(login_url)

    def start_runtime() -> None:
        # At once, not at the first request: taps hand their frames to it while no page is open.
        from sessions.runtime.host import ensure_embedded_runtime

        ensure_embedded_runtime()

    def ready() -> None:
        # daphne calls this once listening, which can be before the reactor runs and installs
        # its SIGINT/SIGTERM handlers; announce after that, so Ctrl-C from then on stops cleanly.
        reactor.callWhenRunning(announce)
        # On the reactor's event loop once it runs: the runtime needs a running loop.
        reactor.callWhenRunning(lambda: asyncio.get_event_loop().call_soon(start_runtime))

    server = Server(
        application=application,
        endpoints=build_endpoint_description_strings(host=opts.host, port=opts.port),
        ready_callable=ready,
        action_logger=access_log,
        verbosity=0,
    )
    server.run()
    # daphne reports a failed listen (port in use, say) by never starting; that is an error.
    return 1 if server.abort_start else 0


def tune_for_sessions() -> None:
    """Tune the garbage collector for a process whose event loop takes in sessions' frames.

    A flood of notifications makes objects by the million, and those waiting for the database live a
    while: at Python's thresholds the collector runs hundreds of times a flood, older generations
    included, walking what is alive each time; here it waits for many more new objects. The engine
    worker does the same (``manage.py run_engine_worker``); the figures are in docs/bench.md.
    """
    gc.set_threshold(*GC_THRESHOLDS)


def hide_environment() -> None:
    """Make this process non-dumpable: the servers it starts, and anything else of its user, can then
    no longer read its environment (the deployment's secrets) or memory through /proc, nor trace it.

    The hosted mode's entry points call it (``run_engine_worker`` too); a local user's own processes
    may read the inspector as they may read the user's files.
    """
    from sessions.engine import undumpable

    undumpable()


def access_log(protocol: str, action: str, details: dict[str, Any]) -> None:
    """Log daphne's requests at INFO, without query strings: they can carry the login token."""
    import logging

    from inspector.auth import strip_query_string

    if protocol == "http" and action == "complete":
        logging.getLogger("inspector.access").info(
            "%s %s %s [%s]",
            details["method"],
            strip_query_string(details["path"]),
            details["status"],
            details["client"],
        )
    elif protocol == "websocket" and action in ("connected", "rejected", "disconnected"):
        logging.getLogger("inspector.access").info(
            "WebSocket %s %s [%s]", action, strip_query_string(details["path"]), details["client"]
        )


if __name__ == "__main__":
    run()
