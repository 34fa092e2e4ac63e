"""The Tools panel: the listing (pages, search), call forms built from input schemas, calls."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from sessions.engine import task_augmentable, tool_view_uri, tool_visibility
from sessions.models import McpSession, TimelineFrame
from sessions.runtime import client
from sessions.runtime.db_threads import in_pages_thread
from sessions.teams.models import Role
from sessions.timeline.listings import MAX_PAGES, find_tool, stored_pages
from sessions.web.apps import mount_context
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.schema_forms import build_form, default_arguments, parse_submission
from sessions.web.shortcuts import (
    ask,
    call_card_html,
    owned_session,
    parse_json,
    placed,
    refusal,
    render_call,
    render_panel,
    session_for,
    socket_form,
)

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _tool_rows(pages: list[dict[str, Any]], q: str) -> list[dict[str, Any]]:
    rows = []
    needle = q.strip().lower()
    for number, page in enumerate(pages, start=1):
        for tool in page.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            annotations = _dict(tool.get("annotations"))
            text = " ".join(str(tool.get(k) or "") for k in ("name", "title", "description")).lower()
            if needle and needle not in text:
                continue
            rows.append(
                {
                    "page": number,
                    "name": str(tool.get("name") or ""),
                    "title": tool.get("title") or annotations.get("title") or "",
                    "description": tool.get("description") or "",
                    "hints": [(k, annotations[k]) for k in HINTS if k in annotations],
                    "view": tool_view_uri(tool),
                    "visibility": tool_visibility(tool),
                }
            )
    return rows


def _listing_context(
    session: McpSession, pages: list[dict[str, Any]], q: str, check_changes: bool = True
) -> dict[str, Any]:
    total = sum(len(p.get("tools") or []) for p in pages)
    changed = False
    if pages and check_changes:
        newest = (
            TimelineFrame.objects.filter(session=session, method="tools/list", direction="in")
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        changed = TimelineFrame.objects.filter(
            session=session, method="notifications/tools/list_changed", seq__gt=newest or 0
        ).exists()
    return {
        "listed": bool(pages),
        "tools": _tool_rows(pages, q),
        "tool_total": total,
        "page_count": len(pages),
        "next_cursor": pages[-1].get("nextCursor") if pages else None,
        "list_changed": changed,
        "q": q,
    }


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """Return what the tools panel shows beyond the common context (runs in a worker thread)."""
    return _listing_context(session, stored_pages(session), request.GET.get("q", ""))


def _form_context(
    session: McpSession,
    tool: dict[str, Any],
    data: Any = None,
    errors: dict[str, str] | None = None,
    raw: str | None = None,
    mode: str = "form",
) -> dict[str, Any]:
    schema = _dict(tool.get("inputSchema"))
    annotations = _dict(tool.get("annotations"))
    return {
        "view": tool_view_uri(tool),
        "visibility": tool_visibility(tool),
        "task_support": _task_support(session, tool),
        "session": session,
        "tool": tool,
        "hints": [(k, annotations[k]) for k in HINTS if k in annotations],
        "hint_title": annotations.get("title"),
        "root": build_form(schema, data=data, errors=errors),
        "raw": raw
        if raw is not None
        else json.dumps(default_arguments(schema), indent=2, ensure_ascii=False),
        "mode": mode,
        "errors": errors or {},
    }


def _task_support(session: McpSession, tool: dict[str, Any]) -> str | None:
    """The tool's ``execution.taskSupport`` when the server declared task-augmented tools/call, else None."""
    if not task_augmentable(_dict(session.server_capabilities), "tools/call"):
        return None
    support = _dict(tool.get("execution")).get("taskSupport")
    return support if isinstance(support, str) else "forbidden"


def _task_param(data: Any, errors: dict[str, str]) -> dict[str, Any] | None:
    """The call's ``task`` field from the form's "run as task" box and time to live (2025-11-25 tasks)."""
    if not data.get("as_task"):
        return None
    ttl = str(data.get("task_ttl") or "").strip()
    if not ttl:
        return {}
    if not ttl.isdigit():
        errors["task_ttl"] = "the time to live is a whole number of milliseconds"
        return None
    return {"ttl": int(ttl)}


