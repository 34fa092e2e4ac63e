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
    """Search the frames of every session the person owns (see sessions/search.py for the syntax)."""
    return render(request, "search.html", results(request.user, request.GET.get("q", "")))
