"""The Playground tab: a chat with a configured model over the session's tools. Each request of the
chat takes one step (the model's answer, or one tool call through the session) and renders the log;
while there is another step to take, the log asks for it (htmx, on load)."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Q
from django.http import Http404, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from sessions.models import McpSession, PendingReview
from sessions.playground import turns
from sessions.playground.models import Chat, ChatEntry
from sessions.teams import access
from sessions.teams.models import Role
from sessions.timeline.listings import find_tool
from sessions.web.apps import mount_context
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import MAX_INT, BadParameter, float_param, int_param, parse_json, session_for

__all__ = [
    "add_message",
    "call_of_frame",
    "chat_base",
    "chat_page",
    "chat_settings",
    "decide",
    "decide_call",
    "log_context",
    "new_chat",
    "panel_context",
    "send",
    "settings_of",
    "step",
    "streaming",
    "keep_view_context",
    "view_context",
    "waiting_reviews",
]

MAX_PROMPT = 20_000  # characters of a system prompt
MAX_TOOLS = 500  # tools a chat's settings list (each is two form fields: Django reads 1,000 at most)
MAX_MESSAGE = 50_000  # characters of one message of the person
RECENT_CHATS = 20
DECISIONS = {"approve": ChatEntry.Status.APPROVED, "deny": ChatEntry.Status.DENIED}
MAX_VIEW_CONTEXT_BYTES = 256 * 1024  # one ui/update-model-context a view sends in a chat


def _can_act(session: McpSession, user_id: int) -> bool:
    return Role.allows(access.role_in(user_id, session.team_id), Role.OPERATOR)


def _arguments_json(entry: ChatEntry) -> str:
    if entry.status == ChatEntry.Status.INVALID and entry.raw_arguments:
        return entry.raw_arguments
    return json.dumps(entry.arguments if entry.arguments is not None else {}, indent=2, ensure_ascii=False)


def chat_base(chat: Chat) -> str:
    """Where the chat's own URLs start: on the team's Playground page, or on its session's tab."""
    if chat.team_page:
        return reverse("team_chat", args=[chat.pk])
    return reverse("playground_chat", args=[chat.session.public_id, chat.pk])


def _view_of(entry: ChatEntry, tools: dict[tuple[int, str], Any]) -> dict[str, Any] | None:
    """Where a finished call of a tool with a view shows that view (its session still live), or None;
    ``tools``: the tools looked up so far for this log, so a chat of many calls reads each tool once."""
    session = entry.session
    if entry.kind != ChatEntry.Kind.TOOL or entry.rpc_id is None or session is None:
        return None
    if entry.status != ChatEntry.Status.DONE or session.status != McpSession.Status.READY:
        return None
    key = (session.pk, entry.mcp_name or entry.tool_name)
    if key not in tools:
        tools[key] = find_tool(session, key[1])
    tool = tools[key]
    view = mount_context(session, tool) if tool is not None else None
    return view if view is None else {**view, "rpc_id": entry.rpc_id}


def log_context(session: McpSession | None, chat: Chat, can_act: bool, busy: bool = False) -> dict[str, Any]:
    """What the chat's log shows: its entries (each tool call with the session it ran through), the
    tokens and cost so far, and the step it is waiting for."""
    entries = list(chat.entries.select_related("decided_by", "session"))
    tokens_in = tokens_out = 0
    cost: float | None = None
    tools: dict[tuple[int, str], Any] = {}
    for entry in entries:
        if entry.kind == ChatEntry.Kind.TOOL:
            entry.arguments_json = _arguments_json(entry)  # type: ignore[attr-defined]
        if entry.session is None and entry.kind in (ChatEntry.Kind.TOOL, ChatEntry.Kind.SAMPLING):
            entry.session = chat.session
        entry.view = _view_of(entry, tools)  # type: ignore[attr-defined]
        tokens_in += entry.input_tokens or 0
        tokens_out += entry.output_tokens or 0
        if entry.cost is not None:
            cost = (cost or 0.0) + entry.cost
    work = turns.next_work(entries)
    working_on = ""
    if work == "tools":
        working_on = next(e.mcp_name for e in entries if e.status == ChatEntry.Status.APPROVED)
    config = turns.model_named(chat.model_key, chat.team_id)
    return {
        "session": session,
        "chat": chat,
        "chat_base": chat_base(chat),
        "totals": {"input": tokens_in, "output": tokens_out, "cost": cost},
        "entries": entries,
        "work": work if can_act else "",
        "working_on": working_on,
        "busy": busy,
        "can_act": can_act,
        "model": config,
    }


