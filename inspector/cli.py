"""``mcp-inspector --cli``: call one MCP method on a server and print the result as JSON.

A drop-in for the official inspector's CLI mode (npm ``@modelcontextprotocol/inspector --cli``)::

    mcp-inspector --cli node build/index.js --method tools/list
    mcp-inspector --cli https://example.com/mcp --method tools/call --tool-name echo --tool-arg message=hi
    mcp-inspector --cli --config mcp.json --server everything --method prompts/list

Exit codes: 0 success (a tool result with ``isError`` is still printed and exits 0, as the official CLI
does), 1 the call failed (JSON-RPC error, transport failure, timeout, bad config), 2 usage error,
130 interrupted. Every failure is one ``error: ...`` line on stderr.

Start-up cost matters here: this module imports only the standard library at load time; the engine
is imported when the call runs, httpx only for URL targets, and mcp-types only with ``--record``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from sessions.engine import ClientSession, Event, Frame, PendingRequest, Target

__all__ = ["main"]

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# The stateless revision: no handshake; the engine connects with server/discover (stateless mode).
STATELESS_VERSIONS = ("2026-07-28",)
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
TRANSPORTS = ("stdio", "sse", "http", "streamable-http")
DEFAULT_TIMEOUT = 60.0

# Method -> (the option it needs, or None; the list key for paginated methods, or None).
METHODS: dict[str, tuple[str | None, str | None]] = {
    "tools/list": (None, "tools"),
    "tools/call": ("tool_name", None),
    "resources/list": (None, "resources"),
    "resources/read": ("uri", None),
    "resources/templates/list": (None, "resourceTemplates"),
    "prompts/list": (None, "prompts"),
    "prompts/get": ("prompt_name", None),
    "logging/setLevel": ("log_level", None),
    "ping": (None, None),
}
REQUIRED_OPTION = {
    "tool_name": "--tool-name",
    "uri": "--uri",
    "prompt_name": "--prompt-name",
    "log_level": "--log-level",
}


class UsageError(Exception):
    """The command line is wrong: exit 2."""


class CliError(Exception):
    """Something the user can fix that is not a command-line mistake (config file, record file): exit 1."""


@dataclass
class Invocation:
    """Everything parsed from the command line, with the target resolved."""

    method: str
    target: Target
    tool_name: str | None = None
    tool_args: dict[str, Any] = field(default_factory=dict)
    uri: str | None = None
    prompt_name: str | None = None
    prompt_args: dict[str, str] = field(default_factory=dict)
    log_level: str | None = None
    protocol_version: str = PROTOCOL_VERSIONS[-1]
    timeout: float = DEFAULT_TIMEOUT
    record: str | None = None
    collection: list[Any] | None = None
    """Steps of ``--collection`` (inspector/collection.py): run in one session instead of one method."""
    junit: str | None = None
    collection_name: str = "collection"


# --- the command line -------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mcp-inspector --cli",
        usage="mcp-inspector --cli TARGET [ARGS...] --method METHOD [options]  (or: ... -- TARGET [ARGS...])",
        description=(
            "Call one MCP method and print its result as JSON. TARGET is a command to run over stdio "
            "or an http(s) URL; the target and its arguments may also follow `--`."
        ),
        allow_abbrev=False,
    )
    parser.add_argument("--cli", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--method", help="method to call: " + ", ".join(METHODS))
    parser.add_argument("--tool-name", help="tool name (tools/call)")
    parser.add_argument(
        "--tool-arg",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="tool argument; a value that parses as JSON is sent as JSON, else as a string (repeatable)",
    )
    parser.add_argument("--uri", help="resource URI (resources/read)")
    parser.add_argument("--prompt-name", help="prompt name (prompts/get)")
    parser.add_argument(
        "--prompt-args",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="prompt argument (repeatable)",
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS, help="level for logging/setLevel")
    parser.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="stdio, sse or http; by default commands use stdio and URLs ending in /sse use sse, "
        "those ending in /mcp use http, and any other URL tries http then falls back to sse",
    )
    parser.add_argument("--server-url", help="server URL (an alternative to a URL TARGET)")
    parser.add_argument(
        "--header",
        nargs="+",
        action="extend",
        default=[],
        metavar='"NAME: VALUE"',
        help="HTTP header for URL targets (repeatable)",
    )
    parser.add_argument(
        "-e",
        dest="env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable for a stdio server (repeatable)",
    )
    parser.add_argument("--config", metavar="FILE", help='JSON file with "mcpServers" (or "servers")')
    parser.add_argument("--server", metavar="NAME", help="server name in --config")
    parser.add_argument(
        "--protocol-version",
        choices=(*PROTOCOL_VERSIONS, *STATELESS_VERSIONS),
        default=PROTOCOL_VERSIONS[-1],
        help=f"protocol version to offer (default {PROTOCOL_VERSIONS[-1]}); "
        f"{', '.join(STATELESS_VERSIONS)} connects statelessly (server/discover, no initialize)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"request timeout, which also bounds connecting (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--insecure",
        action="store_true",
        help="do not verify the server's TLS certificate (a self-signed one, say)",
    )
    parser.add_argument(
        "--ca-file",
        metavar="FILE",
        help="PEM file of CA certificates to trust instead of the public ones (a local CA, mkcert)",
    )
    parser.add_argument(
        "--record",
        metavar="FILE",
        help="write every frame as JSON Lines to FILE (turns on schema validation)",
    )
    parser.add_argument(
        "--collection",
        metavar="FILE",
        help="run the saved requests of a collection file, checking their expectations (instead of --method)",
    )
    parser.add_argument("--junit", metavar="FILE", help="with --collection: also write a JUnit XML report")
    return parser


def _split_pair(text: str, what: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"invalid {what} {text!r}: use KEY=VALUE")
    return key, value


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def _parse_header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or not value:
        raise UsageError(f'invalid --header {text!r}: use "Name: value"')
    return name, value


def parse_args(argv: Sequence[str]) -> Invocation:
    """Turn the command line into an Invocation; raise UsageError (or CliError for config files)."""
    args = list(argv)
    if "--" in args:
        at = args.index("--")
        before, after = args[:at], args[at + 1 :]
    else:
        before, after = args, []
    # Unknown options and bare words before `--` belong to the target, in order (like the official CLI).
    opts, extra = _build_parser().parse_known_args(before)
    words = [*extra, *after]

    steps = None
    if opts.collection:
        if opts.method:
            raise UsageError("--collection runs its own requests: leave out --method")
        from inspector.collection import CollectionError, load

        try:
            steps = load(opts.collection)
        except CollectionError as exc:
            raise CliError(str(exc)) from None
        opts.method = "collection"
    elif opts.junit:
        raise UsageError("--junit goes with --collection")
    if not opts.method:
        raise UsageError("--method is required (one of: " + ", ".join(METHODS) + "), or --collection FILE")
    if opts.method not in METHODS and steps is None:
        raise UsageError(f"unsupported method {opts.method!r}; choose one of: " + ", ".join(METHODS))
    needed = METHODS[opts.method][0] if steps is None else None
    if needed is not None and not getattr(opts, needed):
        raise UsageError(f"{opts.method} needs {REQUIRED_OPTION[needed]}")
    if not opts.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if opts.server and not opts.config:
        raise UsageError("--server requires --config")

    tool_args = {}
    for pair in opts.tool_arg:
        key, value = _split_pair(pair, "--tool-arg")
        tool_args[key] = _json_or_text(value)
    prompt_args = {}
    for pair in opts.prompt_args:
        key, value = _split_pair(pair, "--prompt-args")
        parsed = _json_or_text(value)
        # Prompt arguments are strings on the wire; JSON only unquotes a quoted string.
        prompt_args[key] = parsed if isinstance(parsed, str) else value
    env = dict(_split_pair(pair, "-e") for pair in opts.env)
    headers = dict(_parse_header(h) for h in opts.header)

    transport = "http" if opts.transport == "streamable-http" else opts.transport
    if opts.config:
        target = _target_from_config(opts.config, opts.server, words, env, headers, transport, opts.timeout)
    else:
        if opts.server_url and not words:
            words = [opts.server_url]
        target = _target_from_words(words, env, headers, transport, opts.timeout)

    if opts.insecure or opts.ca_file:
        if not hasattr(target, "verify_tls"):
            raise UsageError("--insecure and --ca-file apply to http(s) servers only")
        if opts.ca_file and not os.path.isfile(opts.ca_file):
            raise UsageError(f"--ca-file: no such file {opts.ca_file!r}")
        target.verify_tls = not opts.insecure  # type: ignore[union-attr]
        target.ca_file = opts.ca_file  # type: ignore[union-attr]

    return Invocation(
        method=opts.method,
        target=target,
        tool_name=opts.tool_name,
        tool_args=tool_args,
        uri=opts.uri,
        prompt_name=opts.prompt_name,
        prompt_args=prompt_args,
        log_level=opts.log_level,
        protocol_version=opts.protocol_version,
        timeout=opts.timeout,
        record=opts.record,
        collection=steps,
        junit=opts.junit,
        collection_name=os.path.basename(opts.collection or "collection"),
    )


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def _http_target(url: str, headers: dict[str, str], transport: str | None, timeout: float) -> Target:
    from sessions.engine import HttpTarget

    if transport == "stdio":
        raise UsageError("the stdio transport cannot be used with a URL")
    if transport is None:
        path = url.split("?", 1)[0].split("#", 1)[0].rstrip("/")
        transport = "http" if path.endswith("/mcp") else "sse" if path.endswith("/sse") else "auto"
    return HttpTarget(
        url,
        transport=transport,  # type: ignore[arg-type]
        headers=headers,
        connect_timeout=timeout,
        # Plain http:// needs no certificates; loading the CA bundle costs ~20 ms per call.
        verify_tls=not url.startswith("http://"),
        # One call and out: no standalone GET stream for server-initiated messages.
        open_get_stream=False,
        max_reconnects=0,
    )


def _target_from_words(
    words: list[str], env: dict[str, str], headers: dict[str, str], transport: str | None, timeout: float
) -> Target:
    from sessions.engine import StdioTarget

    if not words:
        raise UsageError("a target is required: a command to run, an http(s) URL, or --config FILE")
    command, *rest = words
    if _is_url(command):
        if rest:
            raise UsageError(f"arguments cannot be passed to a URL target: {' '.join(rest)}")
        return _http_target(command, headers, transport, timeout)
    if transport not in (None, "stdio"):
        raise UsageError(f"only the stdio transport can be used with a command (got --transport {transport})")
    return StdioTarget(command, rest, env)


def _target_from_config(
    path: str,
    name: str | None,
    words: list[str],
    env: dict[str, str],
    headers: dict[str, str],
    transport: str | None,
    timeout: float,
) -> Target:
    from sessions.engine import StdioTarget

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise CliError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"invalid JSON in config file {path}: {exc}") from None
    from sessions.mcpservers import ConfigError, is_server_json, parse_entry, parse_server_json

    servers = None
    parsed = is_server_json(data)
    if parsed:
        try:  # a registry server.json: one entry per package and remote, already in our shape
            servers = parse_server_json(data)
        except ConfigError as exc:
            raise CliError(f"config file {path}: {exc}") from None
    elif isinstance(data, dict):
        servers = data.get("mcpServers", data.get("servers"))
    if not isinstance(servers, dict):
        raise CliError(f'config file {path} has no "mcpServers" (or "servers") object')
    if name is None:
        if len(servers) != 1:
            listed = ", ".join(servers) or "none"
            raise CliError(
                f"config file {path} has {len(servers)} servers; pick one with --server ({listed})"
            )
        name = next(iter(servers))
    entry = servers.get(name)
    if not isinstance(entry, dict):
        raise CliError(f"server {name!r} not found in {path}; available: {', '.join(servers) or 'none'}")

    try:
        config = entry if parsed else parse_entry(name, entry)
    except ConfigError as exc:
        raise CliError(f"config file {path}: {exc}") from None
    if config["transport"] != "stdio":
        if words:
            raise UsageError(f"arguments cannot be passed to a URL server: {' '.join(words)}")
        chosen = None if config["transport"] == "auto" else config["transport"]
        return _http_target(config["url"], config["headers"] | headers, chosen or transport, timeout)
    return StdioTarget(
        config["command"], config["args"] + words, config["env"] | env, cwd=config["cwd"] or None
    )


# --- the call ---------------------------------------------------------------------------------------------


async def _call(session: ClientSession, inv: Invocation) -> dict[str, Any]:
    method = inv.method
    list_key = METHODS[method][1]
    if list_key is not None:
        return await _list_all(session, method, list_key)
    if method == "tools/call":
        assert inv.tool_name is not None
        return await session.call_tool(inv.tool_name, inv.tool_args)
    if method == "resources/read":
        assert inv.uri is not None
        return await session.read_resource(inv.uri)
    if method == "prompts/get":
        assert inv.prompt_name is not None
        return await session.get_prompt(inv.prompt_name, inv.prompt_args)
    if method == "logging/setLevel":
        assert inv.log_level is not None
        return await session.set_logging_level(inv.log_level)
    return await session.request("ping", progress=False)


async def _list_all(session: ClientSession, method: str, key: str) -> dict[str, Any]:
    """Fetch every page; return the first page's result with all items and no nextCursor."""
    from sessions.engine import EngineError

    result: dict[str, Any] | None = None
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = await session.list_page(method, cursor)
        if result is None:
            result = dict(page)
        found = page.get(key)
        if isinstance(found, list):
            items.extend(found)
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
        if cursor in seen:
            raise EngineError(f"{method} returned cursor {cursor!r} twice")
        seen.add(cursor)
    result.pop("nextCursor", None)
    result[key] = items
    return result


