"""The session page itself: what a reload of a tab's address shows, the tab it opens on, and which
list panels send their list as they first open."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.test import Client
from support.teams import team_of

from sessions.engine import Frame, Verdict
from sessions.frames import frame_row
from sessions.models import McpSession, TimelineFrame
from sessions.teams.models import Membership, Role
from sessions.web.panels import PANELS

pytestmark = pytest.mark.django_db

CAPABILITIES = {
    "tools": {},
    "resources": {"subscribe": True},
    "prompts": {},
    "logging": {},
    "tasks": {"list": {}},
}
# Text a panel shows only when it was given nothing: none of it may appear on this session.
EMPTY = (
    "did not declare",
    "No tools/list yet",
    "No verdicts yet",
    "No answered requests yet",
)


def message(seq: int, direction: str, body: dict[str, Any], **extra: Any) -> TimelineFrame:
    frame = Frame("message", direction, json.dumps(body).encode(), message=body)  # type: ignore[arg-type]
    frame.seq = seq
    frame.rpc_kind = "result" if "result" in body else "request" if "id" in body else "notification"
    frame.method = extra.pop("method", body.get("method"))
    frame.rpc_id = body.get("id")
    for name, value in extra.items():
        setattr(frame, name, value)
    return frame


def session_with_everything(alice: User) -> McpSession:
    """A closed session that negotiated capabilities, listed tools and broke a rule."""
    session = McpSession.objects.create(
        owner=alice,
        team=team_of(alice),
        name="everything",
        status="closed",
        server_capabilities=CAPABILITIES,
        server_info={"name": "mcp-servers/everything", "version": "1"},
        protocol_version="2025-06-18",
        last_seq=4,
    )
    tool = {"name": "echo-the-words", "inputSchema": {"type": "object"}}
    frames = [
        message(1, "out", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}),
        message(
            2,
            "in",
            {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {"capabilities": CAPABILITIES, "protocolVersion": "2025-06-18"},
            },
            method="initialize",
            pair_seq=1,
            latency_ms=12.5,
        ),
        message(3, "out", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        message(
            4,
            "in",
            {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}},
            method="tools/list",
            pair_seq=3,
            latency_ms=3.0,
            verdicts=[Verdict("made-up-rule", "warning", "a rule this test says was broken")],
        ),
    ]
    TimelineFrame.objects.bulk_create(TimelineFrame(session=session, **frame_row(f, 0)) for f in frames)
    return session


def without_tokens(html: str) -> str:
    """The page with its per-response CSRF tokens blanked, so two renders of one panel compare equal."""
    return re.sub(r'(csrfmiddlewaretoken"?[^a-zA-Z0-9]+)[a-zA-Z0-9]{32,}', r"\1", html)


@pytest.mark.parametrize("tab", list(PANELS))
def test_reloading_a_tabs_address_shows_the_same_panel_as_switching_to_it(tab: str) -> None:
    alice = User.objects.create(username="alice")
    session = session_with_everything(alice)
    client = Client()
    client.force_login(alice)
    fragment = client.get(f"/s/{session.public_id}/panel/{tab}")
    assert fragment.status_code == 200
    panel = without_tokens(fragment.content.decode().split('<nav class="tabs" id="tabs"')[0]).strip()
    page = client.get(f"/s/{session.public_id}/?tab={tab}")
    assert page.status_code == 200
    body = without_tokens(page.content.decode())
    assert panel and panel in body
    # The session offers everything but the skills extension, whose panel rightly says so.
    for wrong in EMPTY if tab != "skills" else ():
        assert wrong not in body
    expected = {
        "tools": "echo-the-words",
        "conformance": "made-up-rule",
    }.get(tab)
    if expected:
        assert expected in body


def test_a_call_with_a_string_id_and_no_answer_shows_without_a_cancel_button() -> None:
    """A request with a string id (ids this inspector sends are numbers), unanswered in a live session,
    still draws, without a Cancel it could not send (it was a 500)."""
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="imported", status="ready")
    call = {"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": {"name": "slow"}}
    TimelineFrame.insert_rows(session.pk, [frame_row(message(1, "out", call), 0)])
    McpSession.objects.filter(pk=session.pk).update(last_seq=1)
    client = Client()
    client.force_login(alice)
    page = client.get(f"/s/{session.public_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="call-req-1"' in html and "calls/req-1/cancel" not in html and ">Cancel<" not in html


def test_a_reload_shows_a_running_calls_cancel_button_and_a_finished_ones_output_verdict() -> None:
    """The page draws each call card as the live socket does: a running call this inspector sent can
    be cancelled, and a tools/call result says what it was held to (its outputSchema)."""
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="live", status="ready")
    slow = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow"}}
    shaped = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "shaped"}}
    result = {"content": [], "structuredContent": {"n": "one"}}
    broken = Verdict("output-schema", "error", "structuredContent.n: 'one' is not of type 'integer'")
    frames = [
        message(1, "out", slow),
        message(2, "out", shaped),
        message(3, "in", {"jsonrpc": "2.0", "id": 8, "result": result}, method="tools/call", pair_seq=2),
    ]
    frames[2].verdicts = [broken]
    TimelineFrame.insert_rows(session.pk, [frame_row(f, 0) for f in frames])
    McpSession.objects.filter(pk=session.pk).update(last_seq=3)
    client = Client()
    client.force_login(alice)
    html = client.get(f"/s/{session.public_id}/").content.decode()
    finished = html[html.index('id="call-8"') : html.index('id="call-7"')]  # newest first
    assert "is not of type &#x27;integer&#x27;" in finished
    running = html[html.index('id="call-7"') :]
    assert "/calls/7/cancel" in running and ">Cancel<" in running


def _page(user: User, session: McpSession, path: str = "") -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/s/{session.public_id}/{path}")
    assert response.status_code == 200
    return response.content.decode()


def _selected_tab(html: str) -> str:
    found = re.search(r'id="tab-(\w+)"[^>]*aria-selected="true"', html)
    assert found, "no tab selected"
    return found[1]


def _first_list(html: str) -> str | None:
    """The URL the panel posts to as it loads (its list on first open), if it has one."""
    found = re.search(r'<form hidden data-list-on-open hx-post="([^"]+)" hx-trigger="load"', html)
    return found[1] if found else None


def test_a_ready_session_of_a_server_with_tools_opens_on_tools_which_lists_on_first_open() -> None:
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(
        owner=alice, team=team_of(alice), name="ready", status="ready", server_capabilities=CAPABILITIES
    )
    page = _page(alice, session)
    assert _selected_tab(page) == "tools"
    assert _first_list(page) == f"/s/{session.public_id}/panel/tools/list"
    assert "data-list-on-open-switch checked" in page and "data-tools-when-ready" not in page
    # Every list panel lists on its first open; a tab the person asked for is the one shown.
    for tab in ("resources", "prompts"):
        assert (
            _first_list(_page(alice, session, f"panel/{tab}")) == f"/s/{session.public_id}/panel/{tab}/list"
        )
    assert _selected_tab(_page(alice, session, "?tab=overview")) == "overview"


def test_nothing_is_listed_on_open_once_listed_when_ended_for_a_viewer_or_without_the_capability() -> None:
    alice, carol = User.objects.create(username="alice"), User.objects.create(username="carol")
    team = team_of(alice)
    Membership.objects.create(team=team, user=carol, role=Role.VIEWER)
    listed = session_with_everything(alice)  # tools listed, resources and prompts not
    McpSession.objects.filter(pk=listed.pk).update(status="ready")
    assert _first_list(_page(alice, listed, "panel/tools")) is None
    assert _first_list(_page(alice, listed, "panel/prompts")) is not None
    assert _first_list(_page(carol, listed, "panel/prompts")) is None  # a viewer sends nothing
    McpSession.objects.filter(pk=listed.pk).update(status="closed")
    ended = _page(alice, listed, "panel/prompts")
    assert _first_list(ended) is None and "data-list-on-open-switch" not in ended
    assert _selected_tab(_page(alice, listed)) == "overview"  # an ended session opens on its overview
    bare = McpSession.objects.create(
        owner=alice, team=team, name="no prompts", status="ready", server_capabilities={"logging": {}}
    )
    assert _selected_tab(_page(alice, bare)) == "overview"
    for tab in ("tools", "resources", "prompts"):
        assert _first_list(_page(alice, bare, f"panel/{tab}")) is None


def test_a_page_rendered_while_connecting_moves_to_tools_once_ready_unless_a_tab_was_asked_for() -> None:
    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="slow", status="connecting")
    page = _page(alice, session)
    assert _selected_tab(page) == "overview"
    assert "data-tools-when-ready" in page and "data-offers-tools" not in page
    assert "data-tools-when-ready" not in _page(alice, session, "?tab=overview")
    # The state the live socket pushes once the server has answered says it has tools.
    McpSession.objects.filter(pk=session.pk).update(status="ready", server_capabilities=CAPABILITIES)
    session.refresh_from_db()
    state = render_to_string("sessions/_session_state.html", {"session": session, "oob": True})
    assert "data-offers-tools" in state
