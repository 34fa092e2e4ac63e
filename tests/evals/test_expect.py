"""Evals' fast layer: a suite's JSON read and refused with the reason, expectations judged against
transcripts (pure functions), the loop of model turns against httpx's mock transport, and the summary,
threshold and JUnit of a run."""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree

import httpx
import pytest

from sessions.evals import (
    CaseResult,
    SuiteProblem,
    ToolOutcome,
    below,
    judge,
    junit,
    matches,
    parse_suite,
    run_case,
    summary,
)
from sessions.evals.suite import Expect
from sessions.providers import ModelConfig

DEEP: Any = 1
for _ in range(40):
    DEEP = {"m": DEEP}


def expect(**fields: Any) -> Expect:
    return parse_suite({"tests": [{"name": "t", "prompt": "p", "expect": fields}]}).tests[0].expect


def tool(name: str, arguments: dict[str, Any], status: str = "done", text: str = "ok") -> dict[str, Any]:
    return {
        "kind": "tool",
        "name": name,
        "tool": name,
        "arguments": arguments,
        "status": status,
        "text": text,
    }


def said(text: str) -> dict[str, Any]:
    return {"kind": "assistant", "text": text}


# --- the suite --------------------------------------------------------------------------------------------


def test_a_suite_is_read_with_its_defaults() -> None:
    suite = parse_suite(
        json.dumps(
            {
                "name": "everything",
                "system": "Be brief.",
                "tests": [
                    {
                        "name": "echo",
                        "prompt": "Echo hi",
                        "expect": {"calls": ["echo"], "answer_contains": "hi"},
                    },
                    {"name": "plain", "prompt": "Hello"},
                ],
            }
        )
    )
    assert (suite.name, suite.system, suite.temperature) == ("everything", "Be brief.", None)
    echo, plain = suite.tests
    assert echo.expect.calls[0].tool == "echo" and echo.expect.calls[0].arguments is None
    assert echo.expect.answer_contains == ("hi",) and echo.expect.order == "in_order"
    assert plain.expect.no_tool_error is True and plain.expect.max_turns is None


@pytest.mark.parametrize(
    ("suite", "said"),
    [
        ("{", "not JSON"),
        ('{"tests": [{"name": "a", "prompt": "p", "expect": {"answer_matches": NaN}}]}', "NaN is not JSON"),
        ("[" * 100_000, "nested too deeply"),
        (
            {
                "tests": [
                    {"name": "a", "prompt": "p", "expect": {"calls": [{"tool": "x", "arguments": DEEP}]}}
                ]
            },
            "nested more than 32 levels deep",
        ),
        ([], "a suite is a JSON object"),
        ({"tests": []}, "tests must be a non-empty list"),
        ({"tests": [{"prompt": "p"}]}, "test 1's name must be a non-empty string"),
        ({"tests": [{"name": "a", "prompt": "p"}, {"name": "a", "prompt": "q"}]}, "test 'a' is named twice"),
        ({"tests": [{"name": "a", "prompt": ""}]}, "test 'a''s prompt must be a non-empty string"),
        ({"tests": [{"name": "a", "prompt": "p", "expext": {}}]}, "unknown field 'expext'"),
        ({"tests": [{"name": "a", "prompt": "p", "expect": {"order": "sorted"}}]}, "order must be one of"),
        ({"tests": [{"name": "a", "prompt": "p", "expect": {"max_turns": 0}}]}, "max_turns must be"),
        ({"tests": [{"name": "a", "prompt": "p", "expect": {"answer_matches": "("}}]}, "does not compile"),
        (
            {
                "tests": [
                    {
                        "name": "a",
                        "prompt": "p",
                        "expect": {"calls": [{"tool": "x", "arguments": {"m": {"$regex": "["}}}]},
                    }
                ]
            },
            "calls[0].arguments.m: $regex does not compile",
        ),
        (
            {"tests": [{"name": "a", "prompt": "p", "expect": {"calls": [{"arguments": {}}]}}]},
            "calls[0].tool must be",
        ),
        (
            {"temperature": 3, "tests": [{"name": "a", "prompt": "p"}]},
            "temperature must be a number from 0 to 2",
        ),
    ],
)
def test_a_suite_that_is_not_one_is_refused_with_where_and_why(suite: Any, said: str) -> None:
    with pytest.raises(SuiteProblem, match=None) as caught:
        parse_suite(suite if isinstance(suite, str) else json.dumps(suite))
    assert said in str(caught.value)


