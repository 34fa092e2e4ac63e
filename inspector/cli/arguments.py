"""The CLI's command line: options, the target (a command, a URL, or a config file's server), the call."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sessions.servers import (
    DEFAULT_PROTOCOL_VERSION,
    HANDSHAKE_VERSIONS,
    LOG_LEVELS,
    STATELESS_VERSIONS,
    build_target,
    split_command,
)

if TYPE_CHECKING:
    from inspector.cli.answers import Policy
    from sessions.engine import Target

__all__ = ["CliError", "Invocation", "UsageError", "parse_args", "split_subcommand"]

TRANSPORTS = ("stdio", "sse", "http", "streamable-http")
DEFAULT_TIMEOUT = 60.0
# What a person asks a CLI for is printed whole, as the official CLI does: a 50 MB tool result too.
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024

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
    "tasks/list": (None, "tasks"),
    "tasks/get": ("task_id", None),
    "tasks/result": ("task_id", None),
    "tasks/cancel": ("task_id", None),
    # The skills extension (inspector/cli/skills.py); --skill NAME loads one, verified.
    "skills/list": (None, None),
    "skills/get": ("uri", None),
}
REQUIRED_OPTION = {
    "tool_name": "--tool-name",
    "uri": "--uri",
    "prompt_name": "--prompt-name",
    "log_level": "--log-level",
    "task_id": "--task-id",
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
    task_id: str | None = None
    task: dict[str, Any] | None = None
    """``--task``: run tools/call as a task (``{"ttl": ms}`` or ``{}``), wait for it, print its result."""
    protocol_version: str = DEFAULT_PROTOCOL_VERSION
    timeout: float = DEFAULT_TIMEOUT
    max_reconnects: int | None = None
    """``--max-reconnects``: resumptions of a dropped SSE reply stream (``None``: the engine default)."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """``--max-message-bytes``: a bigger message is kept as its head, flagged, and a reply's call fails."""
    record: str | None = None
    collection: list[Any] | None = None
    """Steps of ``--collection`` (inspector/cli/collection.py): run in one session instead of one method."""
    junit: str | None = None
    collection_name: str = "collection"
    elicitation: Policy | None = None
    """How to answer elicitation/create (``--elicitation``); ``None``: not declared, refused."""
    sampling: Policy | None = None
    """How to answer sampling/createMessage (``--sampling``); ``None``: not declared, refused."""
    tasks: bool = True
    """2025-11-25: with either policy, let the server make those requests tasks (``--no-tasks``: not)."""
    apps: bool = False
    """``--apps``: declare the MCP Apps extension (``io.modelcontextprotocol/ui``), off by default: a
    command line renders no view, and a server may offer other tools to a host that says it does."""
    skill: str | None = None
    """``--skill``: the skill to load and verify (its name or SKILL.md URI), instead of ``--method``."""
    skill_files: list[str] = field(default_factory=list)
    roots: list[dict[str, str]] = field(default_factory=list)
    """``--root``: what roots/list answers (the roots capability is declared, with or without any)."""


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
    parser.add_argument("--uri", help="resource URI (resources/read), or a skill's SKILL.md URI (skills/get)")
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
    parser.add_argument("--task-id", help="task id (tasks/get, tasks/result, tasks/cancel)")
    parser.add_argument(
        "--task",
        nargs="?",
        const="",
        metavar="TTL_MS",
        help="tools/call as a task (2025-11-25), optionally asking to keep it TTL_MS milliseconds: "
        "wait for it to end and print its result",
    )
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
        choices=(*HANDSHAKE_VERSIONS, *STATELESS_VERSIONS),
        default=DEFAULT_PROTOCOL_VERSION,
        help=f"protocol version to offer (default {DEFAULT_PROTOCOL_VERSION}); "
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
        "--max-reconnects",
        type=int,
        metavar="N",
        help="how many times in a row a dropped SSE reply stream is resumed, honouring the server's "
        "retry: and sending Last-Event-ID (default 3; 0: never)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        metavar="N",
        help="the largest message the server may send (default 256 MiB); "
        "a bigger one is kept as its first 4 KiB with a verdict, and a reply's call fails",
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
    parser.add_argument(
        "--elicitation",
        metavar="accept-defaults|decline|cancel|@FILE",
        help="declare elicitation and answer every elicitation/create: accept with the schema's defaults, "
        "decline, cancel, or reply with the JSON object in FILE",
    )
    parser.add_argument(
        "--sampling",
        metavar="reject|@FILE",
        help="declare sampling and answer every sampling/createMessage: reject it, "
        "or reply with the CreateMessageResult in FILE",
    )
    parser.add_argument(
        "--no-tasks",
        action="store_true",
        help="do not declare the tasks capability (2025-11-25), which otherwise goes with --elicitation "
        "and --sampling: the server cannot make those requests tasks",
    )
    parser.add_argument(
        "--apps",
        action="store_true",
        help="declare the MCP Apps extension (io.modelcontextprotocol/ui), as a host that renders views "
        "does: the server may then list the tools it keeps for such hosts (their views are resources/read)",
    )
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="URI|PATH",
        help="a root to offer the server in roots/list: a file:// URI or a folder's path (repeatable; "
        "none by default)",
    )
    _add_skill_options(parser)
    from inspector.cli.oauth import add_oauth_options

    add_oauth_options(parser)
    return parser


