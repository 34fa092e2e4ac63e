"""Share links: making, listing and revoking them on a session's page, and the read-only view they open.

A link's token is shown once, to the person who made it; the database keeps its SHA-256. The shared
view (``/shared/<token>/``) reads the session through ``sessions.timeline.shared``: only the share's
scope, everything redacted. It has no control that acts on the session and links to nothing else.
For an anyone-link no account is needed; a team link needs a member of the session's team.
"""

from __future__ import annotations

import json
import secrets
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django import forms
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.views import redirect_to_login
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from sessions.engine import view_csp
from sessions.models import McpSession
from sessions.teams import access
from sessions.teams.models import Role, Share, token_digest
from sessions.timeline.apps import recorded_view, view_document
from sessions.timeline.exports import collection, document, jsonl_lines
from sessions.timeline.queries import TimelineFilter
from sessions.timeline.redaction import Redactor, Rules
from sessions.timeline.shared import SharedSession, find_share, log_opening, preview
from sessions.web.http import AuthedRequest
from sessions.web.shortcuts import int_param, owned_session
from sessions.web.timeline import attachment
from sessions.web.together import threads

__all__ = [
    "ShareForm",
    "share_create",
    "share_preview",
    "share_revoke",
    "shared_collection",
    "shared_export",
    "shared_export_html",
    "shared_frame",
    "shared_page",
    "shared_panel",
    "shared_timeline",
    "shared_view_frame",
    "shares_panel",
]

