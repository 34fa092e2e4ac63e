"""Request types shared by views."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

__all__ = ["AuthedRequest", "HtmxHttpRequest", "first_read", "reads_first", "signed_in_user"]

V = TypeVar("V", bound=Callable[..., Any])


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


def reads_first(read: Callable[..., Any], methods: tuple[str, ...] = ("POST",)) -> Callable[[V], V]:
    """Mark a view whose first work is ``read(request, user, **view_kwargs)``, blocking (the database).

    ``inspector.loop_middleware.LoginRequiredMiddleware`` goes to the request's thread anyway, to
    find who is signed in; for a request by a signed-in person with one of ``methods``, it runs
    ``read`` there too, so the view starts with its result (``first_read``) without a second trip
    (issue 10: each trip cost a tool call about a fortieth of its CPU). What ``read`` raises
    (``Http404``, ``PermissionDenied``) is answered as if the view had raised it.
    """

    def mark(view: V) -> V:
        view.reads_first = (read, methods)  # type: ignore[attr-defined]
        return view

    return mark


async def first_read(request: HttpRequest, read: Callable[..., Any], **view_kwargs: Any) -> Any:
    """What the view's ``reads_first`` read in the login middleware's trip (run now if it was not)."""
    if hasattr(request, "read_first"):
        return request.read_first
    user = await signed_in_user(request)
    return await sync_to_async(read)(request, user, **view_kwargs)
