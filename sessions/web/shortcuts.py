"""What every feature's views share: the person's session, its parameters read once, a request
through its owner, its call card."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string

from sessions.frames import deeper_than
from sessions.models import McpSession
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.db_threads import in_pages_thread
from sessions.teams import access
from sessions.teams.models import Role
from sessions.timeline.calls import call_context, whole
from sessions.timeline.listings import latest_result
from sessions.web import feed
from sessions.web.http import AuthedRequest, signed_in_user

__all__ = [
    "BadParameter",
    "ask",
    "call_card_html",
    "capabilities",
    "error_response",
    "feature",
    "float_param",
    "int_param",
    "latest",
    "owned_session",
    "parse_json",
    "person_scope",
    "person_scope_async",
    "placed",
    "refusal",
    "render_call",
    "render_panel",
    "session_for",
    "socket_call",
    "socket_form",
]

MAX_INT = 2**63 - 1  # what a BigIntegerField (a frame's seq) holds
# ASCII only: int() and float() also take other scripts' digits ("²" passes isdigit, "١٢" is 12).
INTEGER = re.compile(r"-?[0-9]{1,19}")
DECIMAL = re.compile(r"[-+]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][-+]?[0-9]{1,3})?")


MAX_JSON_DEPTH = 100  # JSON a person types: deeper is a paste gone wrong, not a request


class BadParameter(BadRequest):
    """A query or form parameter that is not what the view takes: a 400 that says which and why."""


def int_param(data: QueryDict, name: str, *, minimum: int = 0, maximum: int = MAX_INT) -> int | None:
    """A whole-number parameter in ``minimum..maximum``; ``None`` when absent or empty."""
    text = str(data.get(name) or "").strip()
    if not text:
        return None
    if not INTEGER.fullmatch(text) or not minimum <= int(text) <= maximum:
        raise BadParameter(f"{name} must be a whole number from {minimum} to {maximum}")
    return int(text)


def float_param(data: QueryDict, name: str, *, minimum: float = 0.0, maximum: float = 1e9) -> float | None:
    """A decimal parameter (finite, in ``minimum..maximum``); ``None`` when absent or empty."""
    text = str(data.get(name) or "").strip()
    if not text:
        return None
    number = float(text) if DECIMAL.fullmatch(text) else math.nan
    if not (math.isfinite(number) and minimum <= number <= maximum):
        raise BadParameter(f"{name} must be a number from {minimum:g} to {maximum:g}")
    return number


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str) -> Any:
    """JSON a person typed or pasted; ``ValueError`` says what is wrong with it.

    Strict (NaN and Infinity are not JSON, and no server could read them back), and nested at most
    ``MAX_JSON_DEPTH`` levels: deeper input is refused here rather than failing wherever it goes.
    """
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if isinstance(value, dict | list) and deeper_than(value, MAX_JSON_DEPTH):
        raise ValueError(f"nested more than {MAX_JSON_DEPTH} levels deep")
    return value


SAFE_METHODS = frozenset({"GET", "HEAD"})


def needed_role(request: HttpRequest) -> str:
    """What a request to a session needs by default: reading is a viewer's, anything else an operator's."""
    return Role.VIEWER if request.method in SAFE_METHODS else Role.OPERATOR


def _refuse(role: str, needed: str) -> PermissionDenied:
    return PermissionDenied(f"Your role in this team is {role}; this needs {needed}.")


async def owned_session(request: AuthedRequest, public_id: Any, needed: str | None = None) -> McpSession:
    """Return the session if the person is a member of its team with the role the request needs.

    Not a member (or no such session): 404, so ids of other teams' sessions stay private. A member
    whose role is too low: 403 that says so. ``needed`` defaults by method (``needed_role``).
    """
    user = await signed_in_user(request)
    return await sync_to_async(session_for)(user.pk, public_id, needed or needed_role(request))


def session_for(user_id: int, public_id: Any, needed: str) -> McpSession:
    """``owned_session``'s lookup, for a view that reads more in the same trip to its thread."""
    found = access.session_with_role(user_id, public_id)
    if found is None:
        raise Http404("No such session")
    session, role = found
    if not Role.allows(role, needed):
        raise _refuse(role, needed)
    return session


