"""The official MCP conformance suite's client scenarios, played by the real CLI.

``@modelcontextprotocol/conformance`` (npm, installed in tests/servers/node_modules as
``conformance-0.1`` and ``conformance-0.2``) starts a scenario's server and runs
``--command ... URL`` with the scenario's name in ``MCP_CONFORMANCE_SCENARIO``, the revision in
``MCP_CONFORMANCE_PROTOCOL_VERSION`` (0.2 only) and any data the scenario hands the client in
``MCP_CONFORMANCE_CONTEXT`` (JSON). ``tests/conformance_client.py`` is that command: it looks the
scenario up in ``PLAYS`` below, which says only which CLI options to run it with, and runs
``python -m inspector --cli URL ...`` once per step. Nothing in the product knows the suite.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["ALLOWS_CLIENT_ERROR", "EXITED", "PLAYS", "SCENARIOS", "SLOTS", "SUITES", "Cli", "play"]

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
MODULES = TESTS / "servers" / "node_modules"
SUITES = {version: MODULES / f"conformance-{version}" / "dist" / "index.js" for version in ("0.1", "0.2")}

AUTH_01 = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
]
AUTH_02 = [
    *AUTH_01,
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
]
EXTENSIONS_01 = ["auth/client-credentials-jwt", "auth/client-credentials-basic"]
EXTENSIONS_02 = [
    *EXTENSIONS_01,
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
]

# Every client scenario of each version, in the order `conformance client list` prints them;
# test_conformance.py checks the lists against it.
SCENARIOS = {
    "0.1": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        *AUTH_01,
        "auth/client-credentials-jwt",
        "auth/client-credentials-basic",
        "auth/cross-app-access-complete-flow",
    ],
    "0.2": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
        *AUTH_02,
        *EXTENSIONS_02,
    ],
}


class CliFailed(Exception):
    """A CLI step exited non-zero when it was expected to succeed."""


class Cli:
    """Runs ``python -m inspector --cli URL [--protocol-version V] ARGS`` and returns the printed JSON."""

    def __init__(self, url: str, version: str | None) -> None:
        self.url = url
        self.version = version

    def __call__(self, *args: str, ok: bool = True) -> Any:
        argv = [sys.executable, "-m", "inspector", "--cli", self.url, "--timeout", "20"]
        if self.version:
            argv += ["--protocol-version", self.version]
        proc = subprocess.run([*argv, *args], cwd=REPO, capture_output=True, text=True, timeout=25)
        sys.stderr.write(f"$ mcp-inspector --cli {self.url} {' '.join(args)}\n-> exit {proc.returncode}\n")
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            if ok:
                raise CliFailed(f"{' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()}")
            return proc
        return json.loads(proc.stdout)


def _args(arguments: dict[str, Any]) -> list[str]:
    """``--tool-arg`` pairs, each value written as JSON so that its type survives."""
    return [f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items()]


def call(tool: str, *options: str, **arguments: Any) -> Callable[[Cli, dict[str, Any]], None]:
    """A play of one tools/call."""

    def run(cli: Cli, context: dict[str, Any]) -> None:
        pairs = ["--tool-arg", *_args(arguments)] if arguments else []
        cli("--method", "tools/call", "--tool-name", tool, *pairs, *options)

    return run


def list_tools(cli: Cli, context: dict[str, Any]) -> None:
    cli("--method", "tools/list")


def request_metadata(cli: Cli, context: dict[str, Any]) -> None:
    # Declaring sampling and elicitation lets the scenario check their shape in _meta.
    cli("--method", "tools/list", "--elicitation", "decline", "--sampling", "reject")


def request_state(cli: Cli, context: dict[str, Any]) -> None:
    for tool in (
        "test_mrtr_echo_state",
        "test_mrtr_no_state",
        "test_mrtr_unrelated",
        "test_mrtr_no_result_type",
    ):
        cli("--method", "tools/call", "--tool-name", tool, "--elicitation", "accept-defaults")


def standard_headers(cli: Cli, context: dict[str, Any]) -> None:
    cli("--method", "tools/list")
    cli("--method", "tools/call", "--tool-name", "my-hyphenated-tool")
    cli("--method", "resources/list")
    cli("--method", "resources/read", "--uri", "file:///path/to/file%20name.txt")
    cli("--method", "prompts/list")
    cli("--method", "prompts/get", "--prompt-name", "test_prompt")


def custom_headers(cli: Cli, context: dict[str, Any]) -> None:
    for tool_call in context["toolCalls"]:
        call(tool_call["name"], **tool_call["arguments"])(cli, context)


def invalid_tool_headers(cli: Cli, context: dict[str, Any]) -> None:
    # Try every listed tool: the CLI must call the valid one and refuse those with a bad x-mcp-header.
    for tool in cli("--method", "tools/list")["tools"]:
        schema = tool.get("inputSchema") or {}
        arguments = dict.fromkeys(schema.get("required", []), "x")
        cli("--method", "tools/call", "--tool-name", tool["name"], "--tool-arg", *_args(arguments), ok=False)


def schema_preservation(cli: Cli, context: dict[str, Any]) -> None:
    tools = {tool["name"]: tool for tool in cli("--method", "tools/list")["tools"]}
    schema = tools["json_schema_2020_12_tool"]["inputSchema"]
    call("json_schema_echo", schema=schema)(cli, context)


def list_skills(cli: Cli, context: dict[str, Any]) -> None:
    cli("--method", "skills/list")


def use_skills(cli: Cli, context: dict[str, Any]) -> None:
    # As a host would: load each listed skill and every file it lists. A skill that fails its
    # verification must stop the CLI before the rest is read (exit 1 is allowed there).
    for entry in cli("--method", "skills/list")["skills"]:
        prefix = entry["uri"].removesuffix("SKILL.md")
        files = [
            r["uri"].removeprefix(prefix) for r in entry.get("resources", []) if r["uri"] != entry["uri"]
        ]
        cli("--skill", entry["uri"], *[a for path in files for a in ("--skill-file", path)], ok=False)


def oauth(
    *options: str,
    config: Callable[[dict[str, Any]], dict[str, str]] | None = None,
    ok: bool = True,
    again: bool = False,
) -> Callable[[Cli, dict[str, Any]], None]:
    """A play of one tools/call to a protected server, authorizing without a person
    (``--oauth-headless``); ``config`` maps the scenario's context to an ``--oauth-config`` file;
    ``again`` calls a second time in a new process, with the tokens kept (``--oauth-cache``)."""

    def run(cli: Cli, context: dict[str, Any]) -> None:
        os.environ["INSPECTOR_DATA_DIR"] = tempfile.mkdtemp(prefix="conformance-oauth-")
        extra = ["--oauth", "--oauth-headless", "--oauth-cache", *options]
        if config is not None:
            path = Path(os.environ["INSPECTOR_DATA_DIR"]) / "oauth-config.json"
            path.write_text(json.dumps(config(context)))
            extra += ["--oauth-config", str(path)]
        for _ in range(2 if again else 1):
            cli("--method", "tools/call", "--tool-name", "test-tool", *extra, ok=ok)

    return run


def _keys(*names: str, **renamed: str) -> Callable[[dict[str, Any]], dict[str, str]]:
    """The context's values under these names (and ``ours=theirs`` renamed) as an --oauth-config."""
    return lambda context: {
        **{name: context[name] for name in names},
        **{ours: context[theirs] for ours, theirs in renamed.items()},
    }


