"""What moves a chat on, one step at a time: the model's answer, or one approved tool call run through
the session. A step is one request of the page (htmx asks for the next while there is one), so a slow
model or tool holds one request, never a task nobody watches."""

from __future__ import annotations

import contextlib
import datetime
import functools
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions.engine import tool_visibility
from sessions.models import McpSession
from sessions.playground import costs, sampling
from sessions.playground.models import Chat, ChatEntry, ChatServer
from sessions.playground.routing import Route, combine
from sessions.playground.transcript import conversation, result_text, with_view_contexts
from sessions.providers import ModelConfig, Turn, parse_models, take_turn
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.teams import team_models
from sessions.timeline.listings import stored_pages

__all__ = [
    "TOOL_WAIT",
    "chat_sessions",
    "chat_tools",
    "configured",
    "for_model",
    "listed_tools",
    "model_named",
    "tool_choices",
    "needs_approval",
    "next_work",
    "offered",
    "step",
]

MAX_ANSWERS = 10  # the model's answers to one message of the person before the chat stops and says so
TOOL_WAIT = 60.0  # seconds a tool call may run within a step; a longer one is left to the timeline
STREAM_EVERY = 0.25  # seconds between two writes of a streamed answer's text so far
Status = ChatEntry.Status
Kind = ChatEntry.Kind


@functools.lru_cache(maxsize=4)
def _parsed(text: str, url: str, model: str, key: str) -> tuple[tuple[ModelConfig, ...], str]:
    try:
        costs.parse_prices(text)
        return tuple(parse_models(text, url, model, key)), ""
    except ValueError as exc:
        return (), f"INSPECTOR_LLM_MODELS: {exc}"


def configured(team_id: int | None = None) -> tuple[tuple[ModelConfig, ...], str]:
    """The models a chat may use (the installation's, then the team's own), and what is wrong with the
    installation's configuration ("" when nothing)."""
    found, problem = _parsed(
        settings.INSPECTOR_LLM_MODELS,
        settings.INSPECTOR_LLM_URL,
        settings.INSPECTOR_LLM_MODEL,
        settings.INSPECTOR_LLM_API_KEY,
    )
    if team_id is not None:
        found = (*found, *team_models.configs_of(team_id, {config.key for config in found}))
    return found, problem


def model_named(key: str, team_id: int | None = None) -> ModelConfig | None:
    return next((config for config in configured(team_id)[0] if config.key == key), None)


def offered(session: McpSession) -> list[dict[str, Any]]:
    """The tools of the session's newest listing: what the model is offered."""
    listed = [t for page in stored_pages(session) for t in page.get("tools") or [] if isinstance(t, dict)]
    return for_model(listed)


