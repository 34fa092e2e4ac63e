"""The session page's feature panels: each one's name and the function that builds what it shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from sessions.models import McpSession
from sessions.teams import access
from sessions.teams.models import Role
from sessions.timeline import conformance, overview, plots
from sessions.web import apps, logs, playground, prompts, resources, roots, skills, tasks, together, tools
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import ask, owned_session, render_panel

__all__ = ["PANELS", "first_list", "list_items", "list_tools", "panel", "panel_context", "visible"]

PanelContext = Callable[[McpSession, AuthedRequest, dict[str, Any]], dict[str, Any]]


def _overview(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    return overview.overview(session)


def _conformance(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    return {**conformance.report(session), **plots.plots(session)}


# In the order of the tabs; each renders templates/sessions/panels/<name>.html.
PANELS: dict[str, PanelContext] = {
    "overview": _overview,
    "tools": tools.panel_context,
    "apps": apps.panel_context,
    "resources": resources.panel_context,
    "prompts": prompts.panel_context,
    "tasks": tasks.panel_context,
    "logging": logs.panel_context,
    "roots": roots.panel_context,
    "skills": skills.panel_context,
    "playground": playground.panel_context,
    "conformance": _conformance,
    "activity": together.activity_context,
}
# Panels for features a server may not offer at all: their tab shows only when it does.
OPTIONAL: dict[str, Callable[[McpSession], bool]] = {"skills": skills.offered, "apps": apps.offered}
# A tap session is driven by its host: only the panels that show what happened, none that act.
TAP_PANELS = ("overview", "conformance", "activity")


def visible(session: McpSession) -> list[str]:
    """The tabs the session page shows."""
    if session.is_tap:
        return list(TAP_PANELS)
    return [name for name in PANELS if name not in OPTIONAL or OPTIONAL[name](session)]


# What a panel's list button asks for: the method, and the panel that shows its pages.
LISTS = {
    "resources": ("resources/list", "resources"),
    "templates": ("resources/templates/list", "resources"),
    "prompts": ("prompts/list", "prompts"),
    "skills": ("skills/list", "skills"),
}


# The panels that list by themselves the first time they open in a ready session (unless the person
# turned "List on open" off): the capability the server must have declared, and the context keys that
# say a list is already there.
LISTS_ON_OPEN: dict[str, tuple[str, tuple[str, ...]]] = {
    "tools": ("tools", ("listed",)),
    "resources": ("resources", ("resources_listed", "templates_listed")),
    "prompts": ("prompts", ("prompts_listed",)),
}
# What that first list asks for: what the panel's List buttons ask for, in one request.
FIRST_LISTS = {"resources": ("resources", "templates"), "prompts": ("prompts",)}


def lists_on_open(session: McpSession, tab: str, context: dict[str, Any], user_id: int) -> bool:
    """Whether the panel sends its list as it opens: nothing listed yet, in a ready session (not a tap)
    whose server declared the capability, for a person who may send requests."""
    capability, listed = LISTS_ON_OPEN.get(tab, ("", ()))
    caps = session.server_capabilities if isinstance(session.server_capabilities, dict) else {}
    if not capability or capability not in caps or any(context.get(key) for key in listed):
        return False
    if session.status != McpSession.Status.READY or session.is_tap:
        return False
    return Role.allows(access.role_in(user_id, session.team_id), Role.OPERATOR)


def panel_context(session: McpSession, tab: str, request: AuthedRequest) -> dict[str, Any]:
    """What a panel shows, with the context every panel shares (runs in a worker thread)."""
    context: dict[str, Any] = {"session": session, "tab": tab, "q": request.GET.get("q", "")}
    context.update(PANELS[tab](session, request, {}))
    context["list_on_open"] = lists_on_open(session, tab, context, request.user.pk)
    return context


@require_GET
async def panel(request: AuthedRequest, public_id: Any, name: str) -> HttpResponse:
    """One feature panel, for tab switches."""
    session = await owned_session(request, public_id)
    if name not in PANELS or (session.is_tap and name not in TAP_PANELS):
        raise Http404("No such panel")
    context = await sync_to_async(panel_context)(session, name, request)
    html = await sync_to_async(render_to_string)(f"sessions/panels/{name}.html", context, request)
    names = await sync_to_async(visible)(session)  # the Apps tab's presence reads the tool listing
    tabs = render_to_string(
        "sessions/_tabs.html", {"session": session, "tab": name, "panels": names, "oob": True}
    )
    return HttpResponse(html + tabs)


@require_POST
async def list_items(request: AuthedRequest, public_id: Any, kind: str) -> HttpResponse:
    """List resources, templates or prompts (a page at a time: the cursor asks for the next one)."""
    session = await owned_session(request, public_id)
    if kind not in LISTS:
        raise Http404("No such list")
    method, tab = LISTS[kind]
    cursor = request.POST.get("cursor", "")
    problem, result = await ask(request, session, method, {"cursor": cursor} if cursor else None)
    fresh = {method: result} if isinstance(result, dict) else {}
    context = await sync_to_async(PANELS[tab])(session, request, fresh)
    return await render_panel(
        request, session, tab, context, list_error=problem, page_kind=kind if cursor else ""
    )


@require_POST
async def list_tools(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """tools/list (``tools.list_tools``), with the tabs again when a listed tool has a view: the Apps tab
    shows from that listing on."""
    response = await tools.list_tools(request, public_id)
    session = await owned_session(request, public_id)
    names = await sync_to_async(visible)(session)
    if "apps" in names:
        # Not an out-of-band swap: a first list whose panel was redrawn meanwhile is swapped from a
        # detached form, where htmx finds no #tabs; static/inspector/apps.js puts these in place.
        tabs = render_to_string(
            "sessions/_tabs_again.html", {"session": session, "tab": "tools", "panels": names}
        )
        response.content += tabs.encode()
    return response


@require_POST
async def first_list(request: AuthedRequest, public_id: Any, name: str) -> HttpResponse:
    """A panel's list on its first open: what its List buttons ask for, in one request."""
    if name == "tools":
        return await list_tools(request, public_id)
    session = await owned_session(request, public_id)
    if name not in FIRST_LISTS:
        raise Http404("No such list")
    fresh: dict[str, Any] = {}
    problems = []
    for kind in FIRST_LISTS[name]:
        method, _ = LISTS[kind]
        problem, result = await ask(request, session, method, None)
        if isinstance(result, dict):
            fresh[method] = result
        if problem is not None:
            problems.append(problem)
    context = await sync_to_async(PANELS[name])(session, request, fresh)
    return await render_panel(request, session, name, context, list_error="; ".join(problems))
