"""The human in the loop: review cards for the server's sampling, elicitation and roots requests."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
from typing import Any

from asgiref.sync import sync_to_async
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from sessions.models import McpSession, PendingReview
from sessions.playground.sampling import offered_tools
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.servers import URL_ELICITATION_REQUIRED
from sessions.web import llm, together
from sessions.web.elicitation_forms import has_errors, validate
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.roots import parse_roots
from sessions.web.shortcuts import owned_session, parse_json

REJECT_MESSAGES = {
    "sampling/createMessage": "User rejected sampling request",
    "elicitation/create": "User rejected elicitation request",
    "roots/list": "User rejected roots request",
}
ELICITATION_ACTIONS = ("accept", "decline", "cancel")
SHOWN_ELICITATIONS = 10  # of a -32042 error's list: more is a server gone wrong, still in the raw JSON


# --- rendering and answering ----------------------------------------------------------------------------


def card_template(review: PendingReview) -> str:
    """The template that renders this request's review card."""
    if review.method == "sampling/createMessage":
        return "sessions/reviews/_sampling.html"
    if review.method == "elicitation/create":
        url = review.is_url_elicitation
        return f"sessions/reviews/_elicitation_{'url' if url else 'form'}.html"
    if review.method == "roots/list":
        return "sessions/reviews/_roots.html"
    return "sessions/reviews/_generic.html"


def http_url(value: Any) -> str:
    """Return the value if it is an http(s) URL, else "": never link javascript: or data: URLs."""
    text = str(value or "")
    return text if text.lower().startswith(("http://", "https://")) else ""


def url_parts(value: Any) -> dict[str, str]:
    """A URL as text in three parts, so the host it really goes to can be emphasised.

    ``before`` is the scheme and any user info (``https://trusted.example@``), ``host`` the host and
    port the browser will reach, ``after`` the rest; a URL that is not http(s) is all ``before``.
    """
    text = str(value or "")
    if not http_url(text):
        return {"before": text, "host": "", "after": ""}
    start = text.index("//") + 2
    end = len(text)
    for stop in "/?#":
        found = text.find(stop, start)
        if found != -1:
            end = min(end, found)
    userinfo, at, host = text[start:end].rpartition("@")
    return {"before": text[:start] + userinfo + at, "host": host, "after": text[end:]}


def url_elicitations(error: Any) -> list[dict[str, Any]]:
    """The URL elicitations of a -32042 error (URLElicitationRequiredError), each as ``elicitation/create``
    params in url mode would be shown: message, url, its parts, elicitationId; ``[]`` for any other error."""
    if not isinstance(error, dict) or error.get("code") != URL_ELICITATION_REQUIRED:
        return []
    data = error.get("data")
    listed = data.get("elicitations") if isinstance(data, dict) else None
    found = []
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and item.get("url"):
            url = str(item["url"])
            found.append(
                {
                    "message": str(item.get("message") or ""),
                    "url": url,
                    "link": http_url(url),
                    "parts": url_parts(url),
                    "elicitation_id": str(item.get("elicitationId") or ""),
                }
            )
    return found[:SHOWN_ELICITATIONS]


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
    draft_models = await sync_to_async(llm.offered_to)(session, [review])
    context = {"session": session, "review": review, "draft_models": draft_models, **extra}
    return await sync_to_async(render)(request, card_template(review), context, status=status)


async def _closed(request: AuthedRequest, session: McpSession, review: PendingReview) -> HttpResponse:
    """Explain that the request no longer waits (withdrawn, or answered elsewhere): nothing was sent."""
    await review.arefresh_from_db()
    context = {"session": session, "review": review}
    return await sync_to_async(render)(request, "sessions/reviews/_closed.html", context, status=409)