@require_POST
async def list_tools(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Send tools/list (the first page, the next page, or every page) and re-render the panel."""
    session = await owned_session(request, public_id)
    mode = request.POST.get("page", "first")
    cursor = request.POST.get("cursor") or None
    pages: list[dict[str, Any]] = []
    if mode in ("next", "all") and cursor:
        pages = await sync_to_async(stored_pages)(session)
    elif mode == "next":
        mode = "first"
    error = ""
    while True:
        problem, result = await ask(request, session, "tools/list", {"cursor": cursor} if cursor else None)
        if problem is not None:
            error = problem
            break
        pages.append(_dict(result))
        cursor = pages[-1].get("nextCursor")
        # A cursor must make progress; a server that repeats one would loop forever.
        if mode != "all" or not cursor or len(pages) >= MAX_PAGES:
            break
    # The recorder may not have stored the answer yet: render from what came back.
    context = await sync_to_async(_listing_context)(session, pages, "", False)
    context["list_error"] = error
    return await render_panel(request, session, "tools", context)


@require_GET
async def tool_form(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The call form of one tool, built from its inputSchema (no request to the server)."""
    session = await owned_session(request, public_id)
    tool = await sync_to_async(find_tool)(session, request.GET.get("name", ""))
    if tool is None:
        raise Http404("No such tool in the newest listing")
    context = await sync_to_async(_form_context)(session, tool)
    context["in_apps"] = request.GET.get("in") == "apps"  # the Apps tab: the call and its view land there
    return await sync_to_async(render)(request, "sessions/tools/_form.html", context)


def _session_and_tool(user_id: int, public_id: Any, name: str) -> tuple[McpSession, dict[str, Any] | None]:
    """The session (for an operator) and the tool the call form names, in one trip to a thread."""
    session = session_for(user_id, public_id, Role.OPERATOR)
    return session, find_tool(session, name)


def _submission(
    session: McpSession, tool: dict[str, Any], data: QueryDict
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """A call form's submission: the call's params; or None, and the form's context with its errors."""
    mode = data.get("mode", "form")
    raw = data.get("raw", "")
    errors: dict[str, str] = {}
    if mode == "raw" and raw.strip():
        try:
            arguments = parse_json(raw)
        except ValueError as exc:
            errors["raw"] = f"not valid JSON: {exc}"
        else:
            if not isinstance(arguments, dict):
                errors["raw"] = "the arguments must be a JSON object"
    else:
        mode = "form"
        arguments, errors = parse_submission(_dict(tool.get("inputSchema")), data)
    task = _task_param(data, errors)
    if errors:
        context = _form_context(
            session, tool, data=data if mode == "form" else None, errors=errors, raw=raw or None, mode=mode
        )
        context["in_apps"] = data.get("in") == "apps"
        return None, context
    params: dict[str, Any] = {"name": data.get("name", ""), "arguments": arguments}
    if task is not None:
        params["task"] = task
    return params, {}


@require_POST
async def call_tool(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Call a tool with the form's arguments (or the raw JSON ones) and render the call card."""
    user = await signed_in_user(request)
    session, tool = await sync_to_async(_session_and_tool)(user.pk, public_id, request.POST.get("name", ""))
    if tool is None:
        raise Http404("No such tool in the newest listing")
    params, form = _submission(session, tool, request.POST)
    if params is None:
        response = HttpResponse(render_to_string("sessions/tools/_form.html", form, request), status=422)
        response["HX-Retarget"] = "#tool-form"
        response["HX-Reswap"] = "outerHTML"
        return response
    return await render_call(request, session, "tools/call", params, view=mount_context(session, tool))


async def call_from_socket(user_id: int, public_id: Any, message: dict[str, Any]) -> str:
    """A tool call the session page's form sent over its live socket, as out-of-band fragments: the
    card on top of the Requests list (or the Apps tab's stage), the form again with its errors, or
    why there is no call. The same checks as ``call_tool``: an operator, a tool of the newest listing.
    """
    data = socket_form(message)
    place = "#app-stage" if data.get("in") == "apps" else "#call-list"
    try:
        session, tool = await in_pages_thread(_session_and_tool)(user_id, public_id, data.get("name", ""))
        if tool is None:
            raise Http404("No such tool in the newest listing")
    except (Http404, PermissionDenied) as exc:
        return placed(place, refusal(str(exc)))
    params, form = _submission(session, tool, data)
    if params is None:
        return render_to_string("sessions/tools/_form.html", {**form, "oob": True})
    try:
        html = await call_card_html(session, user_id, "tools/call", params, view=mount_context(session, tool))
    except client.CommandFailed as exc:
        html = refusal(str(exc))
    return placed(place, html)
