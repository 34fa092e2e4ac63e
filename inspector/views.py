"""Project-level pages: health check and login."""

from __future__ import annotations

from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import BadRequest
from django.http import (
    Http404,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    HttpResponseRedirect,
)
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_safe

from inspector import auth
from inspector.http import HtmxHttpRequest

# Pages that carry or take the token send no path or query in Referer headers, even to us.
# Not "no-referrer": under it browsers send `Origin: null` with the form's POST, which the
# origin and CSRF checks rightly refuse.
TOKEN_PAGE_REFERRER_POLICY = "strict-origin"


def bad_request(request: HtmxHttpRequest, exception: Exception) -> HttpResponse:
    """400: say why when a view said so (``BadRequest``); a suspicious request is told nothing more."""
    message = str(exception) if isinstance(exception, BadRequest) else ""
    return HttpResponseBadRequest(
        render(request, "sessions/_error.html", {"message": message or "Bad request"}).content
    )


def not_found(request: HtmxHttpRequest, exception: Exception) -> HttpResponse:
    """404 with our own reason ("No such session", "No such frame"); Django's own say nothing more."""
    message = str(exception) if isinstance(exception, Http404) and exception.args else ""
    text = message if message.startswith(("No ", "Not ")) else "Not found"
    return HttpResponseNotFound(render(request, "sessions/_error.html", {"message": text}).content)


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


def _login_page(request: HtmxHttpRequest, next_url: str, error: str = "", status: int = 200) -> HttpResponse:
    response = render(
        request,
        "auth/login.html",
        {"next": _safe_next(request, next_url), "error": error},
        status=status,
    )
    response.headers["Referrer-Policy"] = TOKEN_PAGE_REFERRER_POLICY
    return response


@login_not_required
@never_cache
@require_safe
def login_page(request: HtmxHttpRequest) -> HttpResponse:
    """Explain how to log in: open the URL the terminal shows, or paste its token."""
    return _login_page(request, request.GET.get("next", ""))


@login_not_required
@never_cache
@sensitive_post_parameters("token")
@require_http_methods(["GET", "HEAD", "POST"])
def token_login(request: HtmxHttpRequest) -> HttpResponse:
    """Exchange the one-time token for a session: GET shows a form that POSTs it, POST logs in."""
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
    login(request, auth.local_user())
    # Redirect, so the token leaves the address bar and a reload does not re-submit it.
    return HttpResponseRedirect(_safe_next(request, form.cleaned_data["next"]))