def _in_team(scope: access.Scope | None, needed: str) -> access.Scope:
    """The scope if the person belongs to a team with at least ``needed`` there; else a 403 saying why."""
    if scope is None:
        raise PermissionDenied("You are not a member of any team yet: ask a team admin for an invitation.")
    if not scope.allows(needed):
        raise _refuse(scope.role, needed)
    return scope


def person_scope(request: HttpRequest, needed: str = Role.VIEWER) -> access.Scope:
    """The signed-in person's current team and role; 403 if they have none, or a role below ``needed``."""
    return _in_team(access.scope_for(request.user, request.session.get(access.TEAM_KEY)), needed)


async def person_scope_async(request: HttpRequest, needed: str = Role.VIEWER) -> access.Scope:
    """``person_scope`` for an async view."""
    user = await signed_in_user(request)
    chosen = await request.session.aget(access.TEAM_KEY)
    return _in_team(await sync_to_async(access.scope_for)(user, chosen), needed)


def error_response(message: str, status: int) -> HttpResponse:
    """A fragment that says what went wrong, with its status."""
    return HttpResponse(refusal(message), status=status)


_Found = TypeVar("_Found")


async def once_stored(session: McpSession, read: Callable[[], _Found | None]) -> _Found | None:
    """``read()`` (what a stored frame says) on the request's thread; when it finds nothing in a live
    session, again once the owner has stored every frame it has seen: a call card is drawn from the
    owner's answer (``render_call``), not the database, and links to frames that may be a moment
    from it."""
    found = await sync_to_async(read)()
    if found is None and session.is_live:
        with contextlib.suppress(client.NoAnswer, client.CommandFailed):
            await client.call(session, m.Flush(), timeout=3.0)
        found = await sync_to_async(read)()
    return found


async def render_call(
    request: AuthedRequest,
    session: McpSession,
    method: str,
    params: dict[str, Any] | None,
    timeout: float | None = None,
    view: dict[str, Any] | None = None,
) -> HttpResponse:
    """Send a request through the owner and render its call card (see ``call_card_html``)."""
    user = await signed_in_user(request)
    try:
        return HttpResponse(await call_card_html(session, user.pk, method, params, timeout, view))
    except client.CommandFailed as exc:
        return error_response(str(exc), 409)


async def call_card_html(
    session: McpSession,
    user_id: int,
    method: str,
    params: dict[str, Any] | None,
    timeout: float | None = None,
    view: dict[str, Any] | None = None,
) -> str:
    """Send a request for the person through the owner; its call card (finished, or running with
    progress). With ``view`` (an MCP Apps tool's), the place its view opens in follows the card,
    outside it, so the card's live finish leaves it be. Raises ``client.CommandFailed``."""
    # A quick answer comes back here; a slow one shows its running card at once and finishes over
    # the live socket.
    command = m.Request(method, params, timeout=timeout, wait=0.5, stored=False, user_id=user_id)
    answer = await client.request(session, command)
    outcome = answer.outcome if isinstance(answer, m.Done) else None
    rpc_id = answer.rpc_id if isinstance(answer, m.Started) else answer.outcome["rpc_id"]
    sent = {"method": method, "params": params or {}}

    def card() -> str:  # one trip to the thread for both
        context = call_context(session, rpc_id, outcome=outcome, sent=sent)
        if outcome is None:
            context["running"] = True
        return render_to_string("sessions/_call.html", context)

    if whole(outcome):  # the card reads nothing from the database: drawn here, with no trip to a thread
        assert outcome is not None
        html = card()
        # Every other tab's Requests list gets the same card when the request's frame is stored.
        feed.keep(feed.card_key(session, rpc_id, outcome["request_seq"]), html)
    else:
        # On the pages' database thread, which keeps its connection (a live socket's call comes here too).
        html = await in_pages_thread(card)()
    if view is not None:
        html += render_to_string("sessions/apps/_mount.html", {**view, "rpc_id": rpc_id})
    return html