def _chat_context(session: McpSession, chat: Chat | None, user_id: int) -> dict[str, Any]:
    models, problem = turns.configured(session.team_id)
    can_act = _can_act(session, user_id)
    context: dict[str, Any] = {
        "models": models,
        "models_problem": problem,
        "chats": list(
            Chat.objects.filter(session=session, team_id=session.team_id, team_page=False)[:RECENT_CHATS]
        ),
        "approvals": Chat.Approval.choices,
        "samplings": Chat.Sampling.choices,
        "can_act": can_act,
        "tool_count": len(turns.offered(session)),
        "chat": chat,
    }
    if chat is not None:
        context.update(log_context(session, chat, can_act))
        context["tool_choices"] = turns.tool_choices(chat)
    return context


def _chat_of(session: McpSession, chat_id: int | None) -> Chat | None:
    if chat_id is None or chat_id > MAX_INT:
        return None
    return Chat.objects.filter(pk=chat_id, session=session, team_id=session.team_id, team_page=False).first()


def call_of_frame(session: McpSession, seq: int) -> ChatEntry | None:
    """The chat's tool call (or sampling answer) a frame of the session is the request or answer of,
    if a chat made it: one of the session's tab, or one of the team's page that ran it here."""
    here = Q(session=session) | Q(session__isnull=True, chat__session=session)
    calls = ChatEntry.objects.filter(here, chat__team_id=session.team_id).filter(
        kind__in=(ChatEntry.Kind.TOOL, ChatEntry.Kind.SAMPLING)
    )
    found = calls.filter(Q(request_seq=seq) | Q(response_seq=seq)).select_related("chat").first()
    return found


def panel_context(session: McpSession, request: AuthedRequest, fresh: dict[str, Any]) -> dict[str, Any]:
    """The Playground panel: the chat asked for (``?chat=``), else the newest (runs in a worker thread)."""
    chat = _chat_of(session, int_param(request.GET, "chat"))
    if chat is None:
        chat = Chat.objects.filter(session=session, team_id=session.team_id, team_page=False).first()
    return _chat_context(session, chat, request.user.pk)


def _session_and_chat(user_id: int, public_id: Any, chat_id: int, needed: str) -> tuple[McpSession, Chat]:
    session = session_for(user_id, public_id, needed)
    chat = _chat_of(session, chat_id)
    if chat is None:
        raise Http404("No such chat in this session")
    return session, chat


def settings_of(data: Any, team_id: int | None) -> tuple[dict[str, Any], str]:
    """A chat's settings from a form, and what is wrong with them ("" when nothing)."""
    key = str(data.get("model") or "")
    if turns.model_named(key, team_id) is None:
        return {}, "Pick one of the configured models."
    system = str(data.get("system_prompt") or "")
    if len(system) > MAX_PROMPT:
        return {}, f"The system prompt is longer than {MAX_PROMPT} characters."
    try:
        temperature = float_param(data, "temperature", minimum=0.0, maximum=2.0)
    except BadParameter as exc:
        return {}, f"{exc}."
    approval = str(data.get("approval") or Chat.Approval.WRITES)
    if approval not in Chat.Approval.values:
        return {}, "Pick which tool calls wait for your approval."
    sampling = str(data.get("sampling") or Chat.Sampling.PERSON)
    if sampling not in Chat.Sampling.values:
        return {}, "Pick who answers a tool's sampling requests."
    fields: dict[str, Any] = {"model_key": key, "system_prompt": system, "temperature": temperature}
    fields["approval"] = approval
    fields["sampling"] = sampling
    if "tools_shown" in data:
        # The tools the form listed, less those left ticked: a tool listed later stays offered.
        shown, ticked = data.getlist("tools_shown"), set(data.getlist("tools"))
        if len(shown) > MAX_TOOLS or any(len(name) > 200 for name in shown):
            return {}, f"A chat offers at most {MAX_TOOLS} tools, each named in 200 characters or fewer."
        fields["tools_off"] = sorted(set(shown) - ticked)
    return fields, ""


