"""The one-shot CLI (``mcp-inspector --cli``), run as a real process against real servers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO, SERVERS
from support.processes import free_port, start_http_server

from inspector import cli
from inspector.cli import answers
from sessions.engine import HttpTarget, StdioTarget

TIMEOUT = 30


def run_cli(*args: str, timeout: float = TIMEOUT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m inspector --cli ARGS`` and return the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "inspector", "--cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def target(spec: dict) -> list[str]:
    return [spec["command"], *spec["args"]]


def result_of(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return json.loads(proc.stdout)


def assert_one_error_line(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- stdio --------------------------------------------------------------------------------------------------


def test_tools_list_over_stdio_lists_every_tool_including_echo(everything_stdio: dict) -> None:
    result = result_of(run_cli(*target(everything_stdio), "--method", "tools/list"))
    names = [tool["name"] for tool in result["tools"]]
    assert "echo" in names
    assert "nextCursor" not in result


def test_tools_call_sends_tool_args_and_prints_the_result(everything_stdio: dict) -> None:
    proc = run_cli(
        *target(everything_stdio), "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi"
    )
    assert result_of(proc)["content"] == [{"type": "text", "text": "Echo: hi"}]


def test_target_and_its_arguments_may_follow_a_double_dash(everything_stdio: dict) -> None:
    proc = run_cli("--method", "prompts/list", "--", *target(everything_stdio))
    names = [prompt["name"] for prompt in result_of(proc)["prompts"]]
    assert "args-prompt" in names


def test_prompts_get_passes_prompt_args(everything_stdio: dict) -> None:
    proc = run_cli(
        *target(everything_stdio),
        "--method",
        "prompts/get",
        "--prompt-name",
        "args-prompt",
        "--prompt-args",
        "city=Paris",
        "state=Texas",
    )
    text = json.dumps(result_of(proc)["messages"])
    assert "Paris" in text and "Texas" in text


def test_resources_list_then_read_returns_the_contents(everything_stdio: dict) -> None:
    listed = result_of(run_cli(*target(everything_stdio), "--method", "resources/list"))
    uri = listed["resources"][0]["uri"]
    read = result_of(run_cli(*target(everything_stdio), "--method", "resources/read", "--uri", uri))
    assert read["contents"][0]["uri"] == uri


def test_env_flags_reach_the_stdio_server(everything_stdio: dict) -> None:
    proc = run_cli(
        "-e", "CLI_TEST_VALUE=from-flag", *target(everything_stdio), "--method", "tools/call",
        "--tool-name", "get-env",
    )  # fmt: skip
    env = json.loads(result_of(proc)["content"][0]["text"])
    assert env.get("CLI_TEST_VALUE") == "from-flag"


def test_the_cli_imports_neither_django_nor_mcp_types_nor_httpx_for_a_stdio_call(
    everything_stdio: dict,
) -> None:
    code = (
        "import sys, json\n"
        "from inspector.__main__ import main\n"
        "rc = main(['--cli', *sys.argv[1:], '--method', 'ping'])\n"
        "loaded = {m.split('.')[0] for m in sys.modules}\n"
        "heavy = sorted(loaded & {'django', 'mcp_types', 'pydantic', 'httpx'})\n"
        "print(json.dumps({'rc': rc, 'heavy': heavy}), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *target(everything_stdio)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert json.loads(proc.stdout) == {}
    assert json.loads(proc.stderr) == {"rc": 0, "heavy": []}


# --- HTTP ---------------------------------------------------------------------------------------------------


def test_streamable_http_target_answers_tools_list(everything_http: str) -> None:
    proc = run_cli(everything_http, "--transport", "http", "--method", "tools/list")
    assert "echo" in [tool["name"] for tool in result_of(proc)["tools"]]


def test_legacy_sse_transport_calls_a_tool(everything_sse: str) -> None:
    proc = run_cli(
        everything_sse, "--transport", "sse", "--method", "tools/call", "--tool-name", "echo",
        "--tool-arg", "message=over sse",
    )  # fmt: skip
    assert result_of(proc)["content"][0]["text"] == "Echo: over sse"


def test_json_reply_server_adds_numbers_given_as_json_tool_args(sdk_http_json: str) -> None:
    proc = run_cli(sdk_http_json, "--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "b=3")
    assert result_of(proc)["structuredContent"] == {"result": 5}


def test_logging_set_level_and_ping_print_empty_results(everything_http: str) -> None:
    assert result_of(run_cli(everything_http, "--method", "logging/setLevel", "--log-level", "debug")) == {}
    assert result_of(run_cli(everything_http, "--method", "ping")) == {}


# --- config files -------------------------------------------------------------------------------------------


def test_a_registry_server_json_works_as_a_config_file(tmp_path: Path, sdk_http_json: str) -> None:
    server = SERVERS / "sdk_server.py"
    document = {
        "name": "io.example/sdk",
        "title": "SDK",
        "packages": [
            {
                "registryType": "pypi",
                "identifier": str(server),
                "runtimeHint": sys.executable,
                "transport": {"type": "stdio"},
                "packageArguments": [{"type": "positional", "value": "stdio"}],
            }
        ],
        "remotes": [{"type": "streamable-http", "url": sdk_http_json}],
    }
    path = tmp_path / "server.json"
    path.write_text(json.dumps(document))
    call = ["--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "--tool-arg", "b=3"]
    for name in ("SDK (pypi)", "SDK (remote)"):
        assert result_of(run_cli("--config", str(path), "--server", name, *call))["structuredContent"] == {
            "result": 5
        }
    line = assert_one_error_line(run_cli("--config", str(path), *call), 1)
    assert "2 servers" in line and "SDK (pypi)" in line


def test_config_file_picks_the_named_stdio_server_with_its_env(
    tmp_path: Path, everything_stdio: dict
) -> None:
    config = {
        "mcpServers": {
            "everything": {
                "command": everything_stdio["command"],
                "args": everything_stdio["args"],
                "env": {"CLI_CONFIG_VALUE": "from-config", "CLI_OVERRIDDEN": "config"},
            },
            "broken": {"command": "/nonexistent/server"},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    proc = run_cli(
        "--config", str(path), "--server", "everything", "-e", "CLI_OVERRIDDEN=flag",
        "--method", "tools/call", "--tool-name", "get-env",
    )  # fmt: skip
    env = json.loads(result_of(proc)["content"][0]["text"])
    assert (env.get("CLI_CONFIG_VALUE"), env.get("CLI_OVERRIDDEN")) == ("from-config", "flag")


def test_vscode_style_config_with_one_http_server_needs_no_server_name(
    tmp_path: Path, sdk_http_json: str
) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"servers": {"sdk": {"type": "http", "url": sdk_http_json}}}))
    proc = run_cli("--config", str(path), "--method", "tools/list")
    assert "add" in [tool["name"] for tool in result_of(proc)["tools"]]


def test_config_naming_an_unknown_server_lists_the_available_ones(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}))
    line = assert_one_error_line(run_cli("--config", str(path), "--server", "c", "--method", "ping"), 1)
    assert "'c' not found" in line and "a, b" in line


# --- --record -----------------------------------------------------------------------------------------------


def test_record_writes_every_frame_as_json_lines(tmp_path: Path, everything_stdio: dict) -> None:
    path = tmp_path / "frames.jsonl"
    result_of(run_cli(*target(everything_stdio), "--method", "tools/list", "--record", str(path)))
    frames = [json.loads(line) for line in path.read_text().splitlines()]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert {f["direction"] for f in frames} == {"out", "in", "local"}
    sent = [f["method"] for f in frames if f["kind"] == "message" and f["direction"] == "out"]
    assert sent == ["initialize", "notifications/initialized", "tools/list"]
    received = [
        (f["method"], f["rpc_kind"]) for f in frames if f["kind"] == "message" and f["direction"] == "in"
    ]
    assert ("initialize", "result") in received and ("tools/list", "result") in received
    assert frames[-1]["kind"] == "state" and frames[-1]["direction"] == "local"


# --- failures -----------------------------------------------------------------------------------------------


def test_unknown_tool_prints_the_is_error_result_and_exits_zero_like_the_official_cli(
    everything_stdio: dict,
) -> None:
    proc = run_cli(*target(everything_stdio), "--method", "tools/call", "--tool-name", "no-such-tool")
    result = result_of(proc)
    assert result["isError"] is True
    assert "no-such-tool" in result["content"][0]["text"]


def test_json_rpc_error_exits_one_with_a_single_line(everything_stdio: dict) -> None:
    proc = run_cli(*target(everything_stdio), "--method", "prompts/get", "--prompt-name", "no-such-prompt")
    line = assert_one_error_line(proc, 1)
    assert "prompts/get failed" in line and "-32602" in line


def test_server_that_dies_reports_its_exit_code(bad_stdio) -> None:
    proc = run_cli(*target(bad_stdio("die")), "--method", "tools/call", "--tool-name", "t")
    line = assert_one_error_line(proc, 1)
    assert "code 3" in line and "dying" in line


def test_hanging_server_times_out_without_hanging_the_cli(bad_stdio) -> None:
    started = time.monotonic()
    proc = run_cli(
        "--timeout", "1", *target(bad_stdio("hang")), "--method", "tools/call", "--tool-name", "t", timeout=20
    )
    line = assert_one_error_line(proc, 1)
    assert "timed out" in line
    assert time.monotonic() - started < 15


def test_unreachable_url_fails_with_one_line() -> None:
    proc = run_cli(f"http://127.0.0.1:{unused_port()}/mcp", "--method", "tools/list", "--timeout", "5")
    assert "cannot connect" in assert_one_error_line(proc, 1)


def test_missing_command_fails_with_one_line() -> None:
    proc = run_cli("/nonexistent/mcp-server", "--method", "ping")
    assert "cannot start" in assert_one_error_line(proc, 1)


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
    ],
)
def test_usage_errors_exit_two_with_one_line(args: list[str], expected: str) -> None:
    assert expected in assert_one_error_line(run_cli(*args), 2)


# --- parsing, in process ------------------------------------------------------------------------------------


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


# --- collections --------------------------------------------------------------------------------------------

SDK = [sys.executable, str(SERVERS / "sdk_server.py"), "stdio"]


def _collection(tmp_path: Path, steps: list[dict[str, Any]]) -> str:
    path = tmp_path / "checks.json"
    path.write_text(json.dumps({"steps": steps}))
    return str(path)


def test_a_collection_passes_when_every_expectation_holds(tmp_path: Path) -> None:
    steps = [
        {"method": "tools/list", "expect": {"contains": '"add"', "verdicts": "clean"}},
        {
            "name": "add works",
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            "expect": {"result": {"structuredContent": {"result": 3}}, "max_ms": 10_000, "verdicts": "clean"},
        },
        {"method": "tools/call", "params": {"name": "fail", "arguments": {}}, "expect": {"isError": True}},
        {"method": "prompts/get", "params": {"name": "nope"}, "expect": {"error": True, "contains": "nope"}},
    ]
    junit = tmp_path / "report.xml"
    proc = run_cli(*SDK, "--collection", _collection(tmp_path, steps), "--junit", str(junit))
    summary = result_of(proc)
    assert (summary["passed"], summary["failed"]) == (4, 0)
    assert [s["name"] for s in summary["steps"]] == [
        "1. tools/list",
        "add works",
        "3. tools/call fail",
        "4. prompts/get nope",
    ]
    report = junit.read_text()
    assert '<testsuite name="checks.json" tests="4" failures="0"' in report and 'name="add works"' in report


def test_a_failing_expectation_fails_the_run_and_says_why(tmp_path: Path) -> None:
    steps = [
        {
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            "expect": {"result": {"structuredContent": {"result": 4}}},
        },
        {"method": "tools/call", "params": {"name": "fail", "arguments": {}}, "expect": {"isError": False}},
        {"method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        {"method": "tools/list", "expect": {"max_ms": 0}},
    ]
    junit = tmp_path / "report.xml"
    proc = run_cli(*SDK, "--collection", _collection(tmp_path, steps), "--junit", str(junit))
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: 4 of 4 collection steps failed"
    summary = json.loads(proc.stdout)
    problems = [s["problems"] for s in summary["steps"]]
    assert problems[0] == ['result does not contain {"structuredContent": {"result": 4}}']
    assert problems[1] == ["isError is True, expected False"]
    assert problems[2][0].startswith("unexpected error") or "isError" in problems[2][0]
    assert problems[3][0].startswith("took ") and "more than 0 ms" in problems[3][0]
    assert 'failures="4"' in junit.read_text() and "<failure message=" in junit.read_text()


def test_collection_verdicts_clean_catches_a_misbehaving_server(tmp_path: Path) -> None:
    server = [sys.executable, str(SERVERS / "bad_stdio.py"), "violations"]
    steps = [{"method": "tools/list", "expect": {"verdicts": "clean"}}]
    proc = run_cli(*server, "--collection", _collection(tmp_path, steps))
    assert proc.returncode == 1
    problem = json.loads(proc.stdout)["steps"][0]["problems"][0]
    assert problem.startswith("conformance: ") and "duplicate-response" in problem


def test_a_bad_collection_file_is_one_clear_error(tmp_path: Path) -> None:
    line = assert_one_error_line(run_cli(*SDK, "--collection", _collection(tmp_path, [{"params": {}}])), 1)
    assert "step 1: needs a method" in line
    bad = [{"method": "ping", "expect": {"eventually": True}}]
    line = assert_one_error_line(run_cli(*SDK, "--collection", _collection(tmp_path, bad)), 1)
    assert "unknown expectation eventually" in line
    path = _collection(tmp_path, [{"method": "ping"}])
    line = assert_one_error_line(run_cli(*SDK, "--collection", path, "--method", "ping"), 2)
    assert "leave out --method" in line
    line = assert_one_error_line(run_cli(*SDK, "--method", "ping", "--junit", "x.xml"), 2)
    assert "--junit goes with --collection" in line


# --- a quoted command line as TARGET ------------------------------------------------------------------------


def test_a_quoted_command_line_as_target_is_split_like_the_web_form() -> None:
    # The README's own example: mcp-inspector --cli "python my_server.py" --method tools/list
    proc = run_cli(f"{sys.executable} {SDK[1]} stdio", "--method", "tools/list")
    assert "add" in {tool["name"] for tool in result_of(proc)["tools"]}


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


def test_a_command_line_with_an_unclosed_quote_is_a_usage_error() -> None:
    assert "cannot split the command" in assert_one_error_line(
        run_cli("node 'server.js", "--method", "ping"), 2
    )


# --- answering elicitation and sampling ---------------------------------------------------------------------


def _reply_file(tmp_path: Path, reply: dict[str, Any]) -> str:
    path = tmp_path / "reply.json"
    path.write_text(json.dumps(reply))
    return f"@{path}"


def _raw_elicitation(result: dict[str, Any]) -> dict[str, Any]:
    """server-everything's trigger-elicitation-request reports the raw answer in its last content item."""
    text = result["content"][-1]["text"]
    return json.loads(text.split("Raw result:", 1)[1])