async def _send(
    request: AuthedRequest,
    session: McpSession,
    review: PendingReview,
    kind: type[m.Respond] | type[m.Reject],
    **fields: Any,
) -> HttpResponse:
    """Send the person's answer (or refusal) to the owner; say what was sent, or why nothing was."""
    if review.status != PendingReview.Status.WAITING:
        return await _closed(request, session, review)
    user = await signed_in_user(request)
    try:
        await client.call(session, kind(key=review.key, user_id=user.pk, by=user.get_username(), **fields))
    except client.CommandFailed as exc:
        await review.arefresh_from_db()
        if review.status != PendingReview.Status.WAITING or "no pending request" in str(exc):
            return await _closed(request, session, review)
        return await _card(request, session, review, status=409, errors=[f"Not sent: {exc}"])
    action = "rejected" if kind is m.Reject else "answered"
    await together.record(session, user.pk, action, review.method, review.frame_seq)
    context = {"session": session, "review": review, "command": kind.NAME, **fields}
    return await sync_to_async(render)(request, "sessions/reviews/_answered.html", context)


async def _suggested(review: PendingReview) -> dict[str, Any]:
    # roots/list suggests the session's roots: a foreign key read, so not on the event loop.
    return await sync_to_async(lambda: review.suggested_answer)()


