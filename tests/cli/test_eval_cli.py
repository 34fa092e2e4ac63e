"""``mcp-inspector eval``: the proof against server-everything and two scripted models (one with a
planted regression), the exit codes and JUnit; a model that is slow, answers garbage or calls a tool that
does not exist fails its test with the reason, and the suite goes on; what stops a run exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from support.cli import target
from support.eval_scenario import KEY, SUITE, models, scripted_model
from support.paths import REPO, SERVERS
from support.processes import free_port, start_http_server

from inspector.cli.arguments import UsageError
from inspector.cli.evals import main, parse_eval


def run_eval(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "inspector", "eval", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
    )


def test_the_suite_comes_first_and_the_target_takes_the_clis_options(tmp_path: Path) -> None:
    run = parse_eval(["s.json", "node", "x.js", "-e", "A=1", "--runs", "3", "--model", "a", "--model", "b"])
    assert (run.suite_file, run.runs, run.models, run.threshold) == ("s.json", 3, ["a", "b"], 1.0)
    assert run.inv.target.env == {"A": "1"}  # type: ignore[union-attr]
    assert parse_eval(["s.json", "node", "x.js", "--threshold", "80%"]).threshold == 0.8
    for wrong, said in [
        (["--runs", "3"], "the suite comes first"),
        (["s.json", "node", "--runs", "0"], "--runs must be from 1 to 100"),
        (["s.json", "node", "--threshold", "1.5"], "--threshold '1.5'"),
        (["s.json", "node", "--method", "ping"], "--method: an eval calls the tools its models ask for"),
    ]:
        with pytest.raises(UsageError, match=None) as caught:
            parse_eval(wrong)
        assert said in str(caught.value)


def test_what_stops_a_run_exits_2_saying_why(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps(SUITE))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tests": [{"name": "a"}]}))
    monkeypatch.delenv("INSPECTOR_LLM_MODELS", raising=False)
    monkeypatch.delenv("INSPECTOR_LLM_URL", raising=False)
    cases = [
        ([str(tmp_path / "none.json"), "node"], "cannot read suite"),
        ([str(bad), "node"], "test 'a''s prompt must be a non-empty string"),
        ([str(suite), "node"], "no model is configured: set INSPECTOR_LLM_MODELS"),
        ([str(suite), "node", "--runs", "x"], "--runs: invalid int value"),
    ]
    for args, said in cases:
        assert main(args) == 2
        assert said in capsys.readouterr().err
    monkeypatch.setenv("INSPECTOR_LLM_MODELS", models("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"))
    assert main([str(suite), "node", "--model", "llama"]) == 2
    assert "--model 'llama' is not configured (configured: gpt, claude)" in capsys.readouterr().err


@pytest.mark.slow
def test_five_tests_three_runs_two_models_one_planted_regression(
    everything_stdio: dict, tmp_path: Path
) -> None:
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps(SUITE))
    junit, report = tmp_path / "eval.xml", tmp_path / "eval.json"
    with (
        scripted_model(tmp_path, "gpt") as gpt,
        scripted_model(tmp_path, "claude", regression=True) as claude,
    ):
        env = {"INSPECTOR_LLM_MODELS": models(gpt, claude)}
        args = [
            str(suite),
            *target(everything_stdio),
            "--runs",
            "3",
            "--junit",
            str(junit),
            "--json",
            str(report),
        ]
        proc = run_eval(*args, env=env)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].split() == ["test", "gpt", "claude"]
        assert lines[1:6] == [
            "echo                  3/3         3/3",
            "sum                   3/3         2/3",
            "echo-then-sum         3/3         3/3",
            "no-tools              3/3         3/3",
            "greeting              3/3         3/3",
        ]
        assert "FAIL sum with claude, run 2:" in proc.stdout
        assert (
            'expected a call of get-sum {"a": 2, "b": 3}; the calls were: get-sum {"a": 2, "b": 2}'
            in proc.stdout
        )
        assert (
            "29/30 runs passed" in proc.stdout
            and "below the threshold 1: sum with claude: 2/3 passed" in proc.stdout
        )
        assert KEY not in proc.stdout + proc.stderr + report.read_text() + junit.read_text()

        root = ElementTree.parse(junit).getroot()
        assert (root.get("name"), root.get("tests"), root.get("failures")) == ("everything", "30", "1")
        (failed,) = [c for c in root.iter("testcase") if c.find("failure") is not None]
        assert (failed.get("classname"), failed.get("name")) == ("everything.claude", "sum (run 2)")
        out = failed.findtext("system-out") or ""
        assert 'tool get-sum {"a": 2, "b": 2} [done]' in out and "→ The sum of 2 and 2 is 4." in out

        data = json.loads(report.read_text())
        assert (data["passed"], data["failed"]) == (29, 1)
        (bad,) = [r for r in data["results"] if not r["passed"]]
        assert [e["kind"] for e in bad["transcript"]] == ["user", "assistant", "tool", "assistant"]
        assert bad["transcript"][-1]["text"] == "It is 4."

        # The same regression under a threshold it clears.
        again = tmp_path / "again"
        again.mkdir()
    with scripted_model(again, "gpt") as gpt, scripted_model(again, "claude", regression=True) as claude:
        proc = run_eval(
            *args[:-4],
            "--threshold",
            "0.6",
            "--model",
            "claude",
            env={"INSPECTOR_LLM_MODELS": models(gpt, claude)},
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (
            proc.stdout.splitlines()[0].split() == ["test", "claude"] and "14/15 runs passed" in proc.stdout
        )


@pytest.mark.slow
def test_a_slow_garbled_or_confused_model_fails_its_test_with_the_reason_and_the_suite_goes_on(
    everything_stdio: dict, tmp_path: Path
) -> None:
    script, log = tmp_path / "script.json", tmp_path / "log.jsonl"
    steps = [
        {"match": "slow", "text": "late", "delay": 3},
        {"match": "garbage", "raw": "<html>502 Bad Gateway</html>", "content_type": "text/html"},
        {"match": "ghost", "tool_calls": [{"id": "c1", "name": "summon-ghost", "arguments": {}}]},
        {"match": "There is no tool named", "text": "That tool does not exist."},
        {"match": "fine", "text": "All fine."},
    ]
    script.write_text(json.dumps({"key": KEY, "steps": steps}))
    suite = tmp_path / "suite.json"
    tests = [{"name": word, "prompt": f"be {word}"} for word in ("slow", "garbage", "ghost", "fine")]
    suite.write_text(json.dumps({"name": "broken", "tests": tests}))

    port = free_port()
    server = [sys.executable, str(SERVERS / "scripted_llm.py"), str(port), str(script), str(log)]
    with start_http_server(server, port):
        url = f"http://127.0.0.1:{port}/v1"
        env = {
            "INSPECTOR_LLM_MODELS": json.dumps(
                [{"name": "m", "url": url, "model": "x", "api_key": KEY, "timeout": 1}]
            )
        }
        proc = run_eval(str(suite), *target(everything_stdio), env=env)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "FAIL slow with m, run 1:\n  - m could not answer: m did not answer within 1 s" in out
    garbage = "m could not answer: m answered something that is not JSON: '<html>502"
    assert f"FAIL garbage with m, run 1:\n  - {garbage}" in out
    assert (
        "FAIL ghost with m, run 1:\n  - the model's call could not run: "
        "There is no tool named 'summon-ghost' in this session: it was not called."
    ) in out
    assert "FAIL fine" not in out and "1/4 runs passed" in out
    assert "below the threshold 1: slow with m: 0/1 passed; garbage with m: 0/1 passed; ghost" in out
