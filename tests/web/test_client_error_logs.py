"""A request refused with a 4xx is logged as one line, never a traceback: a bad parameter (a note with no
frame), a role too low (a viewer's POST), a form body over Django's limit. A 500 keeps its traceback."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from support.web import logged_in_client

from inspector.logs import ClientErrorsInOneLine
from sessions.models import McpSession
from sessions.teams.models import Membership, Role, Team

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def console() -> Iterator[io.StringIO]:
    """What the app's configured console handler (settings.LOGGING, its filters) writes meanwhile."""
    [handler] = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    assert isinstance(handler, logging.StreamHandler)
    output = io.StringIO()
    before = handler.setStream(output)
    yield output
    handler.setStream(before)


@database_sync_to_async
def team_session() -> tuple[User, User, McpSession]:
    """bob, an operator, and carol, a viewer, in one team with one session."""
    team = Team.objects.create(name="team A")
    bob, carol = User.objects.create_user("bob"), User.objects.create_user("carol")
    Membership.objects.create(team=team, user=bob, role=Role.OPERATOR)
    Membership.objects.create(team=team, user=carol, role=Role.VIEWER)
    session = McpSession.objects.create(team=team, owner=bob, name="s", config={}, status="closed")
    return bob, carol, session


def one_line(console: io.StringIO, caplog: pytest.LogCaptureFixture, said: str) -> str:
    """The one line logged for the refusal, which says ``said``; no record of it carries a traceback."""
    text = console.getvalue()
    assert "Traceback" not in text, text
    [line] = [line for line in text.splitlines() if said in line]
    records = [r for r in caplog.records if said in r.getMessage()]
    assert records and all(r.exc_info is None and r.exc_text is None for r in records)
    return line


async def test_a_note_with_no_frame_is_a_400_logged_in_one_line(
    console: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    bob, _, session = await team_session()
    client = await logged_in_client(bob)
    response = await client.post(f"/s/{session.public_id}/notes", {"text": "no frame"})
    assert response.status_code == 400
    line = one_line(console, caplog, "frame is required")
    assert f"/s/{session.public_id}/notes" in line


async def test_a_viewer_refused_by_role_is_a_403_logged_in_one_line(
    console: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    _, carol, session = await team_session()
    client = await logged_in_client(carol)
    response = await client.post(f"/s/{session.public_id}/notes", {"frame": "1", "text": "hi"})
    assert response.status_code == 403
    assert "Forbidden (Permission denied)" in one_line(console, caplog, f"/s/{session.public_id}/notes")


async def test_a_form_body_over_django_s_limit_is_a_400_logged_in_one_line(
    console: io.StringIO, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    bob, _, session = await team_session()
    client = await logged_in_client(bob)
    response = await client.post(f"/s/{session.public_id}/notes", {"frame": "1", "text": "x" * 20_000})
    assert response.status_code == 400
    one_line(console, caplog, "Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE")


def test_a_server_error_keeps_its_traceback() -> None:
    try:
        raise RuntimeError("a bug")
    except RuntimeError:
        record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    record.status_code = 500
    assert ClientErrorsInOneLine().filter(record) and record.exc_info is not None
    record.status_code = 404
    assert ClientErrorsInOneLine().filter(record) and record.exc_info is None
