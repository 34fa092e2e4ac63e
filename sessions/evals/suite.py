"""An eval suite as JSON: its tests, each a prompt with expectations. ``parse_suite`` says what is wrong
with a suite in a sentence that names the test and the field."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

ORDERS = ("in_order", "exact", "any")
MAX_TESTS = 200
MAX_TURNS = 20  # the model's answers to one prompt, at most
DEFAULT_TURNS = 10
MAX_DEPTH = 32  # levels of an expected call's arguments
_TEST_KEYS = {"name", "prompt", "expect"}
_EXPECT_KEYS = {"calls", "order", "answer_contains", "answer_matches", "no_tool_error", "max_turns"}
_SUITE_KEYS = {"name", "system", "temperature", "tests"}


class SuiteProblem(ValueError):
    """The suite is not one: the message says where and why."""


@dataclasses.dataclass(frozen=True)
class ExpectedCall:
    """A tool call the model should make: the MCP tool's name, and the arguments it should give (each
    a value, or a pattern: ``{"$regex": "..."}``, ``{"$any": true}``); others it gives are let be."""

    tool: str
    arguments: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Expect:
    calls: tuple[ExpectedCall, ...] = ()
    order: str = "in_order"
    answer_contains: tuple[str, ...] = ()
    answer_matches: str = ""
    no_tool_error: bool = True
    max_turns: int | None = None


@dataclasses.dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest class

    name: str
    prompt: str
    expect: Expect


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    tests: tuple[TestCase, ...]
    system: str = ""
    temperature: float | None = None


def _unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    extra = sorted(set(data) - known)
    if extra:
        raise SuiteProblem(f"{where}: unknown field {extra[0]!r} (known: {', '.join(sorted(known))})")


def _text(value: Any, where: str, *, required: bool = True) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise SuiteProblem(f"{where} must be {'a non-empty' if required else 'a'} string")
    return value


def _call(value: Any, where: str) -> ExpectedCall:
    if isinstance(value, str):
        return ExpectedCall(_text(value, where))
    if not isinstance(value, dict):
        raise SuiteProblem(f'{where} must be a tool\'s name or {{"tool": ..., "arguments": {{...}}}}')
    _unknown(value, {"tool", "arguments"}, where)
    arguments = value.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise SuiteProblem(f"{where}.arguments must be a JSON object")
    _check_patterns(arguments, f"{where}.arguments")
    return ExpectedCall(_text(value.get("tool"), f"{where}.tool"), arguments)


def _check_patterns(value: Any, where: str, depth: int = 0) -> None:
    """A ``$regex`` that does not compile is the suite's mistake, said now rather than as a failing test."""
    if depth > MAX_DEPTH:
        raise SuiteProblem(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        if "$regex" in value:
            if set(value) != {"$regex"} or not isinstance(value["$regex"], str):
                raise SuiteProblem(f'{where}: a pattern is {{"$regex": "..."}} alone')
            try:
                re.compile(value["$regex"])
            except re.error as exc:
                raise SuiteProblem(f"{where}: $regex does not compile ({exc})") from None
            return
        if "$any" in value and set(value) != {"$any"}:
            raise SuiteProblem(f'{where}: a pattern is {{"$any": true}} alone')
        for key, item in value.items():
            _check_patterns(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_patterns(item, f"{where}[{index}]", depth + 1)


def _expect(value: Any, where: str) -> Expect:
    if value is None:
        return Expect()
    if not isinstance(value, dict):
        raise SuiteProblem(f"{where} must be a JSON object")
    _unknown(value, _EXPECT_KEYS, where)
    calls = value.get("calls", [])
    if not isinstance(calls, list):
        raise SuiteProblem(f"{where}.calls must be a list")
    order = value.get("order", "in_order")
    if order not in ORDERS:
        raise SuiteProblem(f"{where}.order must be one of {', '.join(ORDERS)}")
    contains = value.get("answer_contains", [])
    if isinstance(contains, str):
        contains = [contains]
    if not isinstance(contains, list) or not all(isinstance(c, str) and c for c in contains):
        raise SuiteProblem(f"{where}.answer_contains must be a string or a list of strings")
    pattern = value.get("answer_matches", "")
    _text(pattern, f"{where}.answer_matches", required=False)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise SuiteProblem(f"{where}.answer_matches does not compile ({exc})") from None
    no_error = value.get("no_tool_error", True)
    if not isinstance(no_error, bool):
        raise SuiteProblem(f"{where}.no_tool_error must be true or false")
    turns = value.get("max_turns")
    if turns is not None and (
        not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= MAX_TURNS
    ):
        raise SuiteProblem(f"{where}.max_turns must be a whole number from 1 to {MAX_TURNS}")
    return Expect(
        tuple(_call(c, f"{where}.calls[{i}]") for i, c in enumerate(calls)),
        order,
        tuple(contains),
        pattern,
        no_error,
        turns,
    )


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_suite(data: Any) -> Suite:
    """The suite of a JSON document (its text, or the value); ``SuiteProblem`` says what is wrong."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data, parse_constant=_no_constant)
        except RecursionError:
            raise SuiteProblem("not JSON a suite holds: nested too deeply") from None
        except ValueError as exc:
            raise SuiteProblem(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SuiteProblem('a suite is a JSON object: {"name": ..., "tests": [...]}')
    _unknown(data, _SUITE_KEYS, "the suite")
    name = _text(data.get("name", "suite"), "the suite's name")
    system = _text(data.get("system", ""), "the suite's system", required=False)
    temperature = data.get("temperature")
    if temperature is not None and (
        not isinstance(temperature, int | float) or isinstance(temperature, bool) or not 0 <= temperature <= 2
    ):
        raise SuiteProblem("the suite's temperature must be a number from 0 to 2")
    tests = data.get("tests")
    if not isinstance(tests, list) or not tests:
        raise SuiteProblem("the suite's tests must be a non-empty list")
    if len(tests) > MAX_TESTS:
        raise SuiteProblem(f"a suite holds at most {MAX_TESTS} tests")
    found: list[TestCase] = []
    for number, test in enumerate(tests, 1):
        where = f"test {number}"
        if not isinstance(test, dict):
            raise SuiteProblem(f"{where} must be a JSON object")
        _unknown(test, _TEST_KEYS, where)
        name_of = _text(test.get("name"), f"{where}'s name")
        where = f"test {name_of!r}"
        if any(t.name == name_of for t in found):
            raise SuiteProblem(f"{where} is named twice")
        found.append(
            TestCase(
                name_of,
                _text(test.get("prompt"), f"{where}'s prompt"),
                _expect(test.get("expect"), f"{where}'s expect"),
            )
        )
    return Suite(name, tuple(found), system, None if temperature is None else float(temperature))
