"""``mcp-inspector replay``: a conversation recorded with ``--record`` sent again to a server, and what
changed in its answers. The comparison's rules are tested in tests/replay/test_replay_diff.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from support.cli import assert_one_error_line, result_of, run_cli, run_replay, target
from support.processes import free_port

from inspector.cli.arguments import UsageError
from inspector.cli.replay import capabilities, parse_replay

TIMEOUT = 60


def replay_in_process(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    from inspector.cli import replay

    capsys.readouterr()
    code = replay.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def messages(path: Path) -> list[dict[str, Any]]:
    """The messages of a recording, each with its frame's fields."""
    frames = [json.loads(line) for line in path.read_text().splitlines()]
    return [{**f, "message": json.loads(f["raw"])} for f in frames if f["kind"] == "message"]


def initialize_only(folder: Path) -> Path:
    """A recording of a client that initialized and asked nothing more."""
    initialize = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}},
    }  # fmt: skip
    path = folder / "initialize_only.jsonl"
    frame = {"seq": 1, "kind": "message", "direction": "out", "raw": json.dumps(initialize)}
    path.write_text(json.dumps({**frame, "rpc_kind": "request", "method": "initialize", "rpc_id": 0}) + "\n")
    return path


# --- the command line and recordings that cannot be replayed (no server) ------------------------------------


def test_the_recording_comes_first_and_the_target_takes_the_clis_options() -> None:
    run = parse_replay(
        ["rec.jsonl", "-e", "A=1", "python", "server.py", "--ignore", "$..timestamp", "--json", "r.json"]
    )
    assert run.recording == "rec.jsonl" and run.json_file == "r.json"
    assert [p.text for p in run.ignore] == ["$..timestamp"]
    assert run.inv.target.command == "python"  # type: ignore[union-attr]
    assert list(run.inv.target.args) == ["server.py"]  # type: ignore[union-attr]
    assert dict(run.inv.target.env) == {"A": "1"}  # type: ignore[union-attr]
    after = parse_replay(["rec.jsonl", "--junit", "j.xml", "--", "node", "s.js", "--json", "x"])
    assert after.junit_file == "j.xml" and list(after.inv.target.args) == ["s.js", "--json", "x"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--json", "r.json", "rec.jsonl", "srv"], "the recording comes first"),
        (
            ["rec.jsonl", "srv", "--method", "tools/list"],
            "--method: a replay sends the recording's own requests",
        ),
        (["rec.jsonl", "srv", "--ignore", "result.text"], "--ignore 'result.text': a path starts with \\$"),
        (["rec.jsonl"], "a target is required"),
    ],
)
def test_a_wrong_command_line_is_refused_saying_why(args: list[str], why: str) -> None:
    with pytest.raises(UsageError, match=why):
        parse_replay(args)


@pytest.mark.parametrize(
    ("version", "declared"),
    [
        ("2025-11-25", {"roots": {}}),
        (
            "2025-11-25",
            {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {"form": {}, "url": {}}},
        ),
        ("2025-11-25", {"elicitation": {"url": {}}, "experimental": {"x": {"on": True}}}),
        (
            "2025-11-25",
            {
                "sampling": {},
                "tasks": {"list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}}},
            },
        ),
        ("2025-06-18", {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}),
        ("2024-11-05", {}),
    ],
)
def test_the_replay_declares_what_the_recorded_client_declared(version: str, declared: dict) -> None:
    assert capabilities(declared, version).to_wire(version) == declared


def test_a_bad_recording_exits_2_naming_its_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"seq": 1, "kind": "state", "direction": "local"}\nnot json\n')
    code, out, err = replay_in_process(capsys, str(bad), "never-started-server")
    assert (code, out) == (2, "")
    assert err == f"error: cannot replay: recording {bad}: line 2: not JSON\n"


def test_a_recording_with_no_conversation_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = replay_in_process(capsys, str(empty), "never-started-server")
    assert code == 2 and "the recording has no initialize" in err and "Traceback" not in err
    code, _, err = replay_in_process(capsys, str(tmp_path / "missing.jsonl"), "srv")
    assert (
        code == 2
        and err.startswith("error: cannot replay: cannot read recording")
        and len(err.splitlines()) == 1
    )


def test_a_target_that_cannot_be_reached_exits_2_saying_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recording = initialize_only(tmp_path)
    code, out, err = replay_in_process(capsys, str(recording), f"http://127.0.0.1:{free_port()}/mcp")
    assert (code, out) == (2, "")
    assert err.startswith("error: cannot replay: cannot connect: ") and len(err.splitlines()) == 1


