"""The team's Playground page (``/playground``): a chat with a configured model over the tools of one or
several of the team's live sessions, picked when it starts. It runs as a session tab's chat does (one
step a request, ``sessions.playground.turns``); each tool call goes through the session that offers the
tool. Members read the team's chats; operators and admins start them and chat. Every id is looked up in
the person's current team: another team's chat or session is a 404."""

from __future__ import annotations

import uuid
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from sessions.models import McpSession
from sessions.playground import turns
from sessions.playground.models import Chat, ChatServer
from sessions.playground.routing import unique_prefixes
from sessions.teams import access
from sessions.teams.models import Role
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.labels import session_label
from sessions.web.playground import (
    DECISIONS,
    RECENT_CHATS,
    add_message,
    decide_call,
    keep_view_context,
    log_context,
    settings_of,
    waiting_reviews,
)
from sessions.web.shortcuts import MAX_INT, int_param, person_scope, person_scope_async

__all__ = [
    "chat_settings",
    "decide",
    "new_chat",
    "playground_page",
    "send",
    "step",
    "streaming",
    "view_context",
]

MAX_SESSIONS = 10  # sessions one chat may offer the tools of


def _live_sessions(scope: access.Scope) -> list[McpSession]:
    """The team's live sessions whose servers offer tools: what a new chat may be over."""
    live = scope.sessions().filter(status__in=McpSession.LIVE).order_by("-created")[:50]
    return [s for s in live if s.offers_tools and not s.is_tap]


def _chat(scope: access.Scope, chat_id: int | None) -> Chat:
    found = None
    if chat_id is not None and chat_id <= MAX_INT:
        found = Chat.objects.filter(pk=chat_id, team_id=scope.team_id, team_page=True).first()
    if found is None:
        raise Http404("No such chat in this team")
    return found


def _page_context(scope: access.Scope, chat: Chat | None, **extra: Any) -> dict[str, Any]:
    models, problem = turns.configured(scope.team_id)
    can_act = scope.allows(Role.OPERATOR)
    context: dict[str, Any] = {
        "models": models,
        "models_problem": problem,
        "chats": list(Chat.objects.filter(team_id=scope.team_id, team_page=True)[:RECENT_CHATS]),
        "approvals": Chat.Approval.choices,
        "samplings": Chat.Sampling.choices,
        "can_act": can_act,
        "live_sessions": _live_sessions(scope) if can_act else [],
        "max_sessions": MAX_SESSIONS,
        "chat": chat,
        "session": None,
        **extra,
    }
    if chat is not None:
        context["servers"] = list(ChatServer.objects.filter(chat=chat).select_related("session"))
        context.update(log_context(None, chat, can_act))
        context["tool_choices"] = turns.tool_choices(chat)
    return context


@require_GET
def playground_page(request: AuthedRequest, chat_id: int | None = None) -> HttpResponse:
    """The team's chats, a new chat's form, and the chat asked for (else the newest)."""
    scope = person_scope(request)
    wanted = chat_id if chat_id is not None else int_param(request.GET, "chat")
    if wanted is not None:
        chat: Chat | None = _chat(scope, wanted)
    else:
        chat = Chat.objects.filter(team_id=scope.team_id, team_page=True).first()
    return render(request, "playground/page.html", _page_context(scope, chat))


def _picked(request: AuthedRequest, scope: access.Scope) -> list[McpSession]:
    """The sessions the form picked, in the order listed; another team's (or no) session is a 404,
    one of the team's that cannot serve a chat a ``ValueError`` saying so."""
    wanted = list(dict.fromkeys(str(v) for v in request.POST.getlist("session")))
    if not wanted:
        raise ValueError("Pick one or more live sessions whose tools the model is offered.")
    if len(wanted) > MAX_SESSIONS:
        raise ValueError(f"A chat is over at most {MAX_SESSIONS} sessions.")
    team = {str(s.public_id): s for s in scope.sessions().filter(public_id__in=_uuids(wanted))}
    if len(team) != len(wanted):
        raise Http404("No such session in this team")
    live = {str(s.public_id) for s in _live_sessions(scope)}
    for public_id in wanted:
        if public_id not in live:
            raise ValueError(f"{session_label(team[public_id])} is not live with tools: reconnect it first.")
    return [team[public_id] for public_id in wanted]


