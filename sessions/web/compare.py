"""Compare what two of a team's sessions offer (see sessions/timeline/compare.py)."""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions.models import McpSession
from sessions.timeline import compare as comparing
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import person_scope

__all__ = ["compare"]


@require_GET
def compare(request: AuthedRequest) -> HttpResponse:
    """Compare what two of the person's sessions offer (see sessions/compare.py)."""
    scope = person_scope(request)
    context: dict[str, Any] = {"choices": comparing.sessions_of(scope.sessions()), "a": None, "b": None}
    wanted = [request.GET.get("a", ""), request.GET.get("b", "")]
    context["preselect"] = next((w for w in wanted if w), "")  # "Compare with…" from a session page
    if all(wanted):
        try:
            a, b = (scope.sessions().get(public_id=uuid.UUID(w)) for w in wanted)
        except (ValueError, McpSession.DoesNotExist):
            context["problem"] = "choose two of your team's sessions"
        else:
            context.update(comparing.compare(a, b))
    return render(request, "compare.html", context, status=422 if "problem" in context else 200)
