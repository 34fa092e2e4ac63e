"""Arguments of prompts and resource templates: their form fields, what was filled in, and completion."""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpResponse, HttpResponseBadRequest, QueryDict
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import owned_session

__all__ = ["ARG_PREFIX", "argument_fields", "arguments", "complete"]

ARG_PREFIX = "arg."

_LIST_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")


def argument_fields(prefix: str, names: list[tuple[str, str, bool]]) -> list[dict[str, Any]]:
    """Form fields for (name, description, required) arguments, with element ids under ``prefix``."""
    return [
        {"name": name, "description": description, "required": required, "id": f"{prefix}-a{j}"}
        for j, (name, description, required) in enumerate(names)
    ]


def arguments(data: QueryDict) -> dict[str, str]:
    """The arguments a person filled in (empty ones are left out)."""
    return {
        key[len(ARG_PREFIX) :]: str(value)
        for key, value in data.items()
        if key.startswith(ARG_PREFIX) and value != ""
    }


@require_POST
async def complete(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Ask the server for completions of the argument being typed; answer with its datalist."""
    session = await owned_session(request, public_id)
    ref_type = request.POST.get("ref_type", "")
    ref = request.POST.get("ref", "")
    trigger_name = request.htmx.trigger_name or request.POST.get("complete", "")
    list_id = f"{request.htmx.trigger or request.POST.get('input', '')}-options"
    if ref_type not in ("ref/prompt", "ref/resource") or not ref or not trigger_name.startswith(ARG_PREFIX):
        return HttpResponseBadRequest("ref_type, ref and the argument being completed are required")
    if not _LIST_ID.match(list_id):
        return HttpResponseBadRequest("bad input id")
    name = trigger_name[len(ARG_PREFIX) :]
    filled = arguments(request.POST)
    params: dict[str, Any] = {
        "ref": {"type": ref_type, ("name" if ref_type == "ref/prompt" else "uri"): ref},
        "argument": {"name": name, "value": request.POST.get(trigger_name, "")},
    }
    others = {k: v for k, v in filled.items() if k != name}
    if others:
        params["context"] = {"arguments": others}
    values: list[str] = []
    try:
        answer = await client.request(session, m.Request("completion/complete", params, wait=5.0))
    except client.CommandFailed:
        answer = None
    outcome = answer.outcome if isinstance(answer, m.Done) else {}
    completion = (outcome.get("result") or {}).get("completion")
    if isinstance(completion, dict):
        values = [str(v) for v in completion.get("values") or [] if isinstance(v, str | int | float)][:100]
    context = {"list_id": list_id, "values": values}
    return HttpResponse(render_to_string("sessions/resources/_datalist.html", context))
