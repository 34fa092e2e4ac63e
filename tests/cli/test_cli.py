"""The one-shot CLI (``mcp-inspector --cli``), run as a real process against real servers.

What needs no server (arguments, usage errors, answers) is in test_cli_arguments.py, in process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import assert_one_error_line, result_of, run_cli, target
from support.paths import REPO, SERVERS
from support.processes import free_port, start_http_server

pytestmark = pytest.mark.slow

TIMEOUT = 30


# --- stdio --------------------------------------------------------------------------------------------------


def test_tools_list_over_stdio_lists_every_tool_including_echo(everything_stdio: dict) -> None:
    result = result_of(run_cli(*target(everything_stdio), "--method", "tools/list"))
    names = [tool["name"] for tool in result["tools"]]
    assert "echo" in names
    assert "nextCursor" not in result


def test_the_cli_declares_roots_as_the_official_cli_does_and_answers_with_those_given(
    everything_stdio: dict, tmp_path: Path
) -> None:
    # server-everything offers get-roots-list only to a client that declares roots.
    names = [
        tool["name"]
        for tool in result_of(run_cli(*target(everything_stdio), "--method", "tools/list"))["tools"]
    ]
    assert "get-roots-list" in names
    call = ("--method", "tools/call", "--tool-name", "get-roots-list")
    assert "no roots are currently configured" in json.dumps(
        result_of(run_cli(*target(everything_stdio), *call))
    )
    listed = json.dumps(result_of(run_cli(*target(everything_stdio), *call, "--root", str(tmp_path))))
    assert "(1 total)" in listed and tmp_path.as_uri() in listed


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


def test_a_cli_call_over_http_loads_no_part_of_the_engine_it_does_not_use(everything_http: str) -> None:
    unused = [
        "ctypes", "django", "mcp_types", "sessions.engine._stdio", "sessions.engine._processes",
        "sessions.engine._sandbox", "sessions.engine._observer", "sessions.engine._client_rules",
        "sessions.engine._oauth", "sessions.engine._oauth_flow", "sessions.engine._skills",
        "sessions.engine._egress",
    ]  # fmt: skip
    code = (
        "import sys, json\n"
        "from inspector.__main__ import main\n"
        "rc = main(['--cli', sys.argv[1], '--method', 'tools/call', '--tool-name', 'echo',"
        " '--tool-arg', 'message=hi'])\n"
        f"loaded = sorted(set(sys.modules) & set({unused!r}))\n"
        "print(json.dumps({'rc': rc, 'loaded': loaded}), file=sys.stderr)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, everything_http],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert json.loads(proc.stdout)["content"][0]["text"] == "Echo: hi"
    assert json.loads(proc.stderr) == {"rc": 0, "loaded": []}


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


# --- --record -----------------------------------------------------------------------------------------------


def test_record_writes_every_frame_as_json_lines(tmp_path: Path, everything_stdio: dict) -> None:
    path = tmp_path / "frames.jsonl"
    result_of(run_cli(*target(everything_stdio), "--method", "tools/list", "--record", str(path)))
    frames = [json.loads(line) for line in path.read_text().splitlines()]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert {f["direction"] for f in frames} == {"out", "in", "local"}
    sent = [
        (f["method"], f["rpc_kind"]) for f in frames if f["kind"] == "message" and f["direction"] == "out"
    ]
    assert [method for method, kind in sent if kind != "result"] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    assert ("roots/list", "result") in sent  # server-everything asks the roots the CLI declares
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


def test_missing_command_fails_with_one_line() -> None:
    proc = run_cli("/nonexistent/mcp-server", "--method", "ping")
    assert "cannot start" in assert_one_error_line(proc, 1)


# --- parsing, in process ------------------------------------------------------------------------------------


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


# --- a quoted command line as TARGET ------------------------------------------------------------------------


def test_a_quoted_command_line_as_target_is_split_like_the_web_form() -> None:
    # The README's own example: mcp-inspector --cli "python my_server.py" --method tools/list
    proc = run_cli(f"{sys.executable} {SDK[1]} stdio", "--method", "tools/list")
    assert "add" in {tool["name"] for tool in result_of(proc)["tools"]}


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


def test_accept_defaults_refuses_an_elicitation_whose_schema_nests_an_object(tmp_path: Path) -> None:
    path = tmp_path / "frames.jsonl"
    proc = run_cli(
        sys.executable, str(SERVERS / "bad_shapes.py"), "nested-elicit", "--method", "tools/call",
        "--tool-name", "ask", "--elicitation", "accept-defaults", "--record", str(path),
    )  # fmt: skip
    answer = json.loads(result_of(proc)["content"][0]["text"])
    assert answer["code"] == -32602 and "nested object" in answer["message"]
    frames = [json.loads(line) for line in path.read_text().splitlines()]
    [asked] = [f for f in frames if f["method"] == "elicitation/create" and f["direction"] == "in"]
    assert [v["code"] for v in asked["verdicts"]] == ["elicitation-schema"]


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


# --- the defaults of accept-defaults ------------------------------------------------------------------------