def _add_skill_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--skill",
        metavar="NAME|URI",
        help="load a skill (instead of --method): read its SKILL.md and verify its size, digest and "
        "frontmatter against the skills/list entry",
    )
    parser.add_argument(
        "--skill-file",
        action="append",
        default=[],
        metavar="PATH",
        help="with --skill: then read this file of the skill (relative to its root), verified (repeatable)",
    )


def _skill_method(opts: argparse.Namespace) -> None:
    """``--skill`` stands in for ``--method``."""
    if opts.skill:
        if opts.method or opts.collection:
            raise UsageError("--skill loads a skill by itself: leave out --method and --collection")
        opts.method = "--skill"
    elif opts.skill_file:
        raise UsageError("--skill-file goes with --skill")


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


def _task_option(value: str | None, method: str) -> dict[str, Any] | None:
    """``--task`` → the request's ``task`` field (``--task 60000``: ``{"ttl": 60000}``)."""
    if value is None:
        return None
    if method != "tools/call":
        raise UsageError("--task goes with --method tools/call")
    if not value:
        return {}
    if not value.isdigit():
        raise UsageError(f"invalid --task {value!r}: give the time to live in milliseconds, or nothing")
    return {"ttl": int(value)}


def split_subcommand(
    argv: Sequence[str],
    parser: argparse.ArgumentParser,
    *,
    first: str,
    usage: str,
    refused: Sequence[str],
    why: str,
    method: str,
) -> tuple[str, argparse.Namespace, list[str]]:
    """``FIRST [own options] [target options] [-- command]`` (replay, eval): the first word, the
    command's own options, and the rest as ``parse_args`` takes it, with ``method`` (the command sends
    its own). Options of ``refused`` are the command's to set (``why`` says so); ``-h`` prints the
    command's own help."""
    args = list(argv)
    if args[:1] in (["-h"], ["--help"]):
        parser.print_help()
        raise SystemExit(0)
    if not args or args[0].startswith("-"):
        raise UsageError(f"the {first} comes first: {usage}")
    word, args = args[0], args[1:]
    at = args.index("--") if "--" in args else len(args)
    opts, rest = parser.parse_known_args(args[:at])
    kept = [w for w in rest if w.split("=", 1)[0] in refused]
    if kept:
        raise UsageError(f"{kept[0].split('=', 1)[0]}: {why}")
    return word, opts, [*rest, "--method", method, *args[at:]]


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

    _skill_method(opts)
    steps = None
    if opts.collection:
        if opts.method:
            raise UsageError("--collection runs its own requests: leave out --method")
        from inspector.cli.collection import CollectionError, load

        try:
            steps = load(opts.collection)
        except CollectionError as exc:
            raise CliError(str(exc)) from None
        opts.method = "collection"
    elif opts.junit:
        raise UsageError("--junit goes with --collection")
    if not opts.method:
        raise UsageError("--method is required (one of: " + ", ".join(METHODS) + "), or --collection FILE")
    if opts.method not in METHODS and steps is None and not opts.skill:
        raise UsageError(f"unsupported method {opts.method!r}; choose one of: " + ", ".join(METHODS))
    needed = METHODS[opts.method][0] if steps is None and not opts.skill else None
    if needed is not None and not getattr(opts, needed):
        raise UsageError(f"{opts.method} needs {REQUIRED_OPTION[needed]}")
    task = _task_option(opts.task, opts.method)
    if opts.max_reconnects is not None and opts.max_reconnects < 0:
        raise UsageError("--max-reconnects must be 0 or more")
    if opts.max_message_bytes is not None and opts.max_message_bytes < 1024:
        raise UsageError("--max-message-bytes must be at least 1024")
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

    elicitation, sampling = _policies(opts)
    if (elicitation or sampling) and hasattr(target, "open_get_stream"):
        # A declared capability may be exercised by a request on the standalone GET stream too.
        target.open_get_stream = True  # type: ignore[union-attr]

    from inspector.cli.oauth import OAuthOptionError, oauth_config, wants_oauth

    if wants_oauth(opts):
        if not hasattr(target, "url"):
            raise UsageError("--oauth and its options apply to http(s) servers only")
        try:
            target.oauth = oauth_config(opts, target.url)  # type: ignore[union-attr]
        except OAuthOptionError as exc:
            raise CliError(str(exc)) from None

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
        task_id=opts.task_id,
        task=task,
        protocol_version=opts.protocol_version,
        timeout=opts.timeout,
        max_reconnects=opts.max_reconnects,
        max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES
        if opts.max_message_bytes is None
        else opts.max_message_bytes,
        record=opts.record,
        collection=steps,
        junit=opts.junit,
        collection_name=os.path.basename(opts.collection or "collection"),
        elicitation=elicitation,
        sampling=sampling,
        tasks=not opts.no_tasks,
        apps=opts.apps,
        skill=opts.skill,
        skill_files=opts.skill_file,
        roots=[_root(text) for text in opts.root],
    )


