"""The per-frame path a flood takes, made quicker without changing a result: the engine's JSON parse
and its schema checks give what json.loads and model_validate give, value for value, error for error."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
from mcp_types import methods

from sessions.engine import Frame, Verdict, _rules, _schema
from sessions.frames import frame_row

TEXTS = [
    '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"i":1}}}',
    '[{"jsonrpc":"2.0","id":1,"result":{}}, 2, "x", null, true, 1.5e3]',
    "1",
    '"text"',
    "NaN",
    "-Infinity",
    '  {"a": 1}',
    '{"a": 1}  ',
    '{"a": 1}\t\n',
    '{"a": 1} {"b": 2}',
    '{"a": 1}x',
    "",
    " ",
    "{",
    '{"a": }',
    '{"a": "\\ud800"}',
    '{"a": "tab\there"}',
    "[" * 100_000 + "]" * 100_000,
    '{"a": 1, "a": 2}',
    "\ufeff{}",
]


def outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except RecursionError:
        return "RecursionError", None
    except ValueError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_the_engine_parses_a_message_as_json_loads_does(text: str) -> None:
    ours, theirs = outcome(_rules.loads, text), outcome(json.loads, text)
    assert ours == theirs
    if ours[0] == "value":
        assert json.dumps(ours[1]) == json.dumps(theirs[1])  # floats, NaN, key order: all alike


def _described(model: type[pydantic.BaseModel], body: dict[str, Any]) -> str | None:
    try:
        model.model_validate(body, by_name=False)
    except pydantic.ValidationError as exc:
        return _schema._describe(exc)
    return None


PARAMS = [
    None,
    {},
    {"level": "info", "data": {"i": 1}},
    {"level": "loud", "data": 1},
    {"data": "no level"},
    {"level": "info", "data": None, "logger": 5, "_meta": "x"},
    {"level": ["info"], "data": 1, "extra": True},
    {"progressToken": 1, "progress": 0.5, "total": 2, "message": "half"},
    {"progressToken": "t", "progress": "x"},
    {"progressToken": None, "progress": 1},
    {"requestId": 1, "reason": "stop"},
    {"uri": "file:///x"},
    {"uri": 5},
    {"_meta": {"progressToken": 1}},
]


@pytest.mark.parametrize("params", PARAMS, ids=range(len(PARAMS)))
def test_schema_verdicts_on_server_messages_are_model_validates(params: Any) -> None:
    for kind, table, check, head in (
        ("notification", methods.SERVER_NOTIFICATIONS, _schema.check_server_notification, {}),
        ("request", methods.SERVER_REQUESTS, _schema.check_server_request, {"id": 0}),
    ):
        for (method, version), model in table.items():
            body: dict[str, Any] = {"jsonrpc": "2.0", **head, "method": method}
            if params is not None:
                body["params"] = params
            described = _described(model, body)
            verdicts = check(method, version, params)
            assert [v.message for v in verdicts] == (
                [] if described is None else [f"{method} {kind} does not match {version}: {described}"]
            )


def test_a_floods_notifications_are_held_to_their_params_model_alone() -> None:
    # The quicker path the test above holds to model_validate: a log message and progress take it.
    for method in ("notifications/message", "notifications/progress"):
        for version in ("2024-11-05", "2025-11-25", "2026-07-28"):
            model = methods.SERVER_NOTIFICATIONS[(method, version)]
            assert _schema._params_validator(model, method) is not None, (method, version)


def test_each_row_has_its_own_frames_verdicts_however_they_repeat() -> None:
    # frame_row remembers the last verdicts it stored (a flood repeats one on every frame).
    warned, failed = Verdict("w", "warning", "careful"), Verdict("e", "error", "wrong")
    lists = [
        [warned],
        [warned],
        [failed],
        [Verdict("w", "warning", "careful")],
        [],
        [warned, failed],
        [warned],
    ]
    rows = [
        frame_row(Frame("message", "in", b"{}", seq=n + 1, verdicts=list(v)), 0) for n, v in enumerate(lists)
    ]
    assert [r["verdicts"] for r in rows] == [[v.to_dict() for v in vs] for vs in lists]
    assert [r["worst"] for r in rows] == ["warning", "warning", "error", "warning", "", "error", "warning"]
    assert rows[0]["verdicts"] is rows[1]["verdicts"] is rows[3]["verdicts"]
