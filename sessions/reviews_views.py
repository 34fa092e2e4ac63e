"""The human in the loop: review cards for the server's sampling, elicitation and roots requests."""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from inspector.http import AuthedRequest, signed_in_user
from sessions import commands, llm
from sessions.elicitation_forms import has_errors, validate
from sessions.models import McpSession, PendingReview
from sessions.templatetags.inspector import http_url
from sessions.views import owned_session

REJECT_MESSAGES = {
    "sampling/createMessage": "User rejected sampling request",
    "elicitation/create": "User rejected elicitation request",
    "roots/list": "User rejected roots request",
}
ELICITATION_ACTIONS = ("accept", "decline", "cancel")


def panel_context(session: McpSession, tab: str, request: AuthedRequest) -> dict[str, Any]:
    """Return what the roots panel shows beyond the common context (runs in a worker thread)."""
    return {"roots_text": roots_text(session.roots)}


# --- roots as text: one "URI name" per line -------------------------------------------------------------


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


# --- rendering and answering ----------------------------------------------------------------------------


async def _review(request: AuthedRequest, public_id: Any, pk: int) -> tuple[McpSession, PendingReview]:
    session = await owned_session(request, public_id)
    review = await PendingReview.objects.filter(pk=pk, session=session).afirst()
    if review is None:
        raise Http404("No such request")
    return session, review


async def _card(
    request: AuthedRequest, session: McpSession, review: PendingReview, status: int = 200, **extra: Any
) -> HttpResponse:
    """Render a review card's body again (with errors, or in another step)."""
    context = {"session": session, "review": review, **extra}
    return await sync_to_async(render)(
        request, f"sessions/reviews/{review.template_name}", context, status=status
    )


async def _closed(request: AuthedRequest, session: McpSession, review: PendingReview) -> HttpResponse:
    """Explain that the request no longer waits (withdrawn, or answered elsewhere): nothing was sent."""
    await review.arefresh_from_db()
    context = {"session": session, "review": review}
    return await sync_to_async(render)(request, "sessions/reviews/_closed.html", context, status=409)


async def _send(
    request: AuthedRequest, session: McpSession, review: PendingReview, command: str, **fields: Any
) -> HttpResponse:
    """Send the person's answer (or refusal) to the owner; say what was sent, or why nothing was."""
    if review.status != PendingReview.Status.WAITING:
        return await _closed(request, session, review)
    user = await signed_in_user(request)
    try:
        await commands.call(session, command, key=review.key, user_id=user.pk, **fields)
    except commands.CommandFailed as exc:
        await review.arefresh_from_db()
        if review.status != PendingReview.Status.WAITING or "no pending request" in str(exc):
            return await _closed(request, session, review)
        return await _card(request, session, review, status=409, errors=[f"Not sent: {exc}"])
    context = {"session": session, "review": review, "command": command, **fields}
    return await sync_to_async(render)(request, "sessions/reviews/_answered.html", context)


async def _suggested(review: PendingReview) -> dict[str, Any]:
    # roots/list suggests the session's roots: a foreign key read, so not on the event loop.
    return await sync_to_async(lambda: review.suggested_answer)()


