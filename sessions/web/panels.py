"""The session page's feature panels: each one's name and the function that builds what it shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from inspector.http import AuthedRequest
from sessions.models import McpSession
from sessions.timeline import conformance
from sessions.web import logs, prompts, resources, roots, tools
from sessions.web.shortcuts import owned_session

__all__ = ["PANELS", "panel", "panel_context"]

PanelContext = Callable[[McpSession, AuthedRequest, dict[str, Any]], dict[str, Any]]


def _overview(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    return {}


def _conformance(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    return conformance.report(session)


# In the order of the tabs; each renders templates/sessions/panels/<name>.html.
PANELS: dict[str, PanelContext] = {
    "overview": _overview,
    "tools": tools.panel_context,
    "resources": resources.panel_context,
    "prompts": prompts.panel_context,
    "logging": logs.panel_context,
    "roots": roots.panel_context,
    "conformance": _conformance,
}


def panel_context(session: McpSession, tab: str, request: AuthedRequest) -> dict[str, Any]:
    """What a panel shows, with the context every panel shares (runs in a worker thread)."""
    context: dict[str, Any] = {"session": session, "tab": tab, "q": request.GET.get("q", "")}
    context.update(PANELS[tab](session, request, {}))
    return context


@require_GET
async def panel(request: AuthedRequest, public_id: Any, name: str) -> HttpResponse:
    """One feature panel, for tab switches."""
    session = await owned_session(request, public_id)
    if name not in PANELS:
        raise Http404("No such panel")
    context = await sync_to_async(panel_context)(session, name, request)
    html = await sync_to_async(render_to_string)(f"sessions/panels/{name}.html", context, request)
    tabs = render_to_string(
        "sessions/_tabs.html", {"session": session, "tab": name, "panels": list(PANELS), "oob": True}
    )
    return HttpResponse(html + tabs)
