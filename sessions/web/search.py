"""Search every frame of every session a person owns (see sessions/timeline/search.py for the syntax)."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from inspector.http import AuthedRequest
from sessions.timeline.search import results

__all__ = ["search"]


@require_GET
def search(request: AuthedRequest) -> HttpResponse:
    """Search the frames of every session the person owns; a query that cannot be read is a 400 saying why."""
    found = results(request.user, request.GET.get("q", ""))
    return render(request, "search.html", found, status=400 if found["query"].problems else 200)
