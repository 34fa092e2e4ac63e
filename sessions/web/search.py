"""Search every frame of the team's sessions (sessions/timeline/search.py has the syntax)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from sessions.timeline.search import results
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import person_scope

__all__ = ["search"]


@require_GET
def search(request: AuthedRequest) -> HttpResponse:
    """Search the frames of the team's sessions; a query that cannot be read is a 400 saying why."""
    found = results(person_scope(request).sessions(), request.GET.get("q", ""))
    return render(request, "search.html", found, status=400 if found["query"].problems else 200)