# --- argument patterns ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        ({"a": 2}, {"a": 2, "b": 3}, True),  # other arguments are let be
        ({"a": 2}, {"a": 2.0}, True),
        ({"a": 2}, {"a": "2"}, False),
        ({"a": True}, {"a": 1}, False),
        ({"a": 1}, {"a": True}, False),
        ({"a": 2}, {}, False),
        ({"m": {"$regex": "^hel+o"}}, {"m": "hello world"}, True),
        ({"m": {"$regex": "^hel+o"}}, {"m": "say hello"}, False),
        ({"m": {"$regex": "1"}}, {"m": 1}, False),
        ({"m": {"$any": True}}, {"m": None}, True),
        ({"m": {"$any": True}}, {}, False),
        ({"o": {"x": [1, {"$regex": "b"}]}}, {"o": {"x": [1, "abc"], "y": 0}}, True),
        ({"o": {"x": [1]}}, {"o": {"x": [1, 2]}}, False),
    ],
)
def test_arguments_match_values_and_patterns(expected: Any, actual: Any, ok: bool) -> None:
    assert matches(expected, actual) is ok


# --- judging a transcript ---------------------------------------------------------------------------------


def test_calls_in_order_may_have_others_between_them() -> None:
    made = [tool("a", {}), tool("b", {"x": 1}), tool("c", {})]
    assert judge(expect(calls=["a", "c"]), [*made, said("done")]) == []
    assert judge(expect(calls=["c", "a"]), [*made, said("done")]) == [
        'expected a call of a after c; the calls were: a {}, b {"x": 1}, c {}'
    ]


def test_exact_calls_are_these_and_no_others() -> None:
    made = [tool("a", {}), tool("b", {"x": 1})]
    assert judge(expect(calls=["a", {"tool": "b", "arguments": {"x": 1}}], order="exact"), made) == []
    (reason,) = judge(expect(calls=["a"], order="exact"), made)
    assert reason.startswith("expected exactly a; the calls were: a {}, b")
    (reason,) = judge(expect(calls=[], order="exact"), made)
    assert reason.startswith("expected exactly no call at all")


def test_calls_in_any_order_each_need_a_call_of_their_own() -> None:
    made = [tool("b", {}), tool("a", {})]
    assert judge(expect(calls=["a", "b"], order="any"), made) == []
    (reason,) = judge(expect(calls=["a", "a"], order="any"), made)
    assert reason == "expected a call of a; the calls were: b {}, a {}"


def test_wrong_arguments_are_said_with_what_was_given() -> None:
    made = [tool("echo", {"message": "bye"}), said("bye")]
    (reason,) = judge(expect(calls=[{"tool": "echo", "arguments": {"message": "hi"}}]), made)
    assert reason == 'expected a call of echo {"message": "hi"}; the calls were: echo {"message": "bye"}'
    (reason,) = judge(expect(calls=[]), [said("hi")]) or ["passed"]
    assert reason == "passed"


def test_the_final_answer_contains_and_matches() -> None:
    transcript = [said("Working."), tool("get-sum", {"a": 2, "b": 3}), said("The SUM is 5.")]
    assert judge(expect(answer_contains=["sum is 5"], answer_matches=r"\b5\b"), transcript) == []
    reasons = judge(expect(answer_contains="six", answer_matches=r"^6$"), transcript)
    assert reasons == [
        "expected the answer to contain 'six'; it was \"The SUM is 5.\"",
        'expected the answer to match /^6$/; it was "The SUM is 5."',
    ]


def test_a_tool_error_fails_unless_allowed() -> None:
    transcript = [tool("boom", {}, status="failed", text="error: it broke"), said("Sorry.")]
    assert judge(expect(), transcript) == ["the call of boom failed: error: it broke"]
    assert judge(expect(no_tool_error=False), transcript) == []


def test_turns_are_the_models_answers() -> None:
    transcript = [said(""), tool("a", {}), said(""), tool("a", {}), said("done")]
    assert judge(expect(max_turns=3), transcript) == []
    assert judge(expect(max_turns=2), transcript) == ["expected at most 2 turns; the model took 3"]


def test_a_model_that_could_not_answer_or_called_what_is_not_there_fails_whatever_was_expected() -> None:
    no_answer = [{"kind": "user", "text": "hi"}, {"kind": "error", "text": "gpt could not answer: timed out"}]
    assert judge(expect(), no_answer) == ["gpt could not answer: timed out"]
    ghost = {"kind": "tool", "name": "ghost", "tool": "", "arguments": {}, "status": "invalid"}
    ghost["text"] = "There is no tool named 'ghost' in this session: it was not called."
    reasons = judge(expect(), [ghost, said("ok")])
    assert reasons == [
        "the model's call could not run: There is no tool named 'ghost' in this session: it was not called."
    ]


# --- the loop of turns, against httpx's mock transport ----------------------------------------------------