@require_POST
async def review_answer(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Answer any request with a raw JSON result (every card's fallback)."""
    session, review = await _review(request, public_id, pk)
    try:
        result = json.loads(request.POST.get("result", ""))
        if not isinstance(result, dict):
            raise ValueError("the answer must be a JSON object")
    except ValueError as exc:
        return await _card(
            request, session, review, status=422, raw_error=f"Not sent: {exc}", raw=request.POST.get("result")
        )
    edited = result != await _suggested(review)
    return await _send(request, session, review, "respond", result=result, edited=edited)


@require_POST
async def review_reject(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Refuse a request with JSON-RPC error -1 (the user said no)."""
    session, review = await _review(request, public_id, pk)
    message = REJECT_MESSAGES.get(review.method, "User rejected the request")
    return await _send(request, session, review, "reject", code=-1, message=message)


@require_POST
async def sampling_answer(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Approve a sampling request with the person's reply, model and stop reason."""
    session, review = await _review(request, public_id, pk)
    if review.method != "sampling/createMessage":
        raise Http404("Not a sampling request")
    text = request.POST.get("text", "").replace("\r\n", "\n")
    model = request.POST.get("model", "").strip()
    stop_reason = request.POST.get("stop_reason", "").strip()
    errors = []
    if not model:
        errors.append("Model is required (the name the reply claims to come from).")
    if not stop_reason:
        errors.append("Stop reason is required (endTurn, stopSequence, maxTokens, or your own).")
    if errors:
        form = {"text": text, "model": model, "stop_reason": stop_reason}
        return await _card(request, session, review, status=422, errors=errors, form=form)
    result = {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model,
        "stopReason": stop_reason,
    }
    edited = result != await _suggested(review)
    drafted_by = request.POST.get("drafted_by", "").strip()[:200]
    if drafted_by:
        # The frame says who wrote the words: the model alone, or the model and then the person.
        as_drafted = hashlib.sha256(text.encode()).hexdigest() == request.POST.get("draft_sha", "")
        how = "approved" if as_drafted else "edited and approved"
        note = f"drafted by {drafted_by}, {how} by a person"
        return await _send(request, session, review, "respond", result=result, edited=True, note=note)
    return await _send(request, session, review, "respond", result=result, edited=edited)


@require_POST
async def sampling_draft(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Ask the configured model for a reply; show it in the card for the person to review."""
    session, review = await _review(request, public_id, pk)
    if review.method != "sampling/createMessage":
        raise Http404("Not a sampling request")
    if review.status != PendingReview.Status.WAITING:
        return await _closed(request, session, review)
    try:
        drafted = await llm.draft(review.params if isinstance(review.params, dict) else {})
    except llm.LlmError as exc:
        return await _card(request, session, review, status=422, errors=[f"Draft failed: {exc}"])
    form = {
        "text": drafted["text"],
        "model": drafted["model"],
        "stop_reason": drafted["stop_reason"],
        "drafted_by": drafted["model"],
        "draft_sha": hashlib.sha256(drafted["text"].encode()).hexdigest(),
        "draft_ms": drafted["ms"],
    }
    return await _card(request, session, review, form=form)


@require_POST
async def elicitation_answer(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Accept (with the form's typed values), decline or cancel an elicitation."""
    session, review = await _review(request, public_id, pk)
    if review.method != "elicitation/create":
        raise Http404("Not an elicitation")
    action = request.POST.get("action", "")
    if action not in ELICITATION_ACTIONS:
        return await _card(request, session, review, status=422, errors=["Choose Accept, Decline or Cancel."])
    if action != "accept":
        return await _send(request, session, review, "respond", result={"action": action}, edited=False)
    if review.is_url_elicitation:
        if not http_url(review.params.get("url")):
            return await _card(
                request,
                session,
                review,
                status=422,
                errors=["This URL is not http(s): the inspector will not open it. Decline or cancel."],
            )
        return await _send(request, session, review, "respond", result={"action": "accept"}, edited=False)
    content, fields = validate(review.params.get("requestedSchema"), request.POST)
    if has_errors(fields):
        return await _card(request, session, review, status=422, fields=fields)
    suggested = await _suggested(review)
    result = {"action": "accept", "content": content}
    return await _send(request, session, review, "respond", result=result, edited=result != suggested)


@require_POST
async def elicitation_consent(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """The person agrees to open a URL elicitation's link: show the card with the link."""
    session, review = await _review(request, public_id, pk)
    if not review.is_url_elicitation:
        raise Http404("Not a URL elicitation")
    if not http_url(review.params.get("url")):
        return await _card(
            request,
            session,
            review,
            status=422,
            errors=["This URL is not http(s): the inspector will not open it."],
        )
    return await _card(request, session, review, consented=True)


@require_POST
async def roots_answer(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Answer roots/list with the edited roots, and keep them as the session's roots."""
    session, review = await _review(request, public_id, pk)
    if review.method != "roots/list":
        raise Http404("Not a roots request")
    text = request.POST.get("roots", "")
    roots, errors = parse_roots(text)
    if errors:
        return await _card(request, session, review, status=422, errors=errors, roots_text=text)
    changed = roots != session.roots
    response = await _send(request, session, review, "respond", result={"roots": roots}, edited=changed)
    if changed and response.status_code == 200:
        # The answer already carries the new list; saving it lets later answers (and reconnects) use it.
        # notify=False asks the owner not to announce list_changed for a list the server just received.
        # Not awaited: see roots_save.
        with contextlib.suppress(commands.CommandFailed):
            await commands.send_command(session, "set_roots", roots=roots, notify=False)
    return response


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
            await commands.send_command(session, "set_roots", roots=roots)
        except commands.CommandFailed as exc:
            context["roots_errors"] = [f"Not saved: {exc}"]
            return await sync_to_async(render)(request, "sessions/panels/roots.html", context, status=409)
        context["roots_note"] = "sent"
    else:
        await McpSession.objects.filter(pk=session.pk).aupdate(roots=roots)
        context["roots_note"] = "saved"
    session.roots = roots
    context["roots_text"] = roots_text(roots)
    return await sync_to_async(render)(request, "sessions/panels/roots.html", context)
