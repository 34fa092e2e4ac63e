"""Request types shared by views."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

__all__ = ["AuthedRequest", "HtmxHttpRequest", "signed_in_user"]


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware."""

    htmx: HtmxDetails


class AuthedRequest(HtmxHttpRequest):
    """A request past LoginRequiredMiddleware: its user is signed in."""

    user: User


async def signed_in_user(request: HttpRequest) -> User:
    """Return the signed-in user of an async view (LoginRequiredMiddleware let only those through)."""
    user = await request.auser()
    if not isinstance(user, User):
        raise PermissionError("not signed in")
    return user
