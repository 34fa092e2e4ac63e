"""A request a person sends: any method as raw JSON (or a notification), its call card, and cancelling it."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.timeline.calls import call_context
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import (
    BadParameter,
    error_response,
    float_param,
    owned_session,
    parse_json,
    render_call,
)

__all__ = ["call_card", "cancel", "send_request"]

MAX_TIMEOUT = 86_400.0  # a day: longer is a typo, not a test


@require_POST
async def send_request(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Send any request: a method and its params as JSON (the raw editor, and every panel's buttons)."""
    session = await owned_session(request, public_id)
    method = request.POST.get("method", "").strip()
    if not method:
        return HttpResponseBadRequest("method is required")
    try:
        params = parse_json(request.POST.get("params") or "null")
    except ValueError as exc:
        return error_response(f"params are not JSON: {exc}", 422)
    if params is not None and not isinstance(params, dict):
        return error_response("params must be a JSON object", 422)
    if request.POST.get("notification"):
        return await _send_notification(request, session, method, params)
    try:
        timeout = float_param(request.POST, "timeout", maximum=MAX_TIMEOUT)
    except BadParameter as exc:
        return error_response(str(exc), 422)
    return await render_call(request, session, method, params, timeout=timeout)


async def _send_notification(
    request: AuthedRequest, session: McpSession, method: str, params: dict[str, Any] | None
) -> HttpResponse:
    """Send a notification (no id: nothing answers it) and show what was sent, with its frame."""
    user = await signed_in_user(request)
    try:
        done = await client.call(session, m.Notify(method, params, user_id=user.pk), timeout=30.0)
    except client.CommandFailed as exc:
        return error_response(str(exc), 409)
    seq = done.outcome.get("seq") if isinstance(done, m.Done) else None
    context = {"session": session, "method": method, "params": params, "seq": seq}
    return await sync_to_async(render)(request, "sessions/_notification.html", context)


@require_GET
async def call_card(request: AuthedRequest, public_id: Any, rpc_id: int) -> HttpResponse:
    """A call card as the timeline has it now (a running card is finished over the live socket, not here)."""
    session = await owned_session(request, public_id)
    context = await sync_to_async(call_context)(session, rpc_id)
    return HttpResponse(await sync_to_async(render_to_string)("sessions/_call.html", context, request))


@require_POST
async def cancel(request: AuthedRequest, public_id: Any, rpc_id: int) -> HttpResponse:
    """Cancel a running request: the server gets notifications/cancelled."""
    session = await owned_session(request, public_id)
    try:
        await client.call(
            session, m.Cancel(rpc_id, request.POST.get("reason") or "cancelled in the inspector")
        )
    except client.CommandFailed as exc:
        return error_response(str(exc), 409)
    context = await sync_to_async(call_context)(session, rpc_id)
    if context["running"]:
        context["outcome"] = {"error": {"code": None, "message": "cancelled"}}
        context["running"] = False
    return HttpResponse(await sync_to_async(render_to_string)("sessions/_call.html", context, request))