def _root(text: str) -> dict[str, str]:
    """A root of ``--root``: a file:// URI as given, or a folder's path as its file:// URI."""
    if text.startswith("file://"):
        return {"uri": text}
    if "://" in text or not text:
        raise UsageError(f"--root {text!r}: a root is a file:// URI or a folder's path")
    path = Path(text).expanduser().resolve()
    return {"uri": path.as_uri(), "name": path.name or str(path)}


def _policies(opts: argparse.Namespace) -> tuple[Policy | None, Policy | None]:
    from inspector.cli.answers import (
        ELICITATION_POLICIES,
        SAMPLING_POLICIES,
        PolicyError,
        ReplyFileError,
        read_policy,
    )

    try:
        elicitation = (
            read_policy(opts.elicitation, "--elicitation", ELICITATION_POLICIES) if opts.elicitation else None
        )
        sampling = read_policy(opts.sampling, "--sampling", SAMPLING_POLICIES) if opts.sampling else None
    except ReplyFileError as exc:
        raise CliError(str(exc)) from None
    except PolicyError as exc:
        raise UsageError(str(exc)) from None
    return elicitation, sampling


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
        # Plain http:// needs no certificates, and loading the CA bundle is not free.
        verify_tls=not url.startswith("http://"),
        # One call and out: no standalone GET stream for server-initiated messages.
        open_get_stream=False,
    )


def _target_from_words(
    words: list[str], env: dict[str, str], headers: dict[str, str], transport: str | None, timeout: float
) -> Target:
    from sessions.engine import StdioTarget

    if not words:
        raise UsageError("a target is required: a command to run, an http(s) URL, or --config FILE")
    command, *rest = words
    if not _is_url(command) and any(c.isspace() for c in command) and not os.path.exists(command):
        # One quoted word holding a whole command line ("python my_server.py"): split it as the
        # web form splits its command field. A path with spaces that exists is run as it is.
        try:
            split = split_command(command)
        except ValueError as exc:
            raise UsageError(f"TARGET {command!r}: {exc}") from None
        if split:
            command, rest = split[0], [*split[1:], *rest]
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
    from inspector.cli.files import read_json

    data = read_json(path, "config file", CliError)
    from sessions.config_files import ConfigError, is_server_json, parse_entry, parse_server_json

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
    return build_target({**config, "args": config["args"] + words, "env": config["env"] | env})
