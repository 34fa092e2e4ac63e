"""A chat's and an eval run's downloads (JSON, one HTML page) and read-only share links, redacted.

Members of the team download; operators and admins make and revoke links. A link's page is the HTML
export shown in place (no script): ``/shared-item/<token>/``, its token shown once and kept as its
SHA-256, stripped from the access logs as a session share's is. A team link needs a signed-in member of
the team; anyone else gets the 404 an unknown token gets.
"""

from __future__ import annotations

import datetime
import json
import secrets
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from sessions.playground import exports
from sessions.playground.models import Chat, EvalRun, ItemShare
from sessions.teams import access
from sessions.teams.models import Role, Team, token_digest
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import MAX_INT, int_param, person_scope, session_for
from sessions.web.timeline import attachment

__all__ = [
    "chat_export",
    "chat_export_html",
    "chat_shares",
    "item_share_revoke",
    "run_export",
    "run_export_html",
    "run_shares",
    "shared_item",
]

SECURITY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _chat(user_id: int, public_id: Any, chat_id: int, needed: str) -> Chat:
    session = session_for(user_id, public_id, needed)
    chat = None
    if chat_id <= MAX_INT:
        chat = Chat.objects.filter(pk=chat_id, session=session, team_id=session.team_id).first()
    if chat is None:
        raise Http404("No such chat in this session")
    return chat


def _run(request: AuthedRequest, run_id: int, needed: str) -> EvalRun:
    scope = person_scope(request, needed)
    run = EvalRun.objects.filter(pk=run_id, team_id=scope.team_id).first() if run_id <= MAX_INT else None
    if run is None:
        raise Http404("No such eval run in this team")
    return run


def _json(document: dict[str, Any], filename: str) -> HttpResponse:
    body = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    return attachment(HttpResponse(body, content_type="application/json"), filename)


def _html(text: str, filename: str | None = None) -> HttpResponse:
    response = HttpResponse(text, content_type="text/html; charset=utf-8")
    response["Content-Security-Policy"] = SECURITY
    return attachment(response, filename) if filename else response


