"""Project-level pages: health check, logging in and out, and joining a team by an invitation.

Local mode (the default): the one-time token login only. Hosted mode (``INSPECTOR_HOSTED``): password
logins (rate-limited), invitations; the token login is off. Logging out works in both.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import AuthenticationForm, UserCreationForm
from django.core.exceptions import BadRequest
from django.db import DatabaseError, transaction
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    HttpResponseRedirect,
)
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from inspector import auth, sso
from sessions.runtime import storage
from sessions.teams import access, invitations
from sessions.teams.logins import client_address, local_user
from sessions.teams.models import Invitation
from sessions.teams.throttle import LoginThrottle, sign_up_throttle
from sessions.web.http import HtmxHttpRequest

log = logging.getLogger(__name__)

# The backend a new account (made on the invitation page) is logged in with.
PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"

# Pages that carry or take the token send no path or query in Referer headers, even to us.
# Not "no-referrer": under it browsers send `Origin: null` with the form's POST, which the
# origin and CSRF checks rightly refuse.
TOKEN_PAGE_REFERRER_POLICY = "strict-origin"


def _error_template(request: HtmxHttpRequest) -> str:
    """A fragment for htmx to swap in; otherwise a page of its own, with the top bar."""
    return "sessions/_error.html" if getattr(request, "htmx", False) else "error.html"


def bad_request(request: HtmxHttpRequest, exception: Exception) -> HttpResponse:
    """400: say why when a view said so (``BadRequest``); a suspicious request is told nothing more."""
    if isinstance(exception, BadRequest):
        message, template = str(exception) or "Bad request", _error_template(request)
    else:
        message, template = "Bad request", "sessions/_error.html"
    return HttpResponseBadRequest(render(request, template, {"message": message}).content)


def not_found(request: HtmxHttpRequest, exception: Exception) -> HttpResponse:
    """404 with our own reason ("No such session", "No such frame"); Django's own say nothing more."""
    message = str(exception) if isinstance(exception, Http404) and exception.args else ""
    text = message if message.startswith(("No ", "Not ")) else "Not found"
    return HttpResponseNotFound(render(request, _error_template(request), {"message": text}).content)


def forbidden(request: HtmxHttpRequest, exception: Exception) -> HttpResponse:
    """403: say why (a role too low, no team yet); a page of its own unless htmx asked for a fragment."""
    message = str(exception) or "You may not do this."
    return render(request, _error_template(request), {"message": message}, status=403)


@login_not_required
@require_safe
def healthz(request: HtmxHttpRequest) -> HttpResponse:
    """Report that the process serves requests; used by the container HEALTHCHECK."""
    return HttpResponse("ok", content_type="text/plain")


