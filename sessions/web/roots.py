"""The Roots panel: the session's roots as text, one "URI name" a line, and saving them."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import owned_session

__all__ = ["panel_context", "parse_roots", "roots_save", "roots_text"]


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """Return what the roots panel shows beyond the common context (runs in a worker thread)."""
    return {"roots_text": roots_text(session.roots)}


def roots_text(roots: Any) -> str:
    """Write roots one per line: the URI, then the name if there is one."""
    lines = []
    for root in roots if isinstance(roots, list) else []:
        if isinstance(root, dict):
            lines.append(f"{root.get('uri', '')} {root.get('name', '')}".strip())
    return "\n".join(lines)


def parse_roots(text: str) -> tuple[list[dict[str, str]], list[str]]:
    """Read one root a line (a file:// URI, then an optional name); return (roots, errors)."""
    roots: list[dict[str, str]] = []
    errors: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.strip().split(maxsplit=1)
        if not parts:
            continue
        uri = parts[0]
        if not uri.startswith("file://") or len(uri) <= len("file://"):
            errors.append(f"line {number}: {uri} is not a file:// URI")
            continue
        root = {"uri": uri}
        if len(parts) > 1:
            root["name"] = parts[1].strip()
        roots.append(root)
    return roots, errors


@require_POST
async def roots_save(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Replace the session's roots (the owner tells the server when listChanged was declared)."""
    session = await owned_session(request, public_id)
    text = request.POST.get("roots", "")
    roots, errors = parse_roots(text)
    context: dict[str, Any] = {"session": session, "tab": "roots", "roots_text": text}
    if errors:
        context["roots_errors"] = errors
        return await sync_to_async(render)(request, "sessions/panels/roots.html", context, status=422)
    if session.is_live and session.worker_channel:
        # Sent, not awaited: the owner saves the roots to the database before it replies, and under the
        # sync middleware this async view holds the one thread-sensitive worker until it returns.
        try:
            await client.send_command(session, m.SetRoots(roots))
        except client.CommandFailed as exc:
            context["roots_errors"] = [f"Not saved: {exc}"]
            return await sync_to_async(render)(request, "sessions/panels/roots.html", context, status=409)
        context["roots_note"] = "sent"
    else:
        await McpSession.objects.filter(pk=session.pk).aupdate(roots=roots)
        context["roots_note"] = "saved"
    session.roots = roots
    context["roots_text"] = roots_text(roots)
    return await sync_to_async(render)(request, "sessions/panels/roots.html", context)
