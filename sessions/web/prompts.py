"""The Prompts panel: the listing, each prompt's argument form, and getting a prompt."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import BadRequest
from django.http import HttpResponse, QueryDict
from django.views.decorators.http import require_POST

from sessions.models import McpSession
from sessions.web.completion import argument_fields, arguments
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import (
    call_card_html,
    capabilities,
    latest,
    owned_session,
    render_call,
    socket_call,
    socket_form,
)

__all__ = ["get_prompt", "panel_context", "prompt_from_socket"]


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """What the prompts panel shows (runs in a worker thread)."""
    listing = latest(session, "prompts/list", fresh)
    prompts = []
    for i, prompt in enumerate((listing or {}).get("prompts") or []):
        if not isinstance(prompt, dict) or not isinstance(prompt.get("name"), str):
            continue
        arguments = [a for a in prompt.get("arguments") or [] if isinstance(a, dict) and a.get("name")]
        names = [
            (str(a["name"]), str(a.get("description") or ""), bool(a.get("required"))) for a in arguments
        ]
        prompts.append({**prompt, "form_id": f"prompt{i}", "fields": argument_fields(f"prompt{i}", names)})
    return {
        "caps": capabilities(session),
        "prompts": prompts,
        "prompts_listed": listing is not None,
        "prompts_next": (listing or {}).get("nextCursor"),
    }


@require_POST
async def get_prompt(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Get a prompt with the arguments the person filled in (empty ones are left out)."""
    session = await owned_session(request, public_id)
    return await render_call(request, session, "prompts/get", _params(request.POST))


def _params(data: QueryDict) -> dict[str, Any]:
    """The prompts/get params a prompt's form asks for."""
    name = data.get("ref", "")
    if not name:
        raise BadRequest("ref (the prompt's name) is required")
    return {"name": name, "arguments": arguments(data)}


async def prompt_from_socket(user_id: int, public_id: Any, message: dict[str, Any]) -> str:
    """A prompt's form the session page sent over its live socket: ``get_prompt`` over it."""
    data = socket_form(message)

    async def send(session: McpSession) -> str:
        return await call_card_html(session, user_id, "prompts/get", _params(data))

    return await socket_call(user_id, public_id, send)
