"""The session switcher on every session page: the team's live and recent sessions, with their state."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions.timeline.switcher import switcher_entries
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import owned_session

__all__ = ["session_switcher"]


@require_GET
async def session_switcher(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The sessions of this session's team (the person is a member, or it is a 404), this one marked."""
    session = await owned_session(request, public_id)
    entries = await sync_to_async(switcher_entries)(session.team_id, session.public_id)
    context = {"entries": entries, "session": session}
    return await sync_to_async(render)(request, "sessions/switcher/_list.html", context)
