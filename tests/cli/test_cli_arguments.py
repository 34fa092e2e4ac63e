"""The one-shot CLI in process, for what needs no server: its arguments and their usage errors, the
collection and reply files, the answers of accept-defaults. Read back as a process's exit code and
output (test_cli.py runs the CLI as a process against real servers)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_one_error_line, run_cli_in_process
from support.paths import SERVERS

from inspector import cli
from inspector.cli import answers
from sessions.engine import HttpTarget, StdioTarget

CliHere = Callable[..., subprocess.CompletedProcess[str]]
SDK = [sys.executable, str(SERVERS / "sdk_server.py"), "stdio"]


@pytest.fixture
def cli_here(capsys: pytest.CaptureFixture[str]) -> CliHere:
    """``cli_here(*ARGS)``: ``mcp-inspector --cli ARGS`` run in this process."""
    return lambda *args: run_cli_in_process(capsys, *args)


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _collection(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    path = tmp_path / "checks.json"
    path.write_text(json.dumps({"steps": steps}))
    return str(path)


def test_config_naming_an_unknown_server_lists_the_available_ones(tmp_path: Path, cli_here: CliHere) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}))
    line = assert_one_error_line(cli_here("--config", str(path), "--server", "c", "--method", "ping"), 1)
    assert "'c' not found" in line and "a, b" in line


def test_unreachable_url_fails_with_one_line(cli_here: CliHere) -> None:
    proc = cli_here(f"http://127.0.0.1:{unused_port()}/mcp", "--method", "tools/list", "--timeout", "5")
    assert "cannot connect" in assert_one_error_line(proc, 1)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["node", "server.js"], "--method is required"),
        (["node", "server.js", "--method", "tools/call"], "needs --tool-name"),
        (["node", "server.js", "--method", "resources/read"], "needs --uri"),
        (
            ["node", "server.js", "--method", "tools/call", "--tool-name", "t", "--tool-arg", "novalue"],
            "KEY=VALUE",
        ),
        (["node", "server.js", "--method", "nope/nope"], "unsupported method"),
        (["--method", "ping"], "a target is required"),
        (["http://127.0.0.1:1/mcp", "--transport", "stdio", "--method", "ping"], "stdio transport"),
        (["node", "--transport", "sse", "--method", "ping"], "only the stdio transport"),
        (["http://x/mcp", "--header", "no-colon", "--method", "ping"], "--header"),
        (["node", "--method", "ping", "--timeout", "0"], "--timeout"),
        (["node", "--method", "ping", "--protocol-version", "1999-01-01"], "--protocol-version"),
        (["node", "--method", "ping", "--root", "https://example.com/"], "a root is a file:// URI"),
    ],
)
def test_usage_errors_exit_two_with_one_line(args: list[str], expected: str, cli_here: CliHere) -> None:
    assert expected in assert_one_error_line(cli_here(*args), 2)


def test_roots_are_none_by_default_and_each_root_is_a_file_uri_given_or_made_of_a_path(
    tmp_path: Path,
) -> None:
    assert cli.parse_args(["node", "--method", "ping"]).roots == []
    inv = cli.parse_args(["node", "--method", "ping", "--root", "file:///srv/a", "--root", str(tmp_path)])
    assert inv.roots == [{"uri": "file:///srv/a"}, {"uri": tmp_path.as_uri(), "name": tmp_path.name}]


def test_tool_arg_values_are_json_when_they_parse_and_strings_otherwise() -> None:
    inv = cli.parse_args(
        ["--cli", "srv", "--method", "tools/call", "--tool-name", "t",
         "--tool-arg", "n=3", "flag=true", "obj={\"a\": [1]}", "text=hello world", "eq=a=b", "empty="]
    )  # fmt: skip
    assert inv.tool_args == {
        "n": 3,
        "flag": True,
        "obj": {"a": [1]},
        "text": "hello world",
        "eq": "a=b",
        "empty": "",
    }


def test_the_largest_message_defaults_to_what_a_person_asks_a_cli_for_and_the_option_sets_it() -> None:
    assert cli.parse_args(["npx", "pkg", "--method", "ping"]).max_message_bytes == 256 * 1024 * 1024
    assert (
        cli.parse_args(["npx", "pkg", "--method", "ping", "--max-message-bytes", "4096"]).max_message_bytes
        == 4096
    )


def test_prompt_args_stay_strings() -> None:
    inv = cli.parse_args(
        ["srv", "--method", "prompts/get", "--prompt-name", "p", "--prompt-args", "n=3", 'q="x"']
    )
    assert inv.prompt_args == {"n": "3", "q": "x"}


def test_unknown_options_before_the_double_dash_belong_to_the_target() -> None:
    inv = cli.parse_args(["npx", "-y", "pkg", "--port=1", "--method", "ping", "-e", "A=1", "--", "--flag"])
    assert isinstance(inv.target, StdioTarget)
    assert (inv.target.command, list(inv.target.args), dict(inv.target.env)) == (
        "npx", ["-y", "pkg", "--port=1", "--flag"], {"A": "1"},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("url", "flag", "kind"),
    [
        ("http://h/mcp", None, "http"),
        ("http://h/sse", None, "sse"),
        ("https://h/api", None, "auto"),
        ("https://h/api", "sse", "sse"),
        ("https://h/sse", "http", "http"),
        ("https://h/x", "streamable-http", "http"),
    ],
)
def test_url_targets_pick_the_transport_from_the_flag_or_the_path(
    url: str, flag: str | None, kind: str
) -> None:
    inv = cli.parse_args([url, "--method", "ping", *(["--transport", flag] if flag else [])])
    assert isinstance(inv.target, HttpTarget)
    assert inv.target.transport == kind


def test_headers_and_config_headers_merge_with_the_flag_winning(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "s": {
                        "type": "sse",
                        "url": "http://h/events",
                        "headers": {"X-A": "config", "X-B": "config"},
                    }
                }
            }
        )
    )
    inv = cli.parse_args(
        ["--config", str(path), "--method", "ping", "--header", "X-B: flag", "Authorization: Bearer t"]
    )
    assert isinstance(inv.target, HttpTarget)
    assert inv.target.transport == "sse"
    assert inv.target.headers == {"X-A": "config", "X-B": "flag", "Authorization": "Bearer t"}


class _PagedSession:
    def __init__(self, pages: dict[str | None, dict[str, Any]]) -> None:
        self.pages = pages
        self.cursors: list[str | None] = []

    async def list_page(self, method: str, cursor: str | None = None) -> dict[str, Any]:
        self.cursors.append(cursor)
        return self.pages[cursor]


async def test_list_methods_fetch_every_page() -> None:
    session = _PagedSession(
        {
            None: {"tools": [{"name": "a"}], "nextCursor": "p2"},
            "p2": {"tools": [{"name": "b"}], "nextCursor": "p3"},
            "p3": {"tools": [{"name": "c"}]},
        }
    )
    result = await cli._list_all(session, "tools/list", "tools")  # type: ignore[arg-type]
    assert result == {"tools": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    assert session.cursors == [None, "p2", "p3"]


def test_a_bad_collection_file_is_one_clear_error(tmp_path: Path, cli_here: CliHere) -> None:
    line = assert_one_error_line(cli_here(*SDK, "--collection", _collection(tmp_path, [{"params": {}}])), 1)
    assert "step 1: needs a method" in line
    bad = [{"method": "ping", "expect": {"eventually": True}}]
    line = assert_one_error_line(cli_here(*SDK, "--collection", _collection(tmp_path, bad)), 1)
    assert "unknown expectation eventually" in line
    path = _collection(tmp_path, [{"method": "ping"}])
    line = assert_one_error_line(cli_here(*SDK, "--collection", path, "--method", "ping"), 2)
    assert "leave out --method" in line
    line = assert_one_error_line(cli_here(*SDK, "--method", "ping", "--junit", "x.xml"), 2)
    assert "--junit goes with --collection" in line


def test_a_quoted_command_line_keeps_its_quotes_and_the_words_after_it() -> None:
    inv = cli.parse_args(["node 'my server.js' --port 3", "--verbose", "--method", "ping"])
    assert isinstance(inv.target, StdioTarget)
    assert (inv.target.command, list(inv.target.args)) == (
        "node",
        ["my server.js", "--port", "3", "--verbose"],
    )


def test_an_existing_path_with_spaces_is_run_as_it_is(tmp_path: Path) -> None:
    program = tmp_path / "my server"
    program.write_text("#!/bin/sh\n")
    inv = cli.parse_args([str(program), "--method", "ping"])
    assert isinstance(inv.target, StdioTarget)
    assert (inv.target.command, list(inv.target.args)) == (str(program), [])


def test_a_command_line_with_an_unclosed_quote_is_a_usage_error(cli_here: CliHere) -> None:
    assert "cannot split the command" in assert_one_error_line(
        cli_here("node 'server.js", "--method", "ping"), 2
    )


@pytest.mark.parametrize(
    ("option", "reply", "expected"),
    [
        ("--elicitation", None, "cannot read --elicitation file"),
        ("--elicitation", "[1]", "must hold a JSON object"),
        ("--elicitation", '{"action": "maybe"}', '"action" must be one of'),
        ("--sampling", '{"role": "assistant"}', "needs content, model"),
        ("--sampling", "{", "invalid JSON"),
    ],
)
def test_a_bad_reply_file_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, reply: str | None, expected: str
) -> None:
    path = tmp_path / "reply.json"
    if reply is not None:
        path.write_text(reply)
    assert cli.main(["node", "server.js", "--method", "ping", option, f"@{path}"]) == 1
    assert expected in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value"), [("--elicitation", "accept"), ("--sampling", "accept-defaults")]
)
def test_an_unknown_policy_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    assert cli.main(["node", "--method", "ping", option, value]) == 2
    assert "must be one of" in capsys.readouterr().err


def test_a_policy_declares_its_capability_and_opens_the_get_stream() -> None:
    inv = cli.parse_args(
        ["http://h/mcp", "--method", "ping", "--elicitation", "decline", "--sampling", "reject"]
    )
    assert isinstance(inv.target, HttpTarget) and inv.target.open_get_stream
    assert inv.elicitation is not None and inv.elicitation.url_mode
    plain = cli.parse_args(["http://h/mcp", "--method", "ping"])
    assert isinstance(plain.target, HttpTarget) and not plain.target.open_get_stream
    assert plain.elicitation is None and plain.sampling is None


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ({"type": "string"}, ""),
        ({"type": "string", "minLength": 3}, "xxx"),
        ({"type": "string", "format": "email"}, "user@example.com"),
        ({"type": "string", "format": "date"}, "1970-01-01"),
        ({"type": "string", "enum": ["b", "a"]}, "b"),
        ({"type": "string", "oneOf": [{"const": "h1", "title": "One"}]}, "h1"),
        ({"type": "integer"}, 0),
        ({"type": "integer", "minimum": 1.5}, 2),
        ({"type": "number", "maximum": -2.5}, -2.5),
        ({"type": "boolean"}, False),
        ({"type": "array", "minItems": 1, "items": {"enum": ["x", "y"]}}, ["x"]),
        ({"type": "array", "items": {"anyOf": [{"const": "f"}]}}, []),
    ],
)
def test_a_required_property_without_a_default_gets_the_simplest_valid_value(prop: dict, value: Any) -> None:
    assert answers.defaults_content({"type": "object", "properties": {"p": prop}, "required": ["p"]}) == {
        "p": value
    }


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "integer", "minimum": 2, "maximum": 1},
        {"type": "array", "minItems": 2, "items": {"enum": ["only"]}},
        {"type": "string", "enum": []},
        {"type": "object"},
    ],
)
def test_a_required_property_no_value_can_satisfy_declines(prop: dict) -> None:
    assert answers.defaults_content({"type": "object", "properties": {"p": prop}, "required": ["p"]}) is None


def test_defaults_win_and_optional_properties_without_one_are_left_out() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 7},
            "b": {"type": "string"},
            "c": {"type": "boolean"},
        },
        "required": ["a", "c"],
    }
    assert answers.defaults_content(schema) == {"a": 7, "c": False}


async def test_accept_defaults_refuses_url_mode_which_it_does_not_declare() -> None:
    from sessions.engine import McpError, PendingRequest

    elicit = answers.handlers(answers.Policy("accept-defaults"), None)["elicitation/create"]
    params = {"mode": "url", "url": "https://x/", "message": "m"}
    url = PendingRequest("k", 1, "elicitation/create", params, 1)
    with pytest.raises(McpError) as refused:
        await elicit(url)
    assert refused.value.code == -32601
    declined = answers.handlers(answers.Policy("decline"), None)["elicitation/create"]
    assert await declined(url) == {"action": "decline"}
