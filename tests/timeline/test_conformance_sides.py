"""The Conformance report says which side broke each rule: the server's verdicts and, in a tap
session, the client's (judged by the engine's client rules, stored like any other verdict)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from support.teams import team_of

from sessions.engine import ClientConduct, Frame, check_client_frame, observe_server_frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.conformance import report, verdict_rows

pytestmark = pytest.mark.django_db


def _tap_session() -> McpSession:
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="tap")
    conduct = ClientConduct()
    script: list[tuple[str, Any]] = [
        ("out", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),  # before initialize: the client's fault
        ("in", {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}),
    ]
    rows = []
    for seq, (direction, body) in enumerate(script, 1):
        frame = Frame("message", direction, json.dumps(body).encode(), seq=seq)  # type: ignore[arg-type]
        if direction == "out":
            check_client_frame(frame, conduct)
        else:
            observe_server_frame(frame, conduct)
            frame.flag("unknown-id", "error", "response to unknown request id 1")  # as the server's rules say
        rows.append(TimelineFrame(session=session, **frame_row(frame, 0)))
    TimelineFrame.objects.bulk_create(rows)
    return session


def test_each_rule_broken_says_which_side_broke_it() -> None:
    session = _tap_session()
    rows, _ = verdict_rows(session)
    assert {(r["code"], r["side"]) for r in rows} == {
        ("client-before-initialize", "client"),
        ("unknown-id", "server"),
    }


def test_the_conformance_tab_and_the_html_export_show_a_side_column() -> None:
    session = _tap_session()
    tab = render_to_string("sessions/panels/conformance.html", {"session": session, **report(session)})
    assert "<th>Side</th><th>Rule</th>" in tab
    sides = re.findall(r'<td class="report-side">(\w+)</td>\s*<td><code>([a-z-]+)</code>', tab)
    assert sorted(sides) == [("client", "client-before-initialize"), ("server", "unknown-id")]
    export = render_to_string(
        "sessions/export/head.html", {"session": session, "css": "", "redacted": False, **report(session)}
    )
    assert "<th>Side</th><th>Rule</th>" in export
    assert sorted(re.findall(r"<tr><td>(\w+)</td><td><code>([a-z-]+)</code>", export)) == sorted(sides)