@require_GET
def chat_export(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """The chat as JSON, redacted."""
    chat = _chat(request.user.pk, public_id, chat_id, Role.VIEWER)
    return _json(exports.chat_document(chat), f"mcp-chat-{chat.pk}.json")


@require_GET
def chat_export_html(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """The chat as one HTML page with no script, redacted."""
    chat = _chat(request.user.pk, public_id, chat_id, Role.VIEWER)
    return _html(exports.chat_html(chat), f"mcp-chat-{chat.pk}.html")


@require_GET
def run_export(request: AuthedRequest, run_id: int) -> HttpResponse:
    """The eval run as JSON, redacted."""
    run = _run(request, run_id, Role.VIEWER)
    return _json(exports.run_document(run), f"mcp-eval-run-{run.pk}.json")


@require_GET
def run_export_html(request: AuthedRequest, run_id: int) -> HttpResponse:
    """The eval run as one HTML page with no script, redacted."""
    run = _run(request, run_id, Role.VIEWER)
    return _html(exports.run_html(run), f"mcp-eval-run-{run.pk}.html")


def _shares_page(
    request: AuthedRequest, thing: Chat | EvalRun, back: str, status: int = 200, **extra: Any
) -> HttpResponse:
    found = ItemShare.objects.filter(team_id=thing.team_id)
    found = found.filter(chat=thing) if isinstance(thing, Chat) else found.filter(run=thing)
    team = Team.objects.get(pk=thing.team_id)
    role = access.role_in(request.user.pk, thing.team_id)
    context = {
        "thing": thing,
        "is_chat": isinstance(thing, Chat),
        "back": back,
        "shares": list(found.select_related("created_by")[:100]),
        "may_share": Role.allows(role, Role.OPERATOR),
        "public_allowed": team.allow_public_shares,
        **extra,
    }
    return render(request, "exports/shares.html", context, status=status)


def _make(request: AuthedRequest, thing: Chat | EvalRun, back: str) -> HttpResponse:
    audience = str(request.POST.get("audience") or ItemShare.Audience.TEAM)
    if audience not in ItemShare.Audience.values:
        return _shares_page(request, thing, back, 400, share_error="Choose the team or anyone with the link.")
    if audience == ItemShare.Audience.ANYONE and not Team.objects.get(pk=thing.team_id).allow_public_shares:
        return _shares_page(
            request, thing, back, 400, share_error="This team allows links for its members only."
        )
    days = int_param(request.POST, "days", minimum=0, maximum=365)
    token = secrets.token_urlsafe(32)
    ItemShare.objects.create(
        team_id=thing.team_id,
        chat=thing if isinstance(thing, Chat) else None,
        run=thing if isinstance(thing, EvalRun) else None,
        digest=token_digest(token),
        audience=audience,
        created_by=request.user,
        expires=timezone.now() + datetime.timedelta(days=days) if days else None,
    )
    link = request.build_absolute_uri(reverse("shared_item", args=[token]))
    return _shares_page(request, thing, back, new_link=link)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def chat_shares(request: AuthedRequest, public_id: Any, chat_id: int) -> HttpResponse:
    """The chat's share links; a POST (operators, admins) makes one, shown this once."""
    needed = Role.OPERATOR if request.method == "POST" else Role.VIEWER
    chat = _chat(request.user.pk, public_id, chat_id, needed)
    if chat.team_page:
        back = reverse("team_chat", args=[chat.pk])
    else:
        back = reverse("session", args=[chat.session.public_id]) + f"?tab=playground&chat={chat.pk}"
    return _make(request, chat, back) if request.method == "POST" else _shares_page(request, chat, back)


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def run_shares(request: AuthedRequest, run_id: int) -> HttpResponse:
    """The eval run's share links; a POST (operators, admins) makes one, shown this once."""
    needed = Role.OPERATOR if request.method == "POST" else Role.VIEWER
    run = _run(request, run_id, needed)
    back = reverse("eval_run", args=[run.pk])
    return _make(request, run, back) if request.method == "POST" else _shares_page(request, run, back)


@require_POST
def item_share_revoke(request: AuthedRequest, share_id: int) -> HttpResponse:
    """Revoke a chat's or a run's link: its page answers 410 from now on."""
    scope = person_scope(request, Role.OPERATOR)
    share = (
        ItemShare.objects.filter(team_id=scope.team_id, pk=share_id).first() if share_id <= MAX_INT else None
    )
    if share is None:
        raise Http404("No such share link in this team")
    if share.revoked is None:
        share.revoked = timezone.now()
        share.save(update_fields=["revoked"])
    if share.chat_id is not None:
        chat = Chat.objects.select_related("session").get(pk=share.chat_id)
        return redirect("item_chat_shares", public_id=chat.session.public_id, chat_id=chat.pk)
    return redirect("item_run_shares", run_id=share.run_id)


@login_not_required
@never_cache
@require_GET
def shared_item(request: AuthedRequest, token: str) -> HttpResponse:
    """A shared chat or eval run, read-only and redacted: the HTML export, shown in place."""
    share = ItemShare.objects.filter(digest=token_digest(token)).first()
    if share is None:
        raise Http404("No such share link")
    if share.audience != ItemShare.Audience.ANYONE:
        user = request.user
        if not user.is_authenticated or access.role_in(user.pk, share.team_id) is None:
            raise Http404("No such share link")
    if not share.usable:
        return HttpResponse(f"This link is {share.state}.", content_type="text/plain", status=410)
    chat = Chat.objects.select_related("session").filter(shares=share).first()
    run = EvalRun.objects.select_related("suite", "session").filter(shares=share).first()
    if chat is not None:
        text = exports.chat_html(chat)
    elif run is not None:
        text = exports.run_html(run)
    else:
        raise Http404("No such share link")
    response = _html(text)
    response["Referrer-Policy"] = "no-referrer"
    return response