AUTH_PLAYS: dict[str, Callable[[Cli, dict[str, Any]], None]] = {
    **{name: oauth() for name in AUTH_02},
    "auth/basic-cimd": oauth("--client-metadata-url", "https://conformance-test.local/client-metadata.json"),
    "auth/pre-registration": oauth(config=_keys("client_id", "client_secret")),
    "auth/authorization-server-migration": oauth(again=True),
    **{
        name: oauth(ok=False)
        for name in (
            "auth/scope-retry-limit",
            "auth/resource-mismatch",
            "auth/iss-supported-missing",
            "auth/iss-wrong-issuer",
            "auth/iss-unexpected",
            "auth/iss-normalized",
            "auth/metadata-issuer-mismatch",
        )
    },
    "auth/client-credentials-jwt": oauth(
        "--oauth-grant",
        "client_credentials",
        config=_keys("client_id", "private_key_pem", "signing_algorithm"),
    ),
    "auth/client-credentials-basic": oauth(
        "--oauth-grant", "client_credentials", config=_keys("client_id", "client_secret")
    ),
    **{
        # SEP-990, called cross-app access in 0.1.
        name: oauth(
            "--oauth-grant",
            "token_exchange",
            config=_keys("client_id", "client_secret", "idp_client_id", "idp_id_token", "idp_token_endpoint"),
        )
        for name in ("auth/enterprise-managed-authorization", "auth/cross-app-access-complete-flow")
    },
    "auth/dpop": oauth(),
    "auth/dpop-nonce": oauth(),
    "auth/wif-jwt-bearer": oauth(
        "--oauth-grant", "jwt_bearer", config=_keys("client_id", assertion="valid_jwt")
    ),
}

