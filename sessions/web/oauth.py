"""OAuth in the web app: the authorization callback, the "Authorize at" cards, forgetting tokens.

The flow itself runs in the session's owner (``sessions.runtime.oauth``). The authorization server
sends the person back to ``/oauth/callback``: a GET with a side effect, allowed here only because it
is the OAuth redirect. Its ``state`` is checked (one use, within the wait, bound to the person
who started the session) before the URL is handed to the waiting owner through its command channel.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.decorators import login_not_required
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_POST, require_safe

from sessions.models import McpSession, OAuthAuthorization, OAuthTokens, ServerConfig
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.oauth import AUTHORIZE_WAIT, CALLBACK_PATH, state_hash
from sessions.teams import access
from sessions.teams.models import Role
from sessions.web import together
from sessions.web.http import AuthedRequest, signed_in_user
from sessions.web.shortcuts import owned_session, person_scope

__all__ = [
    "WAIT_MINUTES",
    "authorizations_context",
    "callback",
    "callback_uri",
    "cancel_authorization",
    "forget_server_tokens",
    "forget_session_tokens",
    "oauth_context",
    "open_authorization",
    "waiting_authorizations",
    "with_callback",
]

_MOVED = "inspector_moved"
WAIT_MINUTES = int(AUTHORIZE_WAIT // 60)
"""What an "Authorize at" card says it waits: as long as the session waits for the person."""
# The cache key that says a tab of the authorization's person has opened its page (one tab, once).
_OPENED = "oauth-opened:{}"


def callback_uri(request: HttpRequest) -> str:
    """The redirect URI of this inspector, as the person reaches it (absolute)."""
    return request.build_absolute_uri(CALLBACK_PATH)


def with_callback(request: HttpRequest, config: dict[str, Any]) -> dict[str, Any]:
    """A session's config with the callback URL its OAuth flow sends the person back to."""
    if config.get("transport", "stdio") != "stdio" and isinstance(config.get("oauth"), dict):
        config = {**config, "oauth": {**config["oauth"], "redirect_uri": callback_uri(request)}}
    return config


def waiting_authorizations(session: McpSession) -> list[OAuthAuthorization]:
    """The session's authorizations still waiting for a person (newest last)."""
    since = timezone.now() - timedelta(seconds=AUTHORIZE_WAIT)
    return list(
        OAuthAuthorization.objects.filter(session=session, ended__isnull=True, created__gte=since)
        .select_related("user")
        .order_by("created")
    )


def authorizations_context(session: McpSession, user_id: int) -> dict[str, Any]:
    """The session page's "Authorize at" cards as this person sees them: those they started open by
    themselves (``open_authorization``), and every card has a Cancel."""
    return {
        "session": session,
        "authorizations": waiting_authorizations(session),
        "me": user_id,
        "wait_minutes": WAIT_MINUTES,
        "session_page": True,
    }


def oauth_context(session: McpSession, user_id: int) -> dict[str, Any]:
    """What the session page shows of OAuth: the cards of waiting authorizations, whether it uses OAuth."""
    config = session.config if isinstance(session.config, dict) else {}
    oauth = config.get("oauth") if isinstance(config.get("oauth"), dict) else {}
    return {
        "cards": authorizations_context(session, user_id),
        "uses_oauth": bool(oauth and oauth.get("enabled")) and not session.is_imported,
    }


async def _waiting(session: McpSession, pk: int) -> OAuthAuthorization:
    """One of the session's authorizations still waiting for its person; 404 otherwise."""
    since = timezone.now() - timedelta(seconds=AUTHORIZE_WAIT)
    found = await OAuthAuthorization.objects.filter(
        session=session, pk=pk, ended__isnull=True, created__gte=since
    ).afirst()
    if found is None:
        raise Http404("No such authorization waiting")
    return found