async def _refuse(request: PendingRequest) -> dict[str, Any]:
    from sessions.engine import McpError

    raise McpError(-32601, f"the inspector CLI cannot answer {request.method}")


def _one_line(text: str, limit: int = 500) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Failure(Exception):
    """The call failed; the message is ready to print.

    ``transport`` marks failures of the connection itself, where the server's last stderr line
    (a stack trace's last line, "address in use", ...) usually says why.
    """

    def __init__(self, message: str, *, transport: bool = False) -> None:
        super().__init__(message)
        self.transport = transport


async def _run(inv: Invocation, frames: list[Frame], stderr_tail: list[str]) -> dict[str, Any]:
    from sessions.engine import (
        ClientCapabilities,
        ClientOptions,
        EngineError,
        Frame,
        McpError,
        RequestTimeout,
        connect,
    )

    options = ClientOptions(
        protocol_version=inv.protocol_version,
        mode="stateless" if inv.protocol_version in STATELESS_VERSIONS else "handshake",
        # Like the official CLI: a client that declares no capabilities.
        capabilities=ClientCapabilities(
            roots=False, sampling=False, elicitation_form=False, elicitation_url=False
        ),
        client_info={"name": "mcp-inspector-cli", "version": "0.1.0"},
        timeout=inv.timeout,
        max_total_timeout=max(600.0, inv.timeout),
        validate=inv.record is not None or inv.collection is not None,
    )
    session = connect(inv.target, options)
    for method in ("sampling/createMessage", "elicitation/create"):
        session.handlers[method] = _refuse

    def watch(event: Event) -> None:
        if isinstance(event, Frame):
            frames.append(event)
            if event.kind == "stderr":
                line = event.text.strip()
                if line:
                    stderr_tail[:] = [line]

    session.subscribe(watch)
    try:
        await session.__aenter__()
    except RequestTimeout:
        raise _Failure(
            f"cannot connect: no answer to initialize within {inv.timeout:g} s", transport=True
        ) from None
    except McpError as exc:
        raise _Failure(f"cannot connect: initialize failed: {exc}") from None
    except EngineError as exc:
        raise _Failure(f"cannot connect: {exc}", transport=True) from None
    try:
        if inv.collection is not None:
            from inspector.collection import run

            return await run(session, inv.collection, frames)
        try:
            return await _call(session, inv)
        except McpError as exc:
            detail = f"{inv.method} failed: {exc}"
            if exc.data is not None:
                detail += f"; data: {json.dumps(exc.data, ensure_ascii=False)}"
            raise _Failure(detail) from None
        except RequestTimeout as exc:
            raise _Failure(f"no response to {inv.method}: {exc}", transport=True) from None
        except EngineError as exc:
            raise _Failure(f"{inv.method} failed: {exc}", transport=True) from None
    finally:
        await session.aclose()


