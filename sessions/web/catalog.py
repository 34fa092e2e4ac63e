"""Starting a server from the team's approved catalog, with the values its admin lets a person fill in."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from sessions.models import McpSession
from sessions.runtime import client
from sessions.teams import policy
from sessions.teams.models import CatalogServer, Role
from sessions.web import together
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import error_response, person_scope_async

__all__ = ["connect_catalog"]


@require_POST
async def connect_catalog(request: AuthedRequest, pk: int) -> HttpResponse:
    """Start a session of a catalog server of the person's team (operators and admins)."""
    scope = await person_scope_async(request, Role.OPERATOR)
    entry = await CatalogServer.objects.filter(team_id=scope.team_id, pk=pk).afirst()
    if entry is None:
        raise Http404("No such server in your team's catalog")
    values: dict[str, Any] = {key: request.POST.get(key, "") for key in request.POST}
    try:
        config = policy.catalog_config(entry, values)
    except policy.CatalogError as exc:
        return error_response(f"{entry.name}: {exc}", 422)
    problem = await sync_to_async(policy.connect_problem)(scope, config)
    if problem:
        return error_response(problem, 409)
    user = await signed_in_user(request)
    session = await McpSession.objects.acreate(
        team_id=scope.team_id,
        owner_id=user.pk,
        name=entry.name,
        config=await sync_to_async(policy.prepared)(scope, config),
    )
    await together.record(session, user.pk, "connected")
    await client.start_session(session)
    url = f"/s/{session.public_id}/"
    if request.htmx:
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)