PLAYS: dict[str, Callable[[Cli, dict[str, Any]], None]] = {
    "initialize": list_tools,
    "tools_call": call("add_numbers", a=5, b=3),
    "elicitation-sep1034-client-defaults": call(
        "test_client_elicitation_defaults", "--elicitation", "accept-defaults"
    ),
    "sse-retry": call("test_reconnection"),
    "request-metadata": request_metadata,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "json-schema-ref-no-deref": list_tools,
    "json-schema-2020-12-preservation": schema_preservation,
    "sep-2640-client-no-prefetch": list_skills,
    "sep-2640-client-verify-digest": use_skills,
    "sep-2640-client-verify-size": use_skills,
    "sep-2640-client-verify-frontmatter": use_skills,
    **AUTH_PLAYS,
}


# The scenarios in which the client is meant to refuse, so may exit with an error (the suite's
# allowClientError): a run of the whole suite at once does not judge exit codes itself.
ALLOWS_CLIENT_ERROR = {
    "auth/iss-normalized",
    "auth/iss-supported-missing",
    "auth/iss-unexpected",
    "auth/iss-wrong-issuer",
    "auth/metadata-issuer-mismatch",
    "auth/resource-mismatch",
    "auth/scope-retry-limit",
    "http-invalid-tool-headers",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-frontmatter",
    "sep-2640-client-verify-size",
}
EXITED = "conformance play exited with "


SLOTS = "CONFORMANCE_SLOTS"  # a folder: when set, at most SLOTS_AT_ONCE plays run at once
SLOTS_AT_ONCE = 3


def play(argv: list[str]) -> int:
    """The ``--command`` entry point: play the scenario named in the environment against ``argv[-1]``;
    its last line on stderr says how it exits."""
    with _slot():
        code = _play(argv)
    sys.stderr.write(f"{EXITED}{code}\n")
    return code


@contextlib.contextmanager
def _slot() -> Iterator[None]:
    """A turn among the plays of a whole suite run at once, whose scenarios all start together: the
    suite's servers wait, idle, while the plays take turns on the cores."""
    folder = os.environ.get(SLOTS)
    if not folder:
        yield
        return
    files = [open(Path(folder, f"slot-{n}"), "a") for n in range(SLOTS_AT_ONCE)]  # noqa: SIM115
    try:
        for file in files:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            yield
            return
        # Every slot taken: wait for one (the lock is released when its holder exits, whatever happens).
        fcntl.flock(files[os.getpid() % SLOTS_AT_ONCE], fcntl.LOCK_EX)
        yield
    finally:
        for file in files:
            file.close()


def _play(argv: list[str]) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario not in PLAYS:
        sys.stderr.write(f"no play for scenario {scenario!r}\n")
        return 2
    try:
        PLAYS[scenario](Cli(argv[-1], os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION")), context)
    except CliFailed as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0
