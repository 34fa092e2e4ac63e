"""A call card written in Python (sessions/web/call_cards.py) is byte for byte the template's (issue 10)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string

from sessions.models import McpSession
from sessions.teams.access import personal_team
from sessions.timeline.calls import call_context
from sessions.web.call_cards import _kind, _text_only, card_html

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


def test_the_python_card_is_the_template_card_for_every_shape(session: McpSession) -> None:
    contexts = _contexts(session)
    fast = 0
    for context in contexts:
        assert card_html(context) == render_to_string("sessions/_call.html", context), context
        kind = _kind(context.get("running"), context.get("outcome"))
        fast += _text_only(context, kind) is not None
    assert fast == 9  # the path written in Python was taken, not only the template's


def test_a_card_escapes_what_the_server_sent(session: McpSession) -> None:
    context = call_context(session, 1, outcome={"result": TEXT}, sent={"method": "tools/call", "params": {}})
    html = card_html(context)
    assert "Echo: &lt;b&gt;hi&lt;/b&gt; &amp; &quot;you&quot;" in html and "<b>hi" not in html