@require_POST
async def open_authorization(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """Whether this tab opens the authorization page by itself: the first tab of the person who
    started it to ask does, once (a reload, another tab or a redrawn card do not)."""
    session = await owned_session(request, public_id)
    user = await signed_in_user(request)
    authorization = await _waiting(session, pk)
    mine = authorization.user_id == user.pk and bool(authorization.link)
    first = mine and await cache.aadd(_OPENED.format(authorization.state_sha256), True, AUTHORIZE_WAIT)
    context = {"authorization": authorization, "open": first}
    return await sync_to_async(render)(request, "sessions/oauth/_opening.html", context)


@require_POST
async def cancel_authorization(request: AuthedRequest, public_id: Any, pk: int) -> HttpResponse:
    """End an authorization's wait: the connection waiting on it fails, saying it was cancelled."""
    session = await owned_session(request, public_id)
    user = await signed_in_user(request)
    authorization = await _waiting(session, pk)
    try:
        await client.call(session, m.CancelAuthorization(authorization.state_sha256, user.get_username()))
    except client.CommandFailed:
        # No owner waits for it any more: the card goes from every tab all the same.
        await get_channel_layer().group_send(session.group_name, m.encode_event(m.AuthorizationChanged()))
    await OAuthAuthorization.objects.filter(pk=authorization.pk, ended__isnull=True).aupdate(
        ended=timezone.now(), outcome="cancelled"
    )
    await together.record(session, user.pk, "cancelled the authorization at", authorization.host)
    if not request.htmx:
        return redirect(f"/s/{session.public_id}/")
    context = await sync_to_async(authorizations_context)(session, user.pk)
    return HttpResponse(render_to_string("sessions/oauth/_authorizations.html", context, request))


def _claim(digest: str, user_id: int) -> McpSession | None:
    """The session an authorization of this person waits in, marked returned (once); else None."""
    row = OAuthAuthorization.objects.select_related("session").filter(state_sha256=digest).first()
    since = timezone.now() - timedelta(seconds=AUTHORIZE_WAIT)
    if row is None or row.user_id != user_id or row.ended is not None or row.created < since:
        return None
    if access.session_with_role(user_id, row.session.public_id) is None:
        return None  # no longer a member of the session's team
    claimed = OAuthAuthorization.objects.filter(pk=row.pk, ended__isnull=True).update(
        ended=timezone.now(), outcome="returned"
    )
    return row.session if claimed else None


def _problem(request: HttpRequest, message: str, status: int = 400) -> HttpResponse:
    return render(request, "sessions/oauth/callback.html", {"problem": message}, status=status)


@login_not_required
@require_safe
async def callback(request: HttpRequest) -> HttpResponse:
    """The authorization server's redirect back: hand it to the flow that waits for it."""
    params = request.GET.copy()
    moved = params.pop(_MOVED, None)
    state = params.get("state", "")
    if not state:
        return await sync_to_async(_problem)(request, "This authorization answer has no state.")
    user = await request.auser()
    if not user.is_authenticated:
        if moved:
            return await sync_to_async(_problem)(
                request, "Sign in to the inspector in this browser, then authorize again.", 403
            )
        # The session cookie is SameSite=Strict: a redirect from another site comes without it. A
        # page that moves on by itself (Refresh) is a navigation of our own site, which carries it.
        response = await sync_to_async(render)(request, "sessions/oauth/moving.html", {})
        response.headers["Refresh"] = f"0; url={CALLBACK_PATH}?{urlencode({**params.dict(), _MOVED: 1})}"
        return response
    digest = state_hash(state)
    session = await sync_to_async(_claim)(digest, user.pk)
    if session is None:
        return await sync_to_async(_problem)(
            request,
            "No authorization of yours is waiting for this answer: it was used already, it expired, "
            "or someone else started it.",
        )
    url = request.build_absolute_uri(f"{CALLBACK_PATH}?{params.urlencode()}")
    try:
        await client.call(session, m.OAuthReturned(digest, url), timeout=10)
    except client.CommandFailed as exc:
        return await sync_to_async(_problem)(request, f"The session no longer waits for it: {exc}", 409)
    context = {"session": session, "debugger": bool(session.config.get("oauth_debug"))}
    return await sync_to_async(render)(request, "sessions/oauth/callback.html", context)


def _key(config: dict[str, Any]) -> str:
    oauth = config.get("oauth") if isinstance(config.get("oauth"), dict) else {}
    return OAuthTokens.key_for(str(config.get("url") or ""), str((oauth or {}).get("client_id") or ""))


@require_POST
async def forget_session_tokens(request: AuthedRequest, public_id: Any) -> HttpResponse:
    """Forget the team's tokens for the session's server: the next refusal authorizes again."""
    session = await owned_session(request, public_id)
    if not session.config.get("url"):
        return HttpResponse("This session has no HTTP server to forget tokens of.", status=400)
    if session.is_live and session.worker_channel:
        # First the owner drops the token it holds (and writes what it keeps), then the rows go.
        with contextlib.suppress(client.CommandFailed):  # it ended meanwhile: nothing of it to drop
            await client.call(session, m.ForgetTokens())
    await OAuthTokens.objects.filter(team_id=session.team_id, key=_key(session.config)).adelete()
    if request.htmx:
        return HttpResponse('<span class="muted" role="status">Tokens forgotten.</span>')
    return redirect(f"/s/{session.public_id}/")


@require_POST
def forget_server_tokens(request: AuthedRequest, pk: int) -> HttpResponse:
    """Forget the team's tokens for a saved server."""
    scope = person_scope(request, Role.OPERATOR)
    server: ServerConfig | None = scope.servers().filter(pk=pk).first()
    if server is None:
        raise Http404("No such server")
    OAuthTokens.objects.filter(team_id=scope.team_id, key=_key(server.snapshot())).delete()
    return redirect("home")