def test_elicitation_accept_defaults_answers_with_the_schemas_defaults(everything_stdio: dict) -> None:
    proc = run_cli(
        *target(everything_stdio), "--method", "tools/call", "--tool-name", "trigger-elicitation-request",
        "--elicitation", "accept-defaults",
    )  # fmt: skip
    answer = _raw_elicitation(result_of(proc))
    assert answer["action"] == "accept"
    content = answer["content"]
    assert content["firstLine"] == "It was a dark and stormy night."
    assert (content["integer"], content["number"], content["untitledMultipleSelectEnum"]) == (
        42,
        3.14,
        ["Guitar"],
    )
    assert content["name"] == ""  # required, no default: the simplest string
    assert "email" not in content  # optional, no default: left out


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_elicitation_decline_and_cancel_answer_with_that_action(everything_stdio: dict, action: str) -> None:
    proc = run_cli(
        *target(everything_stdio), "--method", "tools/call", "--tool-name", "trigger-elicitation-request",
        "--elicitation", action,
    )  # fmt: skip
    assert _raw_elicitation(result_of(proc)) == {"action": action}


def test_sampling_from_a_file_and_sampling_reject(everything_stdio: dict, tmp_path: Path) -> None:
    reply = {"role": "assistant", "content": {"type": "text", "text": "from the file"}, "model": "file-model"}
    call = [*target(everything_stdio), "--method", "tools/call", "--tool-name", "trigger-sampling-request"]
    answered = result_of(
        run_cli(*call, "--tool-arg", "prompt=hi", "--sampling", _reply_file(tmp_path, reply))
    )
    assert "from the file" in answered["content"][0]["text"]
    rejected = result_of(run_cli(*call, "--tool-arg", "prompt=hi", "--sampling", "reject"))
    assert rejected["isError"] is True
    assert "-1" in rejected["content"][0]["text"]