def for_model(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tools a model may see: not those an MCP App keeps for its views (visibility ["app"])."""
    return [t for t in tools if "model" in tool_visibility(t)]


def chat_sessions(chat: Chat) -> list[tuple[McpSession, str]]:
    """The sessions whose tools the chat offers, each with its tools' prefix (for a name two offer)."""
    servers = list(ChatServer.objects.filter(chat=chat).select_related("session"))
    if servers:
        return [(server.session, server.prefix) for server in servers]
    session = McpSession.objects.get(pk=chat.session_id)
    return [(session, "")]


async def chat_tools(chat: Chat, user_id: int) -> tuple[list[dict[str, Any]], dict[str, Route]]:
    """The tools the model is offered, from each of the chat's sessions, and where each name runs."""
    listings = []
    for session, prefix in await sync_to_async(chat_sessions)(chat):
        if chat.team_page and not session.is_live:
            continue  # its calls could not run; a tab's chat says so on its own page
        listings.append((session.pk, prefix, await listed_tools(session, user_id)))
    tools, routes = combine(listings)
    off = set(chat.tools_off or ())
    return [t for t in tools if t["name"] not in off], {k: v for k, v in routes.items() if k not in off}


def tool_choices(chat: Chat) -> list[dict[str, Any]]:
    """Each tool the chat's sessions list as the model would see it, and whether it is offered."""
    listings = [(s.pk, prefix, offered(s)) for s, prefix in chat_sessions(chat)]
    off = set(chat.tools_off or ())
    return [
        {"name": t["name"], "description": str(t.get("description") or ""), "on": t["name"] not in off}
        for t in combine(listings)[0]
    ]


def needs_approval(chat: Chat, tool: dict[str, Any] | None) -> bool:
    """Whether a call of ``tool`` waits for the person: by default, unless the server marked it read-only."""
    if chat.approval == Chat.Approval.ALL:
        return True
    if chat.approval == Chat.Approval.NONE:
        return False
    annotations = tool.get("annotations") if tool else None
    return not (isinstance(annotations, dict) and annotations.get("readOnlyHint") is True)


def next_work(entries: list[ChatEntry]) -> str:
    """What the chat's next step is: ``tools`` (an approved call to run), ``model`` (the model's turn)
    or "" (the person's turn: a message, or a decision on a call)."""
    calls = [e for e in entries if e.kind == Kind.TOOL]
    if any(e.status == Status.APPROVED for e in calls):
        return "tools"
    said = [e for e in entries if e.kind != Kind.SAMPLING]  # a tool's own exchange with the model
    if any(e.status == Status.PENDING for e in calls) or not said:
        return ""
    return "model" if said[-1].kind in (Kind.USER, Kind.TOOL) else ""


def _claim(chat_id: int, seconds: float) -> bool:
    now = timezone.now()
    free = Q(busy_until__isnull=True) | Q(busy_until__lt=now)
    until = now + datetime.timedelta(seconds=seconds)
    return Chat.objects.filter(free, pk=chat_id).update(busy_until=until) == 1


def _release(chat_id: int) -> None:
    Chat.objects.filter(pk=chat_id).update(busy_until=None)


def _error(chat: Chat, text: str) -> None:
    ChatEntry.objects.create(chat=chat, kind=Kind.ERROR, text=text)


async def step(chat: Chat, user_id: int) -> bool:
    """Take the chat's next step; False when another request is taking one now."""
    config = await sync_to_async(model_named)(chat.model_key, chat.team_id)
    # A tool call may wait on the model too, answering the tool's sampling requests.
    hold = (config.timeout if config else 0.0) + TOOL_WAIT + 30.0
    if not await sync_to_async(_claim)(chat.pk, hold):
        return False
    try:
        entries = await sync_to_async(lambda: list(chat.entries.all()))()
        work = next_work(entries)
        if work == "tools":
            entry = next(e for e in entries if e.status == Status.APPROVED)
            await _run_tool(chat, entry, config, user_id)
        elif work == "model":
            await _model_turn(chat, config, entries, user_id)
    finally:
        await sync_to_async(_release)(chat.pk)
    return True


async def _model_turn(chat: Chat, config: ModelConfig | None, entries: list[ChatEntry], user_id: int) -> None:
    if config is None:
        await sync_to_async(_error)(
            chat, f"The model {chat.model_key!r} is not configured any more: pick another."
        )
        return
    since_person = next((i for i in range(len(entries) - 1, -1, -1) if entries[i].kind == Kind.USER), -1)
    answers = sum(1 for e in entries[since_person + 1 :] if e.kind == Kind.ASSISTANT)
    if answers >= MAX_ANSWERS:
        await sync_to_async(_error)(
            chat, f"Stopped: the model answered {answers} times to one message. Say something to go on."
        )
        return
    tools, routes = await chat_tools(chat, user_id)

    async def streamed(text: str) -> None:
        await Chat.objects.filter(pk=chat.pk).aupdate(streaming=text)

    try:
        # A write per chunk would be one per token: the page asks twice a second.
        turn = await take_turn(
            config,
            with_view_contexts(chat.system_prompt, entries),
            conversation(entries),
            tools,
            chat.temperature,
            on_text=streamed,
            text_every=STREAM_EVERY,
        )
    finally:
        await Chat.objects.filter(pk=chat.pk).aupdate(streaming="")
    if turn.reply is None:
        await sync_to_async(_error)(chat, turn.error)
        return
    await sync_to_async(_record_turn)(chat, config, turn, routes)


async def listed_tools(session: McpSession, user_id: int) -> list[dict[str, Any]]:
    """The tools to offer the model: the session's newest listing, listed through the session (so the
    listing is on its timeline too) when there is none yet."""
    tools = await sync_to_async(offered)(session)
    if not tools and session.is_live and "tools" in (session.server_capabilities or {}):
        with contextlib.suppress(client.CommandFailed, ConnectionError):
            await client.request(session, m.Request("tools/list", None, wait=10.0, user_id=user_id))
        tools = await sync_to_async(offered)(session)
    return tools


@transaction.atomic
def _record_turn(chat: Chat, config: ModelConfig, turn: Turn, routes: dict[str, Route]) -> None:
    """The model's answer, and a card for each tool call it made: waiting for approval, approved, or
    unable to run (no such tool, arguments that are not a JSON object), which the model is told."""
    reply = turn.reply
    assert reply is not None
    ChatEntry.objects.create(
        chat=chat,
        kind=Kind.ASSISTANT,
        text=reply.text,
        model_name=reply.model[:200],
        input_tokens=reply.input_tokens,
        output_tokens=reply.output_tokens,
        cost=costs.cost_of(config.key, reply.input_tokens, reply.output_tokens),
        ms=turn.ms,
    )
    for judged in turn.calls:
        call = judged.call
        entry = ChatEntry(
            chat=chat,
            kind=Kind.TOOL,
            call_id=call.id[:200],
            tool_name=call.name[:200],
            mcp_name=judged.mcp_name,
            arguments=call.arguments,
            raw_arguments=call.raw,
        )
        route = routes.get(judged.mcp_name)
        if route is not None:
            entry.mcp_name, entry.session_id = route.mcp_name, route.session_id
        if judged.problem or route is None:
            entry.status, entry.is_error, entry.text = Status.INVALID, True, judged.problem
        else:
            entry.status = Status.PENDING if needs_approval(chat, route.tool) else Status.APPROVED
        entry.save()


async def _run_tool(chat: Chat, entry: ChatEntry, config: ModelConfig | None, user_id: int) -> None:
    """Call the tool through its session's owner, as the Tools panel does: on the timeline, judged; a
    sampling request it sends meanwhile is answered by the model when the chat says so."""
    session = await McpSession.objects.aget(pk=entry.session_id or chat.session_id)
    params = {
        "name": entry.mcp_name,
        "arguments": entry.arguments if isinstance(entry.arguments, dict) else {},
    }
    command = m.Request("tools/call", params, wait=TOOL_WAIT, stored=False, user_id=user_id)
    entry.status, entry.is_error = Status.FAILED, True
    try:
        sent = client.request(session, command)
        answer = await sampling.answered_while(chat, session, config, user_id, sent)
    except (client.CommandFailed, ConnectionError) as exc:
        entry.text = f"The call could not be sent: {exc}"
    else:
        if isinstance(answer, m.Started):
            entry.rpc_id = answer.rpc_id
            entry.text = f"Still running after {TOOL_WAIT:g} s: its answer will be on the timeline."
        else:
            outcome = answer.outcome
            error = outcome.get("error")
            result = outcome.get("result")
            entry.rpc_id = outcome.get("rpc_id")
            entry.request_seq = outcome.get("request_seq")
            entry.response_seq = outcome.get("response_seq")
            entry.latency_ms = outcome.get("latency_ms")
            entry.verdicts = outcome.get("verdicts") or []
            entry.result = {"error": error} if error is not None else result
            entry.is_error = error is not None or (isinstance(result, dict) and result.get("isError") is True)
            entry.status = Status.FAILED if entry.is_error else Status.DONE
            entry.text = result_text(result, error)
    await sync_to_async(entry.save)()