def _safe_next(request: HtmxHttpRequest, url: str) -> str:
    """Return url if it stays on this site, else "/"."""
    ok = url_has_allowed_host_and_scheme(
        url, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return url if url and ok else "/"


def _sso_url(next_url: str, invitation: str = "") -> str:
    """Where "sign in with single sign-on" goes, back to ``next_url`` after (carrying the invitation a
    person opened, so that their first sign-in can join with it); empty when SSO is not set up."""
    if sso.provider() is None:
        return ""
    query = {"next": next_url, **({"invitation": invitation} if invitation else {})}
    return reverse("sso-login") + "?" + urlencode(query)


def _login_page(
    request: HtmxHttpRequest,
    next_url: str,
    error: str = "",
    status: int = 200,
    form: AuthenticationForm | None = None,
) -> HttpResponse:
    context = {
        "next": _safe_next(request, next_url),
        "error": error,
        "form": form or AuthenticationForm(request),
        "logged_out": request.GET.get("logged_out") == "1",
    }
    response = render(request, "auth/login.html", context, status=status)
    response.headers["Referrer-Policy"] = TOKEN_PAGE_REFERRER_POLICY
    return response


@login_not_required
@never_cache
@sensitive_post_parameters("password")
@require_http_methods(["GET", "HEAD", "POST"])
def login_page(request: HtmxHttpRequest) -> HttpResponse:
    """Local: how to log in (the URL the terminal shows). Hosted: the password form, rate-limited."""
    if request.method != "POST":
        return _login_page(request, request.GET.get("next", ""))
    next_url = request.POST.get("next", "")
    if not settings.INSPECTOR_HOSTED:
        error = "Password login is for the hosted mode. Open the login URL the inspector printed."
        return _login_page(request, next_url, error, status=405)
    username = str(request.POST.get("username") or "")[:300]
    throttle = LoginThrottle(username, client_address(request))
    refused = throttle.reserve()
    if refused:
        # Before any password is checked, and the same whether or not the account exists.
        response = _login_page(request, next_url, refused.message(), status=refused.status)
        response.headers["Retry-After"] = str(refused.window)
        return response
    # Counted as failed from here on: only the limit's worth of guesses ever reach the password hasher,
    # however many arrive at once.
    form = AuthenticationForm(request, data=request.POST)
    if not form.is_valid():
        if form.has_error("__all__", "invalid_login"):
            return _login_page(request, next_url, status=403, form=form)
        throttle.release()  # no password was checked
        return _login_page(request, next_url, status=400, form=form)
    throttle.succeeded()
    login(request, form.get_user())
    return HttpResponseRedirect(_safe_next(request, next_url))


@login_not_required
@never_cache
@sensitive_post_parameters("token")
@require_http_methods(["GET", "HEAD", "POST"])
def token_login(request: HtmxHttpRequest) -> HttpResponse:
    """Exchange the one-time token for a session: GET shows a form that POSTs it, POST logs in."""
    if settings.INSPECTOR_HOSTED:
        error = "The one-time token login is off in the hosted mode: log in with your account."
        return _login_page(request, "", error, status=404)
    if request.method != "POST":
        # No side effect here: the page's script (or a click) POSTs the token with a CSRF token.
        context = {
            "token": request.GET.get("token", ""),
            "next": _safe_next(request, request.GET.get("next", "")),
        }
        response = render(request, "auth/token.html", context)
        response.headers["Referrer-Policy"] = TOKEN_PAGE_REFERRER_POLICY
        return response

    form = auth.TokenForm(request.POST)
    if not form.is_valid() or not auth.login_token.redeem(form.cleaned_data["token"]):
        # One message for a wrong, used or missing token: the answer tells an attacker nothing.
        error = "That token is not valid. Use the login URL the inspector printed when it started."
        return _login_page(request, request.POST.get("next", ""), error, status=403)

    # A new session key for the new identity (login() keeps the key when the user is the same).
    request.session.cycle_key()
    try:
        login(request, local_user())
    except DatabaseError as error:
        if not storage.is_full(error):
            raise
        # Logged in already; only the last-login time and the login's listing were not written.
        log.warning("the disk is full: logged in without recording the login")
    # Redirect, so the token leaves the address bar and a reload does not re-submit it.
    return HttpResponseRedirect(_safe_next(request, form.cleaned_data["next"]))


@never_cache
@require_POST
def logout_view(request: HtmxHttpRequest) -> HttpResponse:
    """End this browser's session (locally the token is spent: a restart prints a new login URL)."""
    logout(request)
    return HttpResponseRedirect(reverse("login") + "?logged_out=1")


def _invite_page(
    request: HtmxHttpRequest,
    token: str,
    *,
    invitation: Invitation | None = None,
    error: str = "",
    form: UserCreationForm | None = None,
    status: int = 200,
) -> HttpResponse:
    # Where signing in elsewhere (the login page, single sign-on) comes back to: this page, to join.
    back = reverse("invite") + "?" + urlencode({"token": token}) if invitation is not None else ""
    context = {
        "invitation": invitation,
        "token": token if invitation is not None else "",
        "error": error,
        "form": form or UserCreationForm(),
        "login_url": reverse("login") + "?" + urlencode({"next": back}) if back else "",
        "sso_url": _sso_url(back, token) if back else "",
    }
    response = render(request, "auth/invite.html", context, status=status)
    # The token is in the page's URL: send no path or query in Referer headers.
    response.headers["Referrer-Policy"] = TOKEN_PAGE_REFERRER_POLICY
    return response


@login_not_required
@never_cache
@sensitive_post_parameters("token", "password1", "password2")
@require_http_methods(["GET", "HEAD", "POST"])
def invite_page(request: HtmxHttpRequest) -> HttpResponse:
    """An invitation link: GET shows it (no side effect); POST makes an account and joins, or joins as the
    signed-in person. One use, until it expires, unless revoked (``sessions.teams.invitations``)."""
    source = request.POST if request.method == "POST" else request.GET
    token = str(source.get("token") or "")
    if not settings.INSPECTOR_HOSTED:
        message = "Invitations are for the hosted mode; this inspector is one person's."
        return _invite_page(request, token, error=message, status=404)
    try:
        invitation = invitations.find(token)
    except invitations.InvitationError as error:
        return _invite_page(request, token, error=str(error), status=error.status)
    if request.method != "POST":
        return _invite_page(request, token, invitation=invitation)

    action = request.POST.get("action")
    signed_in = request.user.is_authenticated
    if action == "join" and signed_in:
        try:
            membership = invitations.accept(token, request.user)
        except invitations.InvitationError as error:
            return _invite_page(request, token, invitation=invitation, error=str(error), status=error.status)
    elif action == "create" and not signed_in:
        # Each refused sign-up says whether its username is taken: so many per invitation and address.
        lifetime = int((invitation.expires - timezone.now()).total_seconds())
        throttle = sign_up_throttle(invitation.pk, lifetime, client_address(request))
        refused = throttle.reserve()
        if refused:
            return _invite_page(
                request, token, invitation=invitation, error=refused.message(), status=refused.status
            )
        form: UserCreationForm = UserCreationForm(request.POST)
        if not form.is_valid():
            return _invite_page(request, token, invitation=invitation, form=form, status=400)
        throttle.release()
        try:
            # One transaction: the account exists only if the invitation was still there to use.
            with transaction.atomic():
                user = form.save()
                membership = invitations.accept(token, user)
        except invitations.InvitationError as error:
            return _invite_page(request, token, invitation=invitation, error=str(error), status=error.status)
        login(request, user, backend=PASSWORD_BACKEND)
    elif action == "join":
        refusal = "Log in first, then open the invitation link again to join with your account."
        return _invite_page(request, token, invitation=invitation, error=refusal, status=403)
    elif action == "create":
        refusal = "You are logged in: join with this account, or log out first to make a new one."
        return _invite_page(request, token, invitation=invitation, error=refusal, status=400)
    else:
        return _invite_page(request, token, invitation=invitation, error="Choose how to join.", status=400)
    # The team just joined becomes the current one.
    request.session[access.TEAM_KEY] = membership.team_id
    return HttpResponseRedirect("/")
