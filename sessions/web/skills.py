"""The Skills panel (the ``io.modelcontextprotocol/skills`` extension): the listing, and checking a skill.

Listing reads no skill file (as the extension requires). "Load and verify" reads one skill's
SKILL.md through the session's owner, which checks its size, digest and frontmatter against the
listed entry and records the verdicts; the panel shows the outcome and the content, escaped, marked
as not to be used when it failed.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_POST

from sessions.engine import Skill, offers_skills
from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import error_response, latest, owned_session

__all__ = ["check_skill", "offered", "panel_context"]


def offered(session: McpSession) -> bool:
    """Whether the server declared the skills extension (the panel's tab shows only then)."""
    return offers_skills(session.server_capabilities)


def _entries(listing: dict[str, Any] | None) -> list[Any]:
    entries = (listing or {}).get("skills")
    return entries if isinstance(entries, list) else []


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """What the skills panel shows (runs in a worker thread)."""
    listing = latest(session, "skills/list", fresh)
    skills = []
    for i, entry in enumerate(_entries(listing)):
        skill = Skill.from_entry(entry)
        skills.append(
            {
                "index": i,
                "uri": skill.uri,
                "name": skill.name,
                "description": skill.description,
                "files": skill.files,
                "dynamic": skill.dynamic,
                "total_size": skill.total_size,
                "problems": skill.problems,
            }
        )
    return {
        "skills_offered": offered(session),
        "skills": skills,
        "skills_listed": listing is not None,
        "skills_next": (listing or {}).get("nextCursor"),
    }


def _listed_entry(session: McpSession, uri: str) -> dict[str, Any] | None:
    found = [
        e for e in _entries(latest(session, "skills/list", {})) if isinstance(e, dict) and e.get("uri") == uri
    ]
    return found[0] if found else None


@require_POST
async def check_skill(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Load a listed skill's SKILL.md, verified against its entry; show the outcome and the content."""
    session = await owned_session(request, public_id)
    uri = request.POST.get("uri", "")
    if not uri:
        return HttpResponseBadRequest("uri (the skill's SKILL.md URI) is required")
    entry = await sync_to_async(_listed_entry)(session, uri)
    if entry is None:
        return error_response(f"{uri} is not in the latest skills/list; list the skills again", 409)
    user = await signed_in_user(request)
    command = m.Feature("check_skill", json.dumps(entry), user_id=user.pk)
    try:
        answer = await client.call(session, command, timeout=60.0)
    except client.CommandFailed as exc:
        return error_response(f"cannot load {uri}: {exc}", 409)
    read = answer.outcome.get("read") if isinstance(answer, m.Done) else None
    if not isinstance(read, dict):
        return error_response(f"cannot load {uri}: no answer", 409)
    return await sync_to_async(render)(request, "sessions/skills/_checked.html", {"read": read})
