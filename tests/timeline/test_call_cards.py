"""A call card (sessions/_call.html) for every shape of answer: its state, its class, escaped text."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.utils.html import escape

from sessions.models import McpSession
from sessions.teams.access import personal_team
from sessions.timeline.calls import call_context

TEXT = {"content": [{"type": "text", "text": 'Echo: <b>hi</b> & "you"'}]}
OUTCOMES: list[Any] = [
    {"result": TEXT},
    {"result": {**TEXT, "isError": True}},
    {"result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": 42}, {"type": "text"}]}},
    {"result": {"content": [{"type": "text", "text": "x", "annotations": {"audience": ["user"]}}]}},
    {"result": {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}]}},
    {"result": {"content": [{"type": "text", "text": "x"}], "structuredContent": {"n": 1}}},
    {"result": {"content": [], "isError": True}},
    {"result": {"content": "not a list"}},
    {"result": {"task": {"taskId": "t-1", "status": "working"}}},
    {"result": ["not", "a", "dict"]},
    {"result": "text"},
    {"error": {"code": -32602, "message": "bad <arguments>", "data": {"why": "x"}}},
    {"error": {"code": None, "message": "timed out", "kind": "RequestTimeout"}},
    {"too_big": {"size": 2_000_000, "head": '{"content": [', "seq": 9}},
    {},
]


@pytest.fixture
def session(db: Any) -> McpSession:
    alice = User.objects.create_user("alice")
    return McpSession.objects.create(
        team=personal_team(alice), name="s", config={"timeout": 30, "max_total_timeout": 120.5}
    )


def _contexts(session: McpSession) -> list[dict[str, Any]]:
    contexts = []
    for i, outcome in enumerate(OUTCOMES):
        for method, params in (
            ("tools/call", {"name": "echo", "arguments": {"message": "hi"}}),
            ("tools/call", {"name": "", "arguments": {}}),
            ("resources/read", {"uri": "file:///a<b>.txt"}),
            ("prompts/get", {"name": "p", "argument": {"x": 1}}),
            ("ping", {}),
        ):
            full = {
                "rpc_id": i,
                "request_seq": 10 + i,
                "response_seq": 11 + i,
                "latency_ms": 1.25 * i,
                **outcome,
            }
            contexts.append(call_context(session, i, outcome=full, sent={"method": method, "params": params}))
    context = call_context(session, 3, outcome={"result": TEXT}, sent={"method": "tools/call", "params": {}})
    contexts += [
        {**context, "latency_ms": None, "request_seq": None},
        {**context, "rpc_id": "id-<1>", "oob": True},
        {**context, "output_verdict": {"ok": True, "message": "matches outputSchema"}},
        {**context, "output_verdict": {"ok": False, "message": "does not match <schema>"}},
        {**context, "running": True, "outcome": None, "cancellable": True, "progress": None},
        {**context, "running": True, "outcome": None, "progress": {"rpc_id": 3, "progress": 2, "total": 5}},
        {**context, "rpc_id": 1234567, "request_seq": 7654321, "latency_ms": 12345.678},
    ]
    return contexts


def card_html(context: dict[str, Any]) -> str:
    return render_to_string("sessions/_call.html", context)


def test_every_shape_of_card_renders_with_its_state(session: McpSession) -> None:
    for context in _contexts(session):
        html = card_html(context)
        assert html.startswith(f'<article id="call-{escape(context["rpc_id"])}" class="call'), context
        outcome = context.get("outcome") or {}
        if context.get("running"):
            assert "status-running" in html, context
        elif isinstance(outcome, dict) and outcome.get("error"):
            assert 'class="call failed"' in html and "status-failed" in html, context
        elif isinstance(outcome.get("result"), dict) and outcome["result"].get("isError"):
            assert 'class="call tool-error"' in html, context
        assert ('hx-swap-oob="true"' in html) == bool(context.get("oob")), context


def test_a_card_escapes_what_the_server_sent(session: McpSession) -> None:
    context = call_context(session, 1, outcome={"result": TEXT}, sent={"method": "tools/call", "params": {}})
    html = card_html(context)
    assert "Echo: &lt;b&gt;hi&lt;/b&gt; &amp; &quot;you&quot;" in html and "<b>hi" not in html
