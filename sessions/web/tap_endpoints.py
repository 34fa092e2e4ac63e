"""Tap endpoints on the team page (hosted mode): operators and admins make and revoke them, every member
sees them listed with their upstream and last use. The secret URL is shown once, when made.

The traffic itself never comes here: ``inspector/tap_route.py`` serves ``/tap/<token>/…``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from sessions.runtime import messages as m
from sessions.teams import tap_endpoints
from sessions.teams.models import Role, TapEndpoint, Team
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import person_scope
from sessions.web.team import _page as team_page
from sessions.web.team_forms import TapEndpointForm

__all__ = ["tap_endpoint_create", "tap_endpoint_revoke"]

REVOKED = "tap.revoked"
"""What the tap route's exchanges in flight hear on the endpoint's group (``inspector.tap_route.REVOKED``)."""


def _page(request: AuthedRequest, status: int, **extra: Any) -> HttpResponse:
    return team_page(request, status=status, **extra)


@never_cache
@require_POST
def tap_endpoint_create(request: AuthedRequest) -> HttpResponse:
    """Make a tap endpoint for an upstream the team's egress rules allow; its URL is shown this once."""
    scope = person_scope(request, Role.OPERATOR)
    if not settings.INSPECTOR_HOSTED:
        raise Http404("Tap endpoints are for the hosted mode: locally, run mcp-inspector tap --listen")
    form = TapEndpointForm(request.POST)
    if not form.is_valid():
        return _page(request, 400, tap_form=form)
    team = Team.objects.get(pk=scope.team_id)
    try:
        endpoint, token = tap_endpoints.make(
            team, form.cleaned_data["name"], form.cleaned_data["url"], request.user
        )
    except ValueError as error:
        return _page(request, 400, tap_form=form, tap_error=str(error))
    parts = urlsplit(endpoint.url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    url = request.build_absolute_uri(f"/tap/{token}{path}")
    response = _page(request, 200, new_tap_url=url, new_tap=endpoint)
    response["Referrer-Policy"] = "no-referrer"
    return response


@require_POST
def tap_endpoint_revoke(request: AuthedRequest, endpoint_id: int) -> HttpResponse:
    """Revoke an endpoint: the host is refused from its next request, and streams in flight end now."""
    scope = person_scope(request, Role.OPERATOR)
    endpoint = TapEndpoint.objects.filter(team_id=scope.team_id, pk=endpoint_id).first()
    if endpoint is None:
        raise Http404("No such tap endpoint in this team")
    ended = tap_endpoints.revoke(endpoint)
    layer = get_channel_layer()
    async_to_sync(layer.group_send)(endpoint.group_name, {"type": REVOKED})
    note = "the tap endpoint was revoked"
    for session in ended:
        async_to_sync(layer.group_send)(session.group_name, m.encode_event(m.StateChanged("closed", note)))
    messages.success(request, f"Tap endpoint {endpoint.name} revoked.")
    return redirect("team")