# --- against real servers -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_task_replayed_against_the_same_server_is_unchanged_though_its_ids_and_times_are_new(
    everything_stdio: dict, tmp_path: Path
) -> None:
    recorded, replayed = tmp_path / "recorded.jsonl", tmp_path / "replayed.jsonl"
    call = ("--method", "tools/call", "--tool-name", "simulate-research-query", "--tool-arg", "topic=tides")
    result_of(run_cli(*target(everything_stdio), *call, "--task", "--record", str(recorded), timeout=TIMEOUT))
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    proc = run_replay(
        str(recorded), *target(everything_stdio),
        # The recorded client polled the task while it moved through its stages: where a poll lands is a race.
        "--ignore", "$.result.status", "--ignore", "$.result.statusMessage",
        # The machine's load is not the server's speed (latency is held to its rule in the fast tests).
        "--no-latency", "--record", str(replayed), "--json", str(report), "--junit", str(junit),
        timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert "step 2 tools/call simulate-research-query: unchanged" in lines
    assert lines[-1].endswith(" changed") and lines[-1].endswith(", 0 changed")

    # The replay asked about its own task (mapped), and the server's ids and times were new ones:
    # without the mapping and the recognisers, every answer about the task would have changed.
    def task_answers(path: Path) -> list[dict[str, Any]]:
        return [
            m["message"]["result"]
            for m in messages(path)
            if m["method"] == "tasks/get" and m["direction"] == "in"
        ]

    before, after = task_answers(recorded), task_answers(replayed)
    assert len(before) == len(after) > 0
    assert before[0]["taskId"] != after[0]["taskId"] and before[0]["createdAt"] != after[0]["createdAt"]
    asked = [
        m["message"]["params"]["taskId"]
        for m in messages(replayed)
        if m["method"] == "tasks/result" and m["direction"] == "out"
    ]
    assert asked == [after[0]["taskId"]]

    data = json.loads(report.read_text())
    assert data["changed"] == 0 and data["steps"] == len(data["report"]) == len(lines) - 2
    assert [s["method"] for s in data["report"][:3]] == ["initialize", "tools/list", "tools/call"]
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("failures") == "0" and len(suite.findall("testcase")) == data["steps"]


COLLECTION = {
    "steps": [
        {"method": "tools/list"},
        {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
        {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}},
        {"method": "tools/call", "params": {"name": "ask_llm", "arguments": {"prompt": "2+2?"}}},
        {"method": "resources/read", "params": {"uri": "greeting://ada"}},
        {"method": "prompts/list"},
        {"method": "tools/call", "params": {"name": "slow", "arguments": {"steps": 2, "delay": 0.1}}},
    ]
}


@pytest.fixture
def sdk_recording(sdk_stdio: dict, tmp_path: Path) -> Path:
    """A conversation with the SDK test server, recorded with --record: a collection, sampling answered."""
    collection, reply = tmp_path / "collection.json", tmp_path / "reply.json"
    collection.write_text(json.dumps(COLLECTION))
    reply.write_text(
        json.dumps({"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "canned"})
    )
    recorded = tmp_path / "recorded.jsonl"
    result_of(
        run_cli(
            *target(sdk_stdio), "--collection", str(collection), "--sampling", f"@{reply}",
            "--record", str(recorded), timeout=TIMEOUT,
        )
    )  # fmt: skip
    return recorded


@pytest.mark.slow
def test_the_next_build_of_a_server_is_replayed_with_what_changed_named_by_path(
    sdk_stdio: dict, sdk_recording: Path, tmp_path: Path
) -> None:
    report, junit, page = tmp_path / "report.json", tmp_path / "report.xml", tmp_path / "report.html"
    proc = run_replay(
        str(sdk_recording), "-e", "SDK_SERVER_VARIANT=next", *target(sdk_stdio),
        "--json", str(report), "--junit", str(junit), "--report", str(page), timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr == ""
    data = json.loads(report.read_text())
    found = [(d["step"], d["method"], d["path"], d["rule"]) for s in data["report"] for d in s["differences"]]
    # On a loaded machine any step may come out slower too; the slow tool waited three times as long.
    assert (7, "tools/call", "latency_ms", "slower") in found
    changes = [change for change in found if change[3] != "slower"]
    assert changes == [
        (1, "tools/list", '$.result.tools[?(@.name=="add")].inputSchema.properties.c', "added"),
        (1, "tools/list", '$.result.tools[?(@.name=="needs_login")]', "removed"),
        (3, "tools/call", "$.result.content[0].text", "value changed"),
        (3, "tools/call", "$.result.structuredContent.result", "value changed"),
        # Its log line, sent while the call was in flight, is gone.
        (3, "tools/call", 'notifications["notifications/message"]', "notifications changed"),
        # The same answer, but the server no longer asked the client's LLM for it.
        (4, "tools/call", "server requests", "server requests changed"),
    ]
    echo = data["report"][3]["differences"]
    assert (echo[0]["recorded"], echo[0]["replayed"]) == ("hi", "hi!")
    assert (echo[2]["recorded"], echo[2]["replayed"]) == (1, 0)
    # The slow tool's progress (by its token) and log lines came as often as recorded.
    assert not [d for d in data["report"][7]["differences"] if d["rule"] == "notifications changed"]
    added = data["report"][1]["differences"][0]
    assert added["replayed"]["type"] == "integer" and added["absent"] == "recorded"
    asked = data["report"][4]["differences"][-1]
    assert (asked["recorded"], asked["replayed"]) == (["sampling/createMessage"], [])
    changed = sum(1 for s in data["report"] if s["changed"])
    assert data["changed"] == changed >= 4
    assert proc.stdout.splitlines()[-1] == f"8 steps, {changed} changed"
    assert (
        '  $.result.content[0].text: value changed: recorded "hi", replayed "hi!"' in proc.stdout.splitlines()
    )
    suite = ElementTree.parse(junit).getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("8", str(changed))
    failed = [case.get("name") for case in suite.findall("testcase") if case.find("failure") is not None]
    assert {"step 1 tools/list", "step 3 tools/call echo", "step 4 tools/call ask_llm"} <= set(failed)
    assert "step 7 tools/call slow" in failed
    # The page, written by a process with no Django settings: the same steps, the changed ones open.
    html = page.read_text()
    assert f"8 steps, {changed} changed" in html and "<script" not in html
    assert html.count("<details open>") == changed and html.count("<details>") == 8 - changed
    assert '<code class="replay-path">$.result.tools[?(@.name==&quot;needs_login&quot;)]</code>' in html


@pytest.mark.slow
def test_the_same_build_replays_unchanged(sdk_stdio: dict, sdk_recording: Path) -> None:
    proc = run_replay(str(sdk_recording), *target(sdk_stdio), "--no-latency", timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "8 steps, 0 changed"
    # ask_llm's sampling request was answered as recorded: the replay has no --sampling of its own, and
    # the CLI's default answer (-32601) would have made the tool fail.
    assert "step 4 tools/call ask_llm: unchanged" in proc.stdout.splitlines()


@pytest.mark.slow
def test_a_conversation_recorded_over_stdio_replays_unchanged_over_streamable_http(
    everything_stdio: dict, everything_http: str, tmp_path: Path
) -> None:
    collection, recorded = tmp_path / "c.json", tmp_path / "recorded.jsonl"
    steps = [
        {"method": "tools/list"},
        {"method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hi"}}},
        {"method": "tools/call", "params": {"name": "get-tiny-image", "arguments": {}}},
        {"method": "resources/list"},
        {"method": "resources/templates/list"},
        {"method": "prompts/get", "params": {"name": "args-prompt", "arguments": {"city": "Paris"}}},
    ]
    collection.write_text(json.dumps({"steps": steps}))
    result_of(run_cli(*target(everything_stdio), "--collection", str(collection), "--record", str(recorded)))
    proc = run_replay(str(recorded), everything_http, "--no-latency", timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "7 steps, 0 changed"


@pytest.mark.slow
def test_a_cursor_from_a_recorded_page_is_sent_as_the_new_servers(sdk_stdio: dict, tmp_path: Path) -> None:
    recorded, replayed = tmp_path / "recorded.jsonl", tmp_path / "replayed.jsonl"
    paged = ("-e", "SDK_SERVER_PAGE_SIZE=2", *target(sdk_stdio))  # a cursor made afresh for each page
    result_of(run_cli(*paged, "--method", "resources/list", "--record", str(recorded), timeout=TIMEOUT))
    proc = run_replay(str(recorded), *paged, "--no-latency", "--record", str(replayed), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-3:] == [
        "step 1 resources/list: unchanged",
        "step 2 resources/list: unchanged",
        "3 steps, 0 changed",
    ]

    def pages(path: Path) -> tuple[str, Any]:
        listed = [m for m in messages(path) if m["method"] == "resources/list"]
        first_answer = next(m for m in listed if m["direction"] == "in")["message"]["result"]
        asked = [m["message"].get("params") for m in listed if m["direction"] == "out"]
        return first_answer["nextCursor"], asked

    (recorded_cursor, _), (new_cursor, asked) = pages(recorded), pages(replayed)
    assert recorded_cursor != new_cursor
    assert asked == [None, {"cursor": new_cursor}]


@pytest.mark.slow
def test_a_request_the_recorded_client_cancelled_is_cancelled_in_the_replay(
    sdk_stdio: dict, tmp_path: Path
) -> None:
    collection, recorded, replayed = (
        tmp_path / "c.json",
        tmp_path / "recorded.jsonl",
        tmp_path / "replayed.jsonl",
    )
    steps = [
        {"method": "tools/call", "params": {"name": "slow", "arguments": {"steps": 1, "delay": 8}}},
        {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}},
    ]
    collection.write_text(json.dumps({"steps": steps}))
    # The recorded client gave up on the slow call after 4 s (notifications/cancelled), then called add.
    run_cli(*target(sdk_stdio), "--collection", str(collection), "--timeout", "4", "--record", str(recorded))
    proc = run_replay(
        str(recorded), *target(sdk_stdio), "--no-latency", "--record", str(replayed), timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 3 tools/call add: unchanged" in proc.stdout.splitlines()
    sent = [(m["method"], m["message"].get("params")) for m in messages(replayed) if m["direction"] == "out"]
    calls = [
        m["message"]["id"]
        for m in messages(replayed)
        if m["method"] == "tools/call" and m["direction"] == "out"
    ]
    cancelled = [params for method, params in sent if method == "notifications/cancelled"]
    assert cancelled == [{"requestId": calls[0], "reason": "timed out (time, 4 s)"}]
    # The replay gave the call up then, as the recorded client did, rather than waiting for its answer.
    answers = [m for m in messages(replayed) if m["direction"] == "in" and m["rpc_id"] == calls[0]]
    assert answers == []


@pytest.mark.slow
def test_a_server_that_does_not_start_exits_2_with_its_last_words(tmp_path: Path) -> None:
    recording = initialize_only(tmp_path)
    dying = [sys.executable, "-c", "import sys; print('no config', file=sys.stderr); sys.exit(3)"]
    line = assert_one_error_line(run_replay(str(recording), "--", *dying, timeout=TIMEOUT), 2)
    assert line.startswith("error: cannot replay: cannot connect: ") and "no config" in line


@pytest.mark.slow
def test_a_baseline_replayed_twice_tells_a_random_value_from_a_change(
    sdk_stdio: dict, tmp_path: Path
) -> None:
    collection, recorded, report = tmp_path / "c.json", tmp_path / "recorded.jsonl", tmp_path / "report.json"
    steps = [
        {"method": "tools/call", "params": {"name": "lucky", "arguments": {}}},
        {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}},
    ]
    collection.write_text(json.dumps({"steps": steps}))
    lucky = ("-e", "SDK_SERVER_RANDOM=1")
    result_of(run_cli(*lucky, *target(sdk_stdio), "--collection", str(collection), "--record", str(recorded)))
    old = " ".join(target(sdk_stdio))
    proc = run_replay(
        str(recorded), *lucky, *target(sdk_stdio), "--next", "--baseline", old, "--no-latency",
        "--json", str(report), timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads(report.read_text())
    found = [(d["step"], d["path"], d["rule"]) for s in data["report"] for d in s["differences"]]
    # The next build's one change is reported; the lucky number, new in every run, is not.
    assert found == [
        (1, '$.result.tools[?(@.name=="add")].inputSchema.properties.c', "added"),
        (1, '$.result.tools[?(@.name=="needs_login")]', "removed"),
        (3, "$.result.content[0].text", "value changed"),
        (3, "$.result.structuredContent.result", "value changed"),
        (3, 'notifications["notifications/message"]', "notifications changed"),
    ]
    varying = {(d["step"], d["path"], d["rule"]) for d in data["baseline"]}
    assert varying == {
        (2, "$.result.content[0].text", "value changed"),
        (2, "$.result.structuredContent.result", "value changed"),
    }
    dropped = [(d["step"], d["path"], d["because"], d["varies"]["rule"]) for d in data["not_counted"]]
    assert dropped == [
        (2, "$.result.content[0].text", "baseline", "value changed"),
        (2, "$.result.structuredContent.result", "baseline", "value changed"),
    ]
    assert data["baseline_target"] == old and data["target"].endswith("stdio --next")
    lines = proc.stdout.splitlines()
    assert f"baseline {old}: 2 values differed between two runs" in lines
    assert lines[-1] == "4 steps, 2 changed"


def test_the_baseline_takes_the_targets_options_with_its_own_command_or_url() -> None:
    run = parse_replay(["rec.jsonl", "-e", "A=1", "node", "new.js", "--baseline", "node old.js --flag"])
    assert (run.baseline.command, list(run.baseline.args), dict(run.baseline.env)) == (  # type: ignore[union-attr]
        "node", ["old.js", "--flag"], {"A": "1"},
    )  # fmt: skip
    http = parse_replay(
        ["rec.jsonl", "http://new/mcp", "--header", "X-Key: k", "--baseline", "http://old/mcp"]
    )
    assert (http.baseline.url, http.baseline.headers) == ("http://old/mcp", {"X-Key": "k"})  # type: ignore[union-attr]
    with pytest.raises(UsageError, match="--baseline: a target is required"):
        parse_replay(["rec.jsonl", "srv", "--baseline", " "])