@require_POST
async def review_answer(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Answer any request with a raw JSON result (every card's fallback)."""
    session, review = await _review(request, public_id, pk)
    try:
        result = parse_json(request.POST.get("result", ""))
        if not isinstance(result, dict):
            raise ValueError("the answer must be a JSON object")
    except ValueError as exc:
        return await _card(
            request, session, review, status=422, raw_error=f"Not sent: {exc}", raw=request.POST.get("result")
        )
    edited = result != await _suggested(review)
    return await _send(request, session, review, m.Respond, result=result, edited=edited)


@require_POST
async def review_reject(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Refuse a request with JSON-RPC error -1 (the user said no)."""
    session, review = await _review(request, public_id, pk)
    message = REJECT_MESSAGES.get(review.method, "User rejected the request")
    return await _send(request, session, review, m.Reject, code=-1, message=message)


def _tool_use(params: Any, name: str, raw: str, errors: list[str]) -> dict[str, Any] | None:
    """The reply's ``tool_use`` block (2025-11-25 tool-enabled sampling), as the request allows it:
    one of the tools it offers, with a JSON object as input; None when the person chose none."""
    choice = params.get("toolChoice") if isinstance(params, dict) else None
    mode = choice.get("mode") if isinstance(choice, dict) else None
    offered = {tool["name"] for tool in offered_tools(params)}
    if not name:
        if mode == "required" and offered:
            errors.append("The request's toolChoice is required: the reply must use one of its tools.")
        return None
    if mode == "none":
        errors.append("The request's toolChoice is none: the reply may not use a tool.")
        return None
    if name not in offered:
        errors.append(f"{name[:64]!r} is not one of the tools the request offers.")
        return None
    try:
        value = parse_json(raw.strip() or "{}")
    except ValueError as exc:
        errors.append(f"The tool's input is not JSON: {exc}")
        return None
    if not isinstance(value, dict):
        errors.append("The tool's input must be a JSON object.")
        return None
    return {"type": "tool_use", "id": f"toolu_{secrets.token_hex(12)}", "name": name, "input": value}


def _draft_sha(text: str, tool_name: str, tool_input: str) -> str:
    """What a draft said, to tell later whether the person sent it as drafted."""
    return hashlib.sha256("\0".join((text, tool_name, tool_input)).encode()).hexdigest()


@require_POST
async def sampling_answer(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Approve a sampling request with the person's reply, model and stop reason, and the tool it
    uses when the request offers tools."""
    session, review = await _review(request, public_id, pk)
    if review.method != "sampling/createMessage":
        raise Http404("Not a sampling request")
    text = request.POST.get("text", "").replace("\r\n", "\n")
    model = request.POST.get("model", "").strip()
    stop_reason = request.POST.get("stop_reason", "").strip()
    tool_name = request.POST.get("tool_name", "").strip()
    tool_input = request.POST.get("tool_input", "").replace("\r\n", "\n")
    errors = []
    if not model:
        errors.append("Model is required (the name the reply claims to come from).")
    if not stop_reason:
        errors.append("Stop reason is required (endTurn, stopSequence, maxTokens, toolUse, or your own).")
    use = _tool_use(review.params, tool_name, tool_input, errors)
    if errors:
        form = {
            "text": text,
            "model": model,
            "stop_reason": stop_reason,
            "tool_name": tool_name,
            "tool_input": tool_input,
        }
        return await _card(request, session, review, status=422, errors=errors, form=form)
    content: Any = {"type": "text", "text": text}
    if use is not None:
        content = ([content] if text.strip() else []) + [use]
        if stop_reason == "endTurn":
            stop_reason = "toolUse"  # the form's default, for a reply that ends on a tool use
    result = {"role": "assistant", "content": content, "model": model, "stopReason": stop_reason}
    edited = result != await _suggested(review)
    drafted_by = request.POST.get("drafted_by", "").strip()[:200]
    if drafted_by:
        # The frame says who wrote the words: the model alone, or the model and then the person.
        as_drafted = _draft_sha(text, tool_name, tool_input) == request.POST.get("draft_sha", "")
        how = "approved" if as_drafted else "edited and approved"
        user = await signed_in_user(request)
        note = f"drafted by {drafted_by}, {how} by {user.get_username()}"
        return await _send(request, session, review, m.Respond, result=result, edited=True, note=note)
    return await _send(request, session, review, m.Respond, result=result, edited=edited)


@require_POST
async def sampling_draft(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Ask the model the person chose for a reply; show it in the card for them to review."""
    session, review = await _review(request, public_id, pk)
    if review.method != "sampling/createMessage":
        raise Http404("Not a sampling request")
    if review.status != PendingReview.Status.WAITING:
        return await _closed(request, session, review)
    try:
        params = review.params if isinstance(review.params, dict) else {}
        drafted = await llm.draft(session, request.POST.get("draft_model", ""), params)
    except llm.LlmError as exc:
        return await _card(request, session, review, status=422, errors=[f"Draft failed: {exc}"])
    form = {
        "text": drafted["text"],
        "model": drafted["model"],
        "stop_reason": drafted["stop_reason"],
        "tool_name": drafted["tool_name"],
        "tool_input": drafted["tool_input"],
        "more_tools": drafted["more_tools"],
        "drafted_by": drafted["model"],
        "draft_sha": _draft_sha(drafted["text"], drafted["tool_name"], drafted["tool_input"]),
        "draft_ms": drafted["ms"],
        "draft_model": drafted["key"],
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
        return await _send(request, session, review, m.Respond, result={"action": action}, edited=False)
    if review.is_url_elicitation:
        if not http_url(review.params.get("url")):
            return await _card(
                request,
                session,
                review,
                status=422,
                errors=["This URL is not http(s): the inspector will not open it. Decline or cancel."],
            )
        return await _send(request, session, review, m.Respond, result={"action": "accept"}, edited=False)
    content, fields = validate(review.params.get("requestedSchema"), request.POST)
    if has_errors(fields):
        return await _card(request, session, review, status=422, fields=fields)
    suggested = await _suggested(review)
    result = {"action": "accept", "content": content}
    return await _send(request, session, review, m.Respond, result=result, edited=result != suggested)


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
    response = await _send(request, session, review, m.Respond, result={"roots": roots}, edited=changed)
    if changed and response.status_code == 200:
        # The answer already carries the new list; saving it lets later answers (and reconnects) use it.
        # notify=False asks the owner not to announce list_changed for a list the server just received.
        # Not awaited: see roots_save.
        with contextlib.suppress(client.CommandFailed):
            await client.send_command(session, m.SetRoots(roots, notify=False))
    return response
