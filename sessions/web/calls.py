"""A request a person sends: any method as raw JSON (or a notification), its call card, and cancelling it."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest
from django.http import HttpResponse, QueryDict
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST

from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.timeline.calls import call_context
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import (
    BadParameter,
    call_card_html,
    error_response,
    float_param,
    owned_session,
    parse_json,
    socket_call,
    socket_form,
)

__all__ = ["call_card", "cancel", "request_from_socket", "send_request"]

MAX_TIMEOUT = 86_400.0  # a day: longer is a typo, not a test


class _Unsendable(BadRequest):
    """A raw request form that asks for nothing sendable: why, and the status a view answers with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _asked(data: QueryDict) -> tuple[str, dict[str, Any] | None, float | None]:
    """The method, params and timeout a raw request form (or a panel's button) asks for."""
    method = data.get("method", "").strip()
    if not method:
        raise _Unsendable("method is required", 400)
    try:
        params = parse_json(data.get("params") or "null")
    except ValueError as exc:
        raise _Unsendable(f"params are not JSON: {exc}", 422) from exc
    if params is not None and not isinstance(params, dict):
        raise _Unsendable("params must be a JSON object", 422)
    try:
        timeout = float_param(data, "timeout", maximum=MAX_TIMEOUT)
    except BadParameter as exc:
        raise _Unsendable(str(exc), 422) from exc
    return method, params, timeout


@require_POST
async def send_request(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Send any request: a method and its params as JSON (the raw editor, and every panel's buttons)."""
    session = await owned_session(request, public_id)
    try:
        method, params, timeout = _asked(request.POST)
    except _Unsendable as exc:
        return error_response(str(exc), exc.status)
    user = await signed_in_user(request)
    try:
        if request.POST.get("notification"):
            return HttpResponse(await _notification_html(session, user.pk, method, params))
        return HttpResponse(await call_card_html(session, user.pk, method, params, timeout))
    except client.CommandFailed as exc:
        return error_response(str(exc), 409)


async def request_from_socket(user_id: int, public_id: Any, message: dict[str, Any]) -> str:
    """A raw request form (or a panel's button) the session page sent over its live socket: its call
    card (or the notification sent) on top of the Requests list, or why not; ``send_request``'s checks."""
    data = socket_form(message)

    async def send(session: McpSession) -> str:
        method, params, timeout = _asked(data)
        if data.get("notification"):
            return await _notification_html(session, user_id, method, params)
        return await call_card_html(session, user_id, method, params, timeout)

    return await socket_call(user_id, public_id, send)


async def _notification_html(
    session: McpSession, user_id: int, method: str, params: dict[str, Any] | None
) -> str:
    """Send a notification (no id: nothing answers it); what was sent, with its frame."""
    done = await client.call(session, m.Notify(method, params, user_id=user_id), timeout=30.0)
    seq = done.outcome.get("seq") if isinstance(done, m.Done) else None
    context = {"session": session, "method": method, "params": params, "seq": seq}
    return render_to_string("sessions/_notification.html", context)


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
