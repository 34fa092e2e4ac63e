"""A person's account page: their password (hosted), and where they are signed in, with a way to end it."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.forms import PasswordChangeForm
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_POST

from sessions.teams import logins
from sessions.teams.models import LoginSession
from sessions.teams.throttle import LoginThrottle
from sessions.web.http import AuthedRequest

__all__ = ["account_page", "change_password", "end_login", "end_other_logins"]


def _page(request: AuthedRequest, status: int = 200, **extra: Any) -> HttpResponse:
    user = request.user
    context = {
        "logins": logins.live_logins(user.pk),
        "current_key": request.session.session_key,
        "can_change_password": settings.INSPECTOR_HOSTED and user.has_usable_password(),
        "password_form": PasswordChangeForm(user),
        **extra,
    }
    return render(request, "auth/account.html", context, status=status)


@never_cache
@require_GET
def account_page(request: AuthedRequest) -> HttpResponse:
    """The account page."""
    return _page(request)


@never_cache
@sensitive_post_parameters("old_password", "new_password1", "new_password2")
@require_POST
def change_password(request: AuthedRequest) -> HttpResponse:
    """Change the password (hosted); the person's other sessions end with the old one."""
    user = request.user
    if not settings.INSPECTOR_HOSTED or not user.has_usable_password():
        raise Http404("This account has no password to change here.")
    # The current password is checked like a login's: the same limit on guesses, reserved before the check.
    throttle = LoginThrottle(user.get_username(), logins.client_address(request))
    refused = throttle.reserve()
    if refused:
        return _page(request, status=refused.status, password_error=refused.message())
    form = PasswordChangeForm(user, request.POST)
    if not form.is_valid():
        if not form.has_error("old_password", "password_incorrect"):
            throttle.release()  # the current password was right, or never checked
        return _page(request, status=400, password_form=form)
    throttle.succeeded()
    form.save()
    # Django would sign the other sessions out at their next request; end them now, and keep this one,
    # whose login row follows it to the new session key Django gives it.
    old_key = request.session.session_key
    update_session_auth_hash(request, form.user)
    logins.follow_new_key(old_key, request.session.session_key)
    logins.end_other_logins(user.pk, request.session.session_key)
    messages.success(request, "Password changed; your other sessions are ended.")
    return redirect("account")


@require_POST
def end_other_logins(request: AuthedRequest) -> HttpResponse:
    """Sign out every other browser of this person."""
    ended = logins.end_other_logins(request.user.pk, request.session.session_key)
    messages.success(request, f"Ended {ended} other session{'s' if ended != 1 else ''}.")
    return redirect("account")


@require_POST
def end_login(request: AuthedRequest, login_id: int) -> HttpResponse:
    """Sign out one other browser of this person (404 if the session is not theirs)."""
    try:
        logins.end_login(request.user.pk, login_id, request.session.session_key)
    except LoginSession.DoesNotExist:
        raise Http404("No such login session") from None
    except logins.LoginError as error:
        return _page(request, status=400, sessions_error=str(error))
    messages.success(request, "Session ended.")
    return redirect("account")