def _render(
    template: str, context: dict[str, Any], request: AuthedRequest, status: int = 200
) -> HttpResponse:
    return HttpResponse(render_to_string(template, context, request), status=status)


@require_POST
async def new_chat(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Start a chat with the settings of the form; the panel shows it."""
    user = await signed_in_user(request)

    def make() -> HttpResponse:
        session = session_for(user.pk, public_id, Role.OPERATOR)
        fields, problem = settings_of(request.POST, session.team_id)
        if problem:
            context = _chat_context(session, None, user.pk) | {"form_error": problem, "session": session}
            return _render("sessions/panels/playground.html", context, request, 422)
        chat = Chat.objects.create(session=session, team_id=session.team_id, created_by=user, **fields)
        context = _chat_context(session, chat, user.pk) | {"session": session}
        return _render("sessions/panels/playground.html", context, request)

    return await sync_to_async(make)()


@require_GET
async def chat_page(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """One chat of the session, picked from its list."""
    user = await signed_in_user(request)

    def read() -> HttpResponse:
        session, chat = _session_and_chat(user.pk, public_id, chat_id, Role.VIEWER)
        context = _chat_context(session, chat, user.pk) | {"session": session}
        return _render("sessions/panels/playground.html", context, request)

    return await sync_to_async(read)()


@require_GET
async def streaming(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """The text of the answer being streamed now (the log asks while it waits for the model)."""
    user = await signed_in_user(request)

    def read() -> HttpResponse:
        session, chat = _session_and_chat(user.pk, public_id, chat_id, Role.VIEWER)
        context = {"session": session, "chat": chat, "waiting": waiting_reviews(chat)}
        return _render("sessions/playground/_streaming.html", context, request)

    return await sync_to_async(read)()


@require_POST
async def chat_settings(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """Change the chat's model, system prompt, temperature or approvals, for its next answers."""
    user = await signed_in_user(request)

    def change() -> HttpResponse:
        session, chat = _session_and_chat(user.pk, public_id, chat_id, Role.OPERATOR)
        fields, problem = settings_of(request.POST, session.team_id)
        if not problem:
            for name, value in fields.items():
                setattr(chat, name, value)
            chat.save(update_fields=list(fields))
        context = _chat_context(session, chat, user.pk) | {"session": session, "settings_error": problem}
        if not problem:
            context["settings_saved"] = True
        return _render("sessions/panels/playground.html", context, request, 422 if problem else 200)

    return await sync_to_async(change)()


def waiting_reviews(chat: Chat) -> list[PendingReview]:
    """What the chat's sessions wait for a person to answer (a tool's sampling, when the chat leaves it
    to the person; an elicitation): the log links each while a call runs."""
    sessions = [session.pk for session, _ in turns.chat_sessions(chat)]
    waiting = PendingReview.objects.filter(session_id__in=sessions, status=PendingReview.Status.WAITING)
    return list(waiting.select_related("session")[:10])


def add_message(chat: Chat, text: str) -> str:
    """Add the person's message to the chat; what is wrong with it ("" when nothing)."""
    if not text:
        return "Write a message first."
    if len(text) > MAX_MESSAGE:
        return f"A message is at most {MAX_MESSAGE} characters."
    if turns.next_work(list(chat.entries.all())):
        return "The chat is still busy: wait for it, or decide on the tool calls above."
    ChatEntry.objects.create(chat=chat, kind=ChatEntry.Kind.USER, text=text)
    return ""


def decide_call(chat: Chat, call_id: int, decision: str, user: Any) -> None:
    """Approve or deny a call of the chat that waits; a decision another tab made first stands."""
    calls = ChatEntry.objects.filter(chat=chat, pk=call_id, kind=ChatEntry.Kind.TOOL)
    if not calls.exists():
        raise Http404("No such tool call in this chat")
    fields: dict[str, Any] = {"status": DECISIONS[decision], "decided_by": user}
    if decision == "deny":
        fields |= {"is_error": True, "text": f"The person denied this call of {calls[0].tool_name!r}."}
    calls.filter(status=ChatEntry.Status.PENDING).update(**fields)


@require_POST
async def send(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """The person's message; the log that comes back asks for the model's answer."""
    user = await signed_in_user(request)
    text = str(request.POST.get("text") or "").strip()

    def add() -> HttpResponse:
        session, chat = _session_and_chat(user.pk, public_id, chat_id, Role.OPERATOR)
        problem = add_message(chat, text)
        context = log_context(session, chat, True) | {"send_error": problem}
        return _render("sessions/playground/_log.html", context, request, 422 if problem else 200)

    return await sync_to_async(add)()


@require_POST
async def step(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """Take the chat's next step (the model's answer, or one approved tool call) and render the log."""
    user = await signed_in_user(request)
    session, chat = await sync_to_async(_session_and_chat)(user.pk, public_id, chat_id, Role.OPERATOR)
    took = await turns.step(chat, user.pk)
    context = await sync_to_async(log_context)(session, chat, True, not took)
    return await sync_to_async(_render)("sessions/playground/_log.html", context, request)


@require_POST
async def decide(
    request: AuthedRequest, public_id: Any, chat_id: int, call_id: int, decision: str
) -> HttpResponse:
    """Approve or deny a tool call that waits for the person."""
    if decision not in DECISIONS or call_id > MAX_INT:
        raise Http404("No such decision")
    user = await signed_in_user(request)

    @transaction.atomic
    def decide_it() -> HttpResponse:
        session, chat = _session_and_chat(user.pk, public_id, chat_id, Role.OPERATOR)
        decide_call(chat, call_id, decision, user)
        return _render("sessions/playground/_log.html", log_context(session, chat, True), request)

    return await sync_to_async(decide_it)()


def keep_view_context(request: AuthedRequest, chat: Chat, call_id: int) -> JsonResponse:
    """A view's ``ui/update-model-context`` params as the page sends them (``{content?,
    structuredContent?}``, JSON) replace the call's last ones: the model is given them on its next
    turns. A body that is not that is a 400 saying why."""
    if request.content_type != "application/json":
        return _bad_context("send the context as application/json")
    if len(request.body) > MAX_VIEW_CONTEXT_BYTES:
        return _bad_context(f"a view's context is at most {MAX_VIEW_CONTEXT_BYTES // 1024} KiB")
    try:
        body = parse_json(request.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return _bad_context(f"not JSON: {exc}")
    if not isinstance(body, dict) or not isinstance(body.get("content", []), list):
        return _bad_context("the body is {content?: a list of content blocks, structuredContent?: any}")
    context = {key: body[key] for key in ("content", "structuredContent") if key in body}
    calls = ChatEntry.objects.filter(chat=chat, pk=min(call_id, MAX_INT), kind=ChatEntry.Kind.TOOL)
    if not calls.update(view_context=context):
        raise Http404("No such tool call in this chat")
    return JsonResponse({"kept": True})


def _bad_context(why: str) -> JsonResponse:
    return JsonResponse({"message": why}, status=400)


@require_POST
async def view_context(request: AuthedRequest, public_id: Any, chat_id: int, call_id: int) -> JsonResponse:
    """What the view of one of the chat's tool calls asks to give the model (``ui/update-model-context``)."""
    user = await signed_in_user(request)

    def keep() -> JsonResponse:
        _, chat = _session_and_chat(user.pk, public_id, chat_id, Role.OPERATOR)
        return keep_view_context(request, chat, call_id)

    return await sync_to_async(keep)()
