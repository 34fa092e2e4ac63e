"""Sessions of one server told apart wherever they are listed: search results and the Compare picker."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from support.teams import team_of

from sessions.engine import Frame
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.web.labels import session_label

pytestmark = pytest.mark.django_db

TITLE = {"name": "mcp-servers/everything", "title": "Everything Reference Server", "version": "2.0"}


def _frame(session: McpSession, seq: int, direction: str, body: dict[str, Any]) -> None:
    frame = Frame("message", direction, json.dumps(body).encode(), message=body)  # type: ignore[arg-type]
    # A response carries its request's method, as the engine pairs them.
    frame.seq, frame.method, frame.rpc_id = seq, "tools/list", body.get("id")
    frame.rpc_kind = "result" if "result" in body else "request"
    TimelineFrame.objects.create(session=session, **frame_row(frame, 0))


def everything_sessions(owner: User) -> list[McpSession]:
    """Three sessions of the same server: stdio closed, HTTP live, and a recording; each listed tools."""
    configs: list[tuple[dict[str, Any], str]] = [
        ({"transport": "stdio", "command": "/usr/bin/node", "args": ["/opt/x/dist/index.js"]}, "closed"),
        ({"transport": "http", "url": "https://user:pw@mcp.example.com:8443/mcp?api_key=k"}, "ready"),
        ({"transport": "stdio", "imported_from": "old.jsonl"}, "closed"),
    ]
    made = []
    for i, (config, status) in enumerate(configs):
        name = "old.jsonl" if "imported_from" in config else f"run {i}"
        session = McpSession.objects.create(
            owner=owner, team=team_of(owner), name=name, config=config, status=status, server_info=TITLE
        )
        _frame(session, 1, "out", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        _frame(session, 2, "in", {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})
        made.append(session)
    return made


def test_each_label_names_the_title_target_start_status_and_a_short_id() -> None:
    alice = User.objects.create_user("alice")
    stdio, http, recording = everything_sessions(alice)
    labels = [session_label(s) for s in (stdio, http, recording)]
    assert len(set(labels)) == 3
    assert labels[0].startswith("Everything Reference Server · stdio node index.js · ")
    assert labels[0].endswith(f" · closed · {stdio.public_id.hex[:8]}")
    # A URL's password and query (where keys hide) are left out.
    assert "http mcp.example.com:8443/mcp" in labels[1]
    assert "pw" not in labels[1] and "api_key" not in labels[1]
    assert " · ready · " in labels[1]
    assert "old.jsonl" in labels[2] and " · recording · " in labels[2]
    assert re.search(r" · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d · ", labels[0])


def test_search_results_and_the_compare_picker_tell_sessions_of_one_server_apart() -> None:
    alice = User.objects.create_user("alice")
    made = everything_sessions(alice)
    client = Client()
    client.force_login(alice)
    page = html.unescape(client.get("/compare").content.decode())
    page = page[page.index("<main") :]  # the top bar's theme switch is a select too
    options = re.findall(r"<option value=\"[^\"]+\"[^>]*>([^<]*)</option>", page)
    assert sorted(options[:3]) == sorted(session_label(s) for s in made)
    with CaptureQueriesContext(connection) as queries:
        page = html.unescape(client.get("/search?q=method:tools/list").content.decode())
    for session in made:
        assert session_label(session) in page
    # The labels come with the rows (the search's one query): no query for a row's session.
    own = [q["sql"] for q in queries if q["sql"].startswith('SELECT "mcp_sessions_mcpsession"')]
    assert not own, own