def _write_record(path: str, frames: list[Frame]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for frame in frames:
            fh.write(json.dumps(frame.to_dict(), ensure_ascii=False) + "\n")


def _print_result(result: dict[str, Any]) -> None:
    text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.flush()


def _fail(message: str, code: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        print(f"error: {_one_line(message)}", file=sys.stderr, flush=True)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code. Never raises, never prints a traceback."""
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        try:
            inv = parse_args(args)
        except UsageError as exc:
            return _fail(f"{exc} (see mcp-inspector --cli --help)", 2)
        except CliError as exc:
            return _fail(str(exc), 1)
        except SystemExit as exc:  # --help
            return exc.code if isinstance(exc.code, int) else 0

        if inv.record is not None:
            try:
                open(inv.record, "w", encoding="utf-8").close()
            except OSError as exc:
                return _fail(f"cannot write --record file {inv.record}: {exc.strerror or exc}", 1)

        import asyncio

        frames: list[Frame] = []
        stderr_tail: list[str] = []
        try:
            result = asyncio.run(_run(inv, frames, stderr_tail))
        except _Failure as exc:
            message = str(exc)
            if exc.transport and stderr_tail:
                message += f" (server stderr: {_one_line(stderr_tail[0], 200)})"
            return _fail(message, 1)
        finally:
            if inv.record is not None:
                try:
                    _write_record(inv.record, frames)
                except OSError as exc:
                    _fail(f"cannot write --record file {inv.record}: {exc.strerror or exc}", 1)
        if inv.junit is not None:
            from inspector.collection import junit

            try:
                with open(inv.junit, "w", encoding="utf-8") as fh:
                    fh.write(junit(result, inv.collection_name))
            except OSError as exc:
                return _fail(f"cannot write --junit file {inv.junit}: {exc.strerror or exc}", 1)
        try:
            _print_result(result)
        except BrokenPipeError:
            # The reader went away (| head): not our failure; keep Python quiet at exit.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if inv.collection is not None and result["failed"]:
            return _fail(f"{result['failed']} of {len(result['steps'])} collection steps failed", 1)
        return 0
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # a bug, or something nobody foresaw: still one line
        return _fail(f"unexpected {type(exc).__name__}: {exc}", 1)