STATELESS = [sys.executable, str(SERVERS / "sdk_stateless.py"), "stdio"]


def test_input_required_rounds_are_answered_from_a_file_and_retried(tmp_path: Path) -> None:
    reply = _reply_file(tmp_path, {"action": "accept", "content": {"name": "Ada"}})
    proc = run_cli(
        *STATELESS, "--protocol-version", "2026-07-28", "--method", "tools/call", "--tool-name", "two_rounds",
        "--elicitation", reply,
    )  # fmt: skip
    assert result_of(proc)["content"][0]["text"] == "Ada and Ada"


def test_an_input_required_round_without_a_policy_is_refused_and_not_retried() -> None:
    proc = run_cli(
        *STATELESS, "--protocol-version", "2026-07-28", "--method", "tools/call",
        "--tool-name", "confirm_name", "--tool-arg", "greeting=Hi",
    )  # fmt: skip
    assert "'elicitation', which this client did not declare" in assert_one_error_line(proc, 1)


@pytest.fixture
def asks_on_get() -> Iterator[str]:
    """A server that sends elicitation/create and sampling/createMessage on the standalone GET stream."""
    port = free_port()
    argv = [sys.executable, str(SERVERS / "asks_on_get.py"), str(port)]
    with start_http_server(argv, port):
        yield f"http://127.0.0.1:{port}/mcp"


def test_requests_on_the_standalone_get_stream_are_answered(asks_on_get: str, tmp_path: Path) -> None:
    reply = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}
    proc = run_cli(
        asks_on_get, "--method", "tools/call", "--tool-name", "answers",
        "--elicitation", "accept-defaults", "--sampling", _reply_file(tmp_path, reply),
    )  # fmt: skip
    answers = json.loads(result_of(proc)["content"][0]["text"])
    assert answers == {
        "ask-elicit": {"action": "accept", "content": {"name": "Ada", "age": 18}},
        "ask-sample": reply,
    }


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


# --- the defaults of accept-defaults ------------------------------------------------------------------------


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