EXPIRIES = {
    "1h": ("1 hour", timedelta(hours=1)),
    "1d": ("1 day", timedelta(days=1)),
    "7d": ("7 days", timedelta(days=7)),
    "30d": ("30 days", timedelta(days=30)),
    "never": ("never", None),
}
SCOPES = [
    ("all", "the whole session"),
    ("range", "a frame range"),
    ("filter", "the timeline filter applied now"),
]
SHARED_PANELS = ("overview", "conformance")
# A shared page and its fragments send no path in Referer headers, even to us: it holds the token.
REFERRER_POLICY = "strict-origin"


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class ShareForm(forms.Form):
    """What a share shows, to whom, until when, and the sharer's redaction rules (one a line)."""

    label = forms.CharField(max_length=200, required=False)
    scope = forms.ChoiceField(choices=SCOPES, initial="all")
    first_seq = forms.IntegerField(min_value=1, max_value=2**63 - 1, required=False)
    last_seq = forms.IntegerField(min_value=1, max_value=2**63 - 1, required=False)
    expiry = forms.ChoiceField(choices=[(k, v[0]) for k, v in EXPIRIES.items()], initial="7d")
    audience = forms.ChoiceField(choices=Share.Audience.choices, initial=Share.Audience.TEAM)
    names = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=10_000, required=False)
    paths = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=10_000, required=False)
    patterns = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=10_000, required=False)

    def __init__(self, *args: Any, session: McpSession, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = session

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        rules = self.rules()
        for problem in rules.problems():
            self.add_error(None, problem)
        if data.get("scope") == "range":
            first, last = data.get("first_seq"), data.get("last_seq")
            if first is None and last is None:
                self.add_error("first_seq", "give the first frame, the last, or both")
            elif first is not None and last is not None and first > last:
                self.add_error("last_seq", "the last frame comes before the first")
        if data.get("audience") == Share.Audience.ANYONE and not self.session.team.allow_public_shares:
            self.add_error("audience", "this team's admins allow links for team members only")
        return data

    def rules(self) -> Rules:
        text = {name: str(self.data.get(name) or "") for name in ("names", "paths", "patterns")}
        return Rules(_lines(text["names"]), _lines(text["paths"]), _lines(text["patterns"]))

    def held_to(self) -> tuple[int | None, int | None, TimelineFilter]:
        """The frame range and the filter the share is held to."""
        data = self.cleaned_data
        if data["scope"] == "range":
            return data.get("first_seq"), data.get("last_seq"), TimelineFilter()
        if data["scope"] == "filter":
            # The timeline's own filter form, sent along with this one (hx-include).
            return None, None, TimelineFilter.from_data(self.data)
        return None, None, TimelineFilter()

    def shared(self) -> SharedSession:
        first, last, flt = self.held_to()
        return SharedSession(
            self.session, Redactor.for_session(self.session.config, self.rules()), first, last, flt
        )


# --- on the session's page (members of its team) ---------------------------------------------


def _panel_context(session: McpSession, role: str, form: ShareForm | None = None) -> dict[str, Any]:
    shares = (
        Share.objects.filter(session=session).annotate(opened=Count("openings")).select_related("created_by")
    )
    return {
        "session": session,
        "can_share": Role.allows(role, Role.OPERATOR),
        "form": form or ShareForm(session=session),
        "shares": list(shares),
        "public_allowed": session.team.allow_public_shares,
    }


def _session_and_role(request: AuthedRequest, public_id: Any) -> tuple[McpSession, str]:
    found = access.session_with_role(request.user.pk, public_id)
    if found is None:
        raise Http404("No such session")
    return found


@require_GET
def shares_panel(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """The session's share links (state, openings, revoke) and the form to make one."""
    session, role = _session_and_role(request, public_id)
    return render(request, "shares/_panel.html", _panel_context(session, role))


@require_POST
async def share_preview(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """What the viewer of the link will see, redacted, before the link is made."""
    session = await owned_session(request, public_id, Role.OPERATOR)
    return await sync_to_async(_preview)(request, session)


def _preview(request: AuthedRequest, session: McpSession) -> HttpResponse:
    form = ShareForm(request.POST, session=session)
    if not form.is_valid():
        return render(request, "shares/_form_errors.html", {"form": form}, status=422)
    shared = form.shared()
    context = {"frames": preview(shared), "shown": shared.shown_session(), "form": form}
    return render(request, "shares/_preview.html", context)


@require_POST
async def share_create(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Make a link; its token is shown this once and only its digest is kept."""
    session = await owned_session(request, public_id, Role.OPERATOR)
    return await sync_to_async(_create)(request, session)


def _create(request: AuthedRequest, session: McpSession) -> HttpResponse:
    form = ShareForm(request.POST, session=session)
    if not form.is_valid():
        context = _panel_context(session, Role.OPERATOR, form)
        return render(request, "shares/_panel.html", context, status=422)
    first, last, flt = form.held_to()
    token = secrets.token_urlsafe(32)
    period = EXPIRIES[form.cleaned_data["expiry"]][1]
    share = Share.objects.create(
        session=session,
        created_by=request.user,
        digest=token_digest(token),
        label=form.cleaned_data["label"],
        audience=form.cleaned_data["audience"],
        first_seq=first,
        last_seq=last,
        filter={k: v for k, v in flt.__dict__.items() if v},
        rules=form.rules().to_dict(),
        expires=None if period is None else timezone.now() + period,
    )
    # The next link starts from this one's audience and expiry: people often make several alike.
    kept = {name: form.cleaned_data[name] for name in ("audience", "expiry")}
    context = _panel_context(session, Role.OPERATOR, ShareForm(initial=kept, session=session))
    context["made"] = {"share": share, "url": request.build_absolute_uri(f"/shared/{token}/")}
    response = render(request, "shares/_panel.html", context)
    response["Cache-Control"] = "no-store"
    return response


@require_POST
async def share_revoke(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Revoke a link: it opens nothing from now on, and open viewers' sockets close at once."""
    session = await owned_session(request, public_id, Role.OPERATOR)
    share = await Share.objects.filter(session=session, pk=pk).afirst()
    if share is None:
        raise Http404("No link of that number on this session")
    if share.revoked is None:
        share.revoked = timezone.now()
        await share.asave(update_fields=["revoked"])
    # Every open viewer of the link (sessions/web/shared_live.py) closes its socket on this.
    await get_channel_layer().group_send(share.group_name, {"type": "share.revoked"})
    context = await sync_to_async(_panel_context)(session, Role.OPERATOR)
    return await sync_to_async(render)(request, "shares/_panel.html", context)


# --- the shared view (anyone the link lets in) ----------------------------------------------------


class Refused(Exception):
    """A link that opens nothing for this visitor, with the page that says why."""

    def __init__(self, response: HttpResponse) -> None:
        self.response = response


def may_open(share: Share | None, user: Any) -> str:
    """Why this visitor cannot open the share ("" when they can): unknown, revoked, expired, login."""
    if share is None:
        return "unknown"
    if share.state != "open":
        return share.state
    if share.audience == Share.Audience.ANYONE:
        return ""
    if user is None or not user.is_authenticated:
        return "login"
    # A team link: members of the session's team only; to anyone else it looks like no link at all.
    return "" if access.role_in(user.pk, share.session.team_id) is not None else "unknown"


GONE = {
    "unknown": (404, "No such share link", "This link does not exist, or it is not for you."),
    "revoked": (410, "This link was revoked", "Whoever shared it revoked it: ask them for a new one."),
    "expired": (410, "This link expired", "Ask whoever shared it for a new one."),
}


def _open(request: HttpRequest, token: str) -> tuple[Share, SharedSession]:
    share = find_share(token)
    why = may_open(share, request.user)
    if why == "login":
        raise Refused(redirect_to_login(request.get_full_path()))
    if why or share is None:
        status, title, text = GONE[why or "unknown"]
        response = render(request, "shares/gone.html", {"title": title, "text": text}, status=status)
        raise Refused(response)
    return share, SharedSession.of(share)


def _shared(request: HttpRequest, token: str, view: Any) -> HttpResponse:
    """Open the link, then answer with ``view(share, shared, context)``; a refusal's page otherwise."""
    try:
        share, shared = _open(request, token)
    except Refused as refused:
        response = refused.response
    else:
        base = {"share": share, "shared": {"base": f"/shared/{token}/", "token": token}}
        response = view(share, shared, base)
    response["Referrer-Policy"] = REFERRER_POLICY
    return response


@login_not_required
@never_cache
@require_GET
def shared_page(request: HttpRequest, token: str) -> HttpResponse:
    """The read-only view of a shared session: overview, timeline, frames, live while it runs."""
    tab = request.GET.get("tab", "overview")

    def page(share: Share, shared: SharedSession, base: dict[str, Any]) -> HttpResponse:
        user = request.user if request.user.is_authenticated else None
        address = request.META.get("REMOTE_ADDR", "")
        log_opening(share, getattr(user, "pk", None), str(address), request.META.get("HTTP_USER_AGENT", ""))
        rows = shared.rows(TimelineFilter())
        context = {
            **base,
            **_panel(shared, tab if tab in SHARED_PANELS else "overview"),
            "rows": rows,
            "first_shown": rows[0]["seq"] if rows else 0,
            "last_shown": rows[-1]["seq"] if rows else 0,
            "filter": TimelineFilter(),
            "panels": SHARED_PANELS,
        }
        return render(request, "shares/shared.html", context)

    return _shared(request, token, page)


def _panel(shared: SharedSession, tab: str) -> dict[str, Any]:
    context: dict[str, Any] = {"session": shared.shown_session(), "tab": tab}
    if tab == "overview":
        context.update(shared.overview())
    if tab == "conformance":
        context.update(shared.report())
    return context


@login_not_required
@never_cache
@require_GET
def shared_panel(request: HttpRequest, token: str, name: str) -> HttpResponse:
    """The overview or the Conformance tab of a shared session."""

    def panel(share: Share, shared: SharedSession, base: dict[str, Any]) -> HttpResponse:
        if name not in SHARED_PANELS:
            raise Http404("No such panel")
        context = {**base, **_panel(shared, name), "panels": SHARED_PANELS}
        return render(request, "shares/_panel_tab.html", context)

    return _shared(request, token, panel)


@login_not_required
@never_cache
@require_GET
def shared_timeline(request: HttpRequest, token: str) -> HttpResponse:
    """A page of the shared timeline's rows (newest, before a seq, or after one), filtered further."""
    flt = TimelineFilter.from_data(request.GET)
    before, after = int_param(request.GET, "before"), int_param(request.GET, "after")

    def rows(share: Share, shared: SharedSession, base: dict[str, Any]) -> HttpResponse:
        found = shared.rows(flt, before=before, after=after)
        context = {"rows": found, "t0": shared.session.start_wall}
        return render(request, "sessions/_timeline_rows.html", context)

    return _shared(request, token, rows)


@login_not_required
@never_cache
@require_GET
def shared_frame(request: HttpRequest, token: str, seq: int) -> HttpResponse:
    """One frame of the share's scope, redacted."""

    def frame(share: Share, shared: SharedSession, base: dict[str, Any]) -> HttpResponse:
        detail = shared.detail(seq)
        if detail is None:
            raise Http404("No such frame")
        found = threads(shared.session, seq)
        for note in (n for thread in found for n in (thread["note"], *thread["replies"])):
            note.text = shared.redactor.text(note.text)  # shown, never saved
        # The team's notes on the frame, read-only; "export": their links point within this page.
        notes = {"note_seq": seq, "threads": found, "can_note": False, "export": True}
        app_view = recorded_view(shared.session, detail["frame"], shared.frames(), shared.shown)
        if app_view and app_view.get("read_seq"):
            app_view["frame_url"] = f"{base['shared']['base']}apps/frame/{app_view['read_seq']}"
        context = {**base, "session": shared.session, **detail, **notes, "app_view": app_view}
        return render(request, "sessions/_frame_detail.html", context)

    return _shared(request, token, frame)


@login_not_required
@never_cache
@require_GET
def shared_view_frame(request: HttpRequest, token: str, seq: int) -> HttpResponse:
    """A view's document from the share's recorded resources/read (redacted), with no network at all."""

    def document(share: Share, shared: SharedSession, base: dict[str, Any]) -> HttpResponse:
        view = view_document(shared.session, seq, shared.frames(), shared.shown)
        if view is None:
            raise Http404("No view document in that frame")
        response = HttpResponse(view.html, content_type="text/html; charset=utf-8")
        response["Content-Security-Policy"] = view_csp(view.ui, offline=True)
        response["X-Content-Type-Options"] = "nosniff"
        response["Cross-Origin-Resource-Policy"] = "same-origin"
        return response

    return _shared(request, token, document)


async def _export(request: HttpRequest, token: str) -> tuple[HttpResponse | None, SharedSession | None]:
    def opened(share: Share, shared: SharedSession, base: dict[str, Any]) -> HttpResponse:
        found.append(shared)
        return HttpResponse()

    found: list[SharedSession] = []
    response = await sync_to_async(_shared)(request, token, opened)
    return (None, found[0]) if found else (response, None)


@login_not_required
@never_cache
@require_GET
async def shared_export(request: HttpRequest, token: str) -> HttpResponse | StreamingHttpResponse:
    """The share's frames as JSON Lines, redacted by its rules (it opens again as a session)."""
    refused, shared = await _export(request, token)
    if shared is None:
        return refused or HttpResponse(status=404)
    lines = jsonl_lines(shared.session, shared.redactor, shared.frames())
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    return attachment(response, f"mcp-session-{shared.session.public_id}-shared.jsonl")


@login_not_required
@never_cache
@require_GET
async def shared_export_html(request: HttpRequest, token: str) -> HttpResponse | StreamingHttpResponse:
    """The share as one self-contained HTML file, redacted."""
    refused, shared = await _export(request, token)
    if shared is None:
        return refused or HttpResponse(status=404)
    html = document(shared.session, shared.redactor, shared.frames())
    response = StreamingHttpResponse(html, content_type="text/html; charset=utf-8")
    return attachment(response, f"mcp-session-{shared.session.public_id}-shared.html")


@login_not_required
@never_cache
@require_GET
async def shared_collection(request: HttpRequest, token: str) -> HttpResponse:
    """The share's requests as a collection, redacted."""
    refused, shared = await _export(request, token)
    if shared is None:
        return refused or HttpResponse(status=404)
    steps = await sync_to_async(collection)(shared.session, shared.redactor, shared.frames())
    response = HttpResponse(
        json.dumps(steps, indent=2, ensure_ascii=False) + "\n", content_type="application/json"
    )
    return attachment(response, f"mcp-collection-{shared.session.public_id}-shared.json")
