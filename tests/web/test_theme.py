"""The theme switch is on every page, and its script runs in <head> before anything is painted.

alice is the local person; a visitor has no account.
"""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import AsyncClient
from support.teams import ateam_of
from support.web import logged_in_client, make_user

from sessions.models import McpSession, TimelineFrame

pytestmark = pytest.mark.django_db(transaction=True)

SWITCH = re.compile(r'<select id="theme-switch"[^>]* data-theme-switch')
# Synchronous (neither defer nor async) and before the first stylesheet.
HEAD_SCRIPT = re.compile(r'<head>.*?<script src="[^"]*/theme\.js"></script>.*?<link rel="stylesheet"', re.S)
LINK = re.compile(r"/shared/([A-Za-z0-9_-]{20,})/")


def _themed(html: str) -> bool:
    return bool(HEAD_SCRIPT.search(html) and SWITCH.search(html))


async def test_every_page_has_the_theme_switch_and_sets_the_theme_before_painting() -> None:
    alice = await make_user("alice")
    session = await McpSession.objects.acreate(
        owner=alice, team=await ateam_of(alice), name="closed", config={}, status="closed", last_seq=1
    )
    frame = {"seq": 1, "kind": "state", "direction": "local", "wall": 0, "mono": 0}
    await TimelineFrame.objects.acreate(session=session, **frame)
    client = await logged_in_client(alice)
    made = await client.post(
        f"/s/{session.public_id}/shares/new", {"scope": "all", "expiry": "1d", "audience": "anyone"}
    )
    token = LINK.search(made.content.decode())
    assert token
    pages = ["/", f"/s/{session.public_id}/", "/search?q=x", "/compare", "/account", "/team"]
    for path in pages:
        response = await client.get(path)
        assert response.status_code == 200 and _themed(response.content.decode()), path
    visitor = AsyncClient()
    for path in ("/auth/login", f"/shared/{token.group(1)}/"):
        response = await visitor.get(path)
        assert response.status_code == 200 and _themed(response.content.decode()), path


async def test_a_page_that_is_not_there_is_a_page_with_the_top_bar_but_a_fragment_for_htmx() -> None:
    client = await logged_in_client(await make_user("alice"))
    missing = f"/s/{uuid.uuid4()}/"
    page = await client.get(missing)
    assert page.status_code == 404 and _themed(page.content.decode())
    assert "No such session" in page.content.decode()
    fragment = await client.get(missing, headers={"HX-Request": "true"})
    assert fragment.status_code == 404 and "<html" not in fragment.content.decode()
    assert "No such session" in fragment.content.decode()