def _uuids(values: list[str]) -> list[str]:
    found = []
    for value in values:
        try:
            found.append(str(uuid.UUID(value)))
        except ValueError:
            raise Http404("No such session in this team") from None
    return found


@require_POST
def new_chat(request: AuthedRequest) -> HttpResponse:
    """Start a chat over the picked sessions with the form's settings, and open it."""
    scope = person_scope(request, Role.OPERATOR)
    fields, problem = settings_of(request.POST, scope.team_id)
    try:
        picked = _picked(request, scope)
    except ValueError as exc:
        problem = problem or str(exc)
    if problem:
        context = _page_context(scope, None, form_error=problem)
        return render(request, "playground/page.html", context, status=422)
    names = [str((s.server_info or {}).get("name") or s.server_label or "") for s in picked]
    with transaction.atomic():
        chat = Chat.objects.create(
            session=picked[0], team_id=scope.team_id, created_by=request.user, team_page=True, **fields
        )
        ChatServer.objects.bulk_create(
            ChatServer(chat=chat, session=session, prefix=prefix, position=number)
            for number, (session, prefix) in enumerate(zip(picked, unique_prefixes(names), strict=True))
        )
    return redirect(reverse("team_chat", args=[chat.pk]))


@require_POST
def chat_settings(request: AuthedRequest, chat_id: int) -> HttpResponse:
    """Change the chat's model, system prompt, temperature, approvals or sampling, for what comes next."""
    scope = person_scope(request, Role.OPERATOR)
    chat = _chat(scope, chat_id)
    fields, problem = settings_of(request.POST, scope.team_id)
    if not problem:
        for name, value in fields.items():
            setattr(chat, name, value)
        chat.save(update_fields=list(fields))
    context = _page_context(scope, chat, settings_error=problem, settings_saved=not problem)
    return render(request, "playground/_body.html", context, status=422 if problem else 200)


@require_GET
def streaming(request: AuthedRequest, chat_id: int) -> HttpResponse:
    """The text of the answer being streamed now, and what the chat's sessions wait for a person to
    answer while a call runs."""
    chat = _chat(person_scope(request), chat_id)
    context = {"chat": chat, "waiting": waiting_reviews(chat)}
    return render(request, "sessions/playground/_streaming.html", context)


@require_POST
def send(request: AuthedRequest, chat_id: int) -> HttpResponse:
    """The person's message; the log that comes back asks for the model's answer."""
    chat = _chat(person_scope(request, Role.OPERATOR), chat_id)
    problem = add_message(chat, str(request.POST.get("text") or "").strip())
    context = log_context(None, chat, True) | {"send_error": problem}
    return render(request, "sessions/playground/_log.html", context, status=422 if problem else 200)


@require_POST
async def step(request: AuthedRequest, chat_id: int) -> HttpResponse:
    """Take the chat's next step (the model's answer, or one approved tool call) and render the log."""
    scope = await person_scope_async(request, Role.OPERATOR)
    chat = await sync_to_async(_chat)(scope, chat_id)
    user = await signed_in_user(request)
    took = await turns.step(chat, user.pk)
    context = await sync_to_async(log_context)(None, chat, True, not took)
    return await sync_to_async(render)(request, "sessions/playground/_log.html", context)


@require_POST
def decide(request: AuthedRequest, chat_id: int, call_id: int, decision: str) -> HttpResponse:
    """Approve or deny a tool call that waits for the person."""
    if decision not in DECISIONS or call_id > MAX_INT:
        raise Http404("No such decision")
    chat = _chat(person_scope(request, Role.OPERATOR), chat_id)
    with transaction.atomic():
        decide_call(chat, call_id, decision, request.user)
    return render(request, "sessions/playground/_log.html", log_context(None, chat, True))


@require_POST
def view_context(request: AuthedRequest, chat_id: int, call_id: int) -> JsonResponse:
    """What the view of one of the chat's tool calls asks to give the model (``ui/update-model-context``)."""
    return keep_view_context(request, _chat(person_scope(request, Role.OPERATOR), chat_id), call_id)