def socket_form(message: dict[str, Any]) -> QueryDict:
    """A form the live socket sent (htmx's ws-send: a JSON object, a list for a repeated name) as a
    POST's ``QueryDict``, so the view's own parsing reads it."""
    data = QueryDict(mutable=True)
    for name, value in message.items():
        if name == "HEADERS":
            continue
        values = value if isinstance(value, list) else [value]
        data.setlist(name, ["" if v is None else str(v) for v in values])
    return data


def placed(target: str, html: str) -> str:
    """``html`` for the live socket to put at the top of ``target`` (out of band, as a form's answer)."""
    return f'<div hx-swap-oob="afterbegin:{target}">{html}</div>'


async def socket_call(user_id: int, public_id: Any, send: Callable[[McpSession], Awaitable[str]]) -> str:
    """What a form sent over the session page's live socket asks, for an operator of its team: ``send``
    with the session (its call card, say) on top of the Requests list, or why not (what the views'
    400, 404, 403 and 409 say)."""
    try:
        session = await in_pages_thread(session_for)(user_id, public_id, Role.OPERATOR)
        html = await send(session)
    except (BadRequest, Http404, PermissionDenied, client.CommandFailed) as exc:
        html = refusal(str(exc))
    return placed("#call-list", html)


def refusal(message: str) -> str:
    """Why a form sent over the live socket was not sent on (``error_response``'s fragment)."""
    return render_to_string("sessions/_error.html", {"message": message})


async def ask(
    request: HttpRequest, session: McpSession, method: str, params: dict[str, Any] | None, wait: float = 10.0
) -> tuple[str | None, Any]:
    """Send a request for the person and wait for it; return why it failed (or None) and its result."""
    user = await signed_in_user(request)
    try:
        answer = await client.request(session, m.Request(method, params, wait=wait, user_id=user.pk))
    except client.CommandFailed as exc:
        return str(exc), None
    if not isinstance(answer, m.Done):
        return f"{method} is still running; its answer will show in the timeline", None
    error = answer.outcome.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else error
        return f"{method} failed: {message}", None
    return None, answer.outcome.get("result")


async def feature(request: HttpRequest, session: McpSession, action: str, value: str = "") -> str | None:
    """Do a revision-aware panel action for the person (see SessionOwner.on_feature); why it failed."""
    user = await signed_in_user(request)
    try:
        await client.call(session, m.Feature(action, value, user_id=user.pk), timeout=30.0)
    except client.CommandFailed as exc:
        return str(exc)
    return None


def capabilities(session: McpSession) -> dict[str, Any]:
    """Which features the server declared: resources (and subscribe), prompts, completions, logging."""
    caps = session.server_capabilities if isinstance(session.server_capabilities, dict) else {}
    resources = caps.get("resources")
    if not isinstance(resources, dict):
        resources = {}
    return {
        "resources": "resources" in caps,
        "subscribe": bool(resources.get("subscribe")),
        "prompts": "prompts" in caps,
        "completions": "completions" in caps,
        "logging": "logging" in caps,
    }


def latest(session: McpSession, method: str, fresh: dict[str, Any]) -> dict[str, Any] | None:
    """The newest result of a listing: what a POST just learnt (``fresh``), else the newest stored one.

    The owner answers before the recorder has stored the response frame, so the timeline may lag by one.
    """
    result = fresh.get(method)
    return result if isinstance(result, dict) else latest_result(session, method)


async def render_panel(
    request: AuthedRequest, session: McpSession, tab: str, context: dict[str, Any], **extra: Any
) -> HttpResponse:
    """Render a feature panel with the context its module built."""
    full = {"session": session, "tab": tab, **context, **extra}
    return await sync_to_async(render)(request, f"sessions/panels/{tab}.html", full)