CONFIG = ModelConfig("gpt", "GPT", "openai", "http://model.test/v1", "gpt-x", "sk-secret", timeout=5)
TOOLS = [{"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}]


def completion(text: str = "", calls: list[tuple[str, str, Any]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    return {"model": "gpt-x", "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


def model(*answers: Any) -> tuple[httpx.MockTransport, list[dict[str, Any]]]:
    """A model answering in turn; each an answer's JSON, a (status, body) pair, or an exception."""
    sent: list[dict[str, Any]] = []
    left = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        answer = left.pop(0)
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, tuple):
            return httpx.Response(answer[0], content=answer[1])
        return httpx.Response(200, json=answer)

    return httpx.MockTransport(handle), sent


async def echo(name: str, arguments: dict[str, Any]) -> ToolOutcome:
    return ToolOutcome(
        {"content": [{"type": "text", "text": f"Echo: {arguments.get('message')}"}]}, latency_ms=1.0
    )


SUITE = parse_suite(
    {
        "system": "Use tools.",
        "tests": [
            {
                "name": "echo",
                "prompt": "Echo hi",
                "expect": {
                    "calls": [{"tool": "echo", "arguments": {"message": "hi"}}],
                    "answer_contains": "hi",
                },
            }
        ],
    }
)


async def test_a_case_runs_the_models_calls_and_gives_it_their_results() -> None:
    transport, sent = model(completion("", [("c1", "echo", {"message": "hi"})]), completion("It said hi."))
    result = await run_case(CONFIG, SUITE, SUITE.tests[0], TOOLS, echo, 2, transport=transport)
    assert (result.passed, result.reasons, result.attempt, result.model) == (True, [], 2, "gpt")
    kinds = [e["kind"] for e in result.transcript]
    assert kinds == ["user", "assistant", "tool", "assistant"]
    assert result.transcript[2]["text"] == "Echo: hi" and result.transcript[2]["status"] == "done"
    assert sent[0]["messages"][0] == {"role": "system", "content": "Use tools."}
    assert sent[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "Echo: hi"}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (httpx.ReadTimeout("slow"), "GPT could not answer: GPT did not answer within 5 s"),
        ((200, b"<html>502</html>"), "GPT could not answer: GPT answered something that is not JSON"),
        (
            (500, b'{"error": {"message": "overloaded sk-secret"}}'),
            "GPT answered HTTP 500: overloaded [redacted]",
        ),
    ],
)
async def test_a_model_that_times_out_or_answers_garbage_fails_the_case_with_the_reason(
    answer: Any, reason: str
) -> None:
    transport, _ = model(answer)
    result = await run_case(CONFIG, SUITE, SUITE.tests[0], TOOLS, echo, transport=transport)
    assert not result.passed and reason in result.reasons[0]
    assert result.transcript[-1]["kind"] == "error"


async def test_a_call_of_a_tool_that_does_not_exist_is_told_to_the_model_and_fails_the_case() -> None:
    transport, sent = model(completion("", [("c1", "summon", {})]), completion("Sorry, hi."))
    result = await run_case(CONFIG, SUITE, SUITE.tests[0], TOOLS, echo, transport=transport)
    assert not result.passed
    assert result.reasons[0] == (
        "the model's call could not run: There is no tool named 'summon' in this session: it was not called."
    )
    assert sent[1]["messages"][-1]["content"].startswith("There is no tool named 'summon'")


async def test_a_model_that_never_stops_calling_is_stopped_at_its_turns() -> None:
    loop = completion("", [("c", "echo", {"message": "hi"})])
    transport, sent = model(loop, loop, loop)
    case = parse_suite({"tests": [{"name": "t", "prompt": "p", "expect": {"max_turns": 2}}]})
    result = await run_case(CONFIG, case, case.tests[0], TOOLS, echo, transport=transport)
    assert len(sent) == 2 and result.reasons == ["Stopped: the model still called tools after 2 turns."]


# --- the run's summary ------------------------------------------------------------------------------------


def results() -> list[CaseResult]:
    made = []
    for attempt in (1, 2, 3):
        for model_key in ("a", "b"):
            failing = model_key == "b" and attempt == 2
            made.append(
                CaseResult(
                    "t", model_key, attempt, not failing, ["wrong"] if failing else [], [said("x")], 10.0
                )
            )
    return made


def test_the_summary_threshold_and_junit() -> None:
    found = summary("s", results())
    assert (found["passed"], found["failed"]) == (5, 1)
    assert found["rates"] == [
        {"test": "t", "model": "a", "passed": 3, "runs": 3, "rate": 1.0},
        {"test": "t", "model": "b", "passed": 2, "runs": 3, "rate": 0.6667},
    ]
    assert below(results(), 0.5) == []
    assert below(results(), 0.9) == ["t with b: 2/3 passed"]
    root = ElementTree.fromstring(junit("s", results()))
    assert (root.get("tests"), root.get("failures")) == ("6", "1")
    (failure,) = root.iter("failure")
    assert failure.get("message") == "wrong"
    failing = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failing] == [("s.b", "t (run 2)")]
    assert "assistant: x" in (failing[0].findtext("system-out") or "")
