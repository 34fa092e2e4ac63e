"""Django's own middleware, run on the event loop wherever a hook does no I/O.

In an async chain Django runs each ``MiddlewareMixin`` hook (``process_request``, ``process_view``,
``process_response``) through ``sync_to_async``: a trip to the request's thread and back for each,
about fifteen a request, whatever the hook does. Most of these hooks only read and set headers or
cookies, and run here in place; the few that may touch the database (saving a changed session,
storing messages, finding the signed-in user) or parse a big request body still go to the thread.
Without it a click's tool result in a real browser took markedly longer (docs/bench.md, "Workarounds:
what went, what stayed"). Django is pinned (pyproject.toml), and
tests/web/test_loop_middleware.py fails when the Django code these classes rely on changes.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.auth.middleware import LoginRequiredMiddleware as _LoginRequired
from django.contrib.messages.middleware import MessageMiddleware as _Messages
from django.contrib.messages.storage import default_storage
from django.contrib.sessions.middleware import SessionMiddleware as _Sessions
from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.middleware.clickjacking import XFrameOptionsMiddleware as _XFrameOptions
from django.middleware.common import CommonMiddleware as _Common
from django.middleware.csrf import CsrfViewMiddleware as _Csrf
from django.middleware.security import SecurityMiddleware as _Security
from django.utils.functional import SimpleLazyObject, empty

__all__ = [
    "AuthenticationMiddleware",
    "CommonMiddleware",
    "CsrfViewMiddleware",
    "LoginRequiredMiddleware",
    "MessageMiddleware",
    "SecurityMiddleware",
    "SessionMiddleware",
    "XFrameOptionsMiddleware",
    "small_body",
]

SMALL_BODY = 64 * 1024
"""A request body up to this size is in memory, and parsed in well under a millisecond."""


def small_body(request: HttpRequest) -> bool:
    """Whether parsing the request's form (if any) is quick work, fit for the event loop."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return True
    try:  # no length (a chunked body): it may be big, and spooled to disk
        length = int(request.META.get("CONTENT_LENGTH") or -1)
    except ValueError:
        return False
    return 0 <= length <= SMALL_BODY


class _OnTheLoop:
    """A ``MiddlewareMixin`` whose hooks run in place in an async chain (``needs_thread`` says when not)."""

    get_response: Any

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)  # type: ignore[call-arg]
        if iscoroutinefunction(get_response) and hasattr(self, "process_view"):
            # Django adapts a sync process_view with sync_to_async; an async one it awaits as it is.
            setattr(self, "process_view", self._process_view_async)  # noqa: B010 - an instance's own hook

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_needs_thread(request, response):
                response = await sync_to_async(self.process_response, thread_sensitive=True)(
                    request, response
                )
            else:
                response = self.process_response(request, response)
        return response

    async def _process_view_async(self, request: HttpRequest, *args: Any) -> HttpResponseBase | None:
        hook: Any = getattr(type(self), "process_view")  # noqa: B009 - the class's, not the instance's
        if small_body(request):
            return hook(self, request, *args)  # type: ignore[no-any-return]
        return await sync_to_async(hook, thread_sensitive=True)(self, request, *args)  # type: ignore[no-any-return]

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return False


class SecurityMiddleware(_OnTheLoop, _Security):
    """Headers and the HTTPS redirect: no I/O."""


class CommonMiddleware(_OnTheLoop, _Common):
    """The slash redirect (a URL match) and Content-Length: no I/O."""


class XFrameOptionsMiddleware(_OnTheLoop, _XFrameOptions):
    """One header: no I/O."""


class SessionMiddleware(_OnTheLoop, _Sessions):
    """The session is loaded lazily (by whoever reads it); only saving a changed one writes."""

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return bool(request.session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CsrfViewMiddleware(_OnTheLoop, _Csrf):
    """The token comes from the cookie and a header, or the parsed form (a big one parsed in a thread)."""


class AuthenticationMiddleware(_OnTheLoop, _Authentication):
    """It only sets ``request.user`` and ``request.auser``, both lazy."""


class LoginRequiredMiddleware(_OnTheLoop, _LoginRequired):
    """Who is signed in, found in one trip to the request's thread (Django's async API takes two: the
    session, then the user); ``request.user`` and ``request.auser()`` then reuse it."""

    async def _process_view_async(self, request: HttpRequest, *args: Any) -> HttpResponseBase | None:
        view = args[0]
        user = await sync_to_async(get_user, thread_sensitive=True)(request)
        request._cached_user = request._acached_user = user  # type: ignore[attr-defined]  # what both resolve to
        if user.is_authenticated or not getattr(view, "login_required", True):
            return None
        return self.handle_no_permission(request, view)  # type: ignore[no-any-return]


class MessageMiddleware(_OnTheLoop, _Messages):
    """Messages are stored only when a view added some or a page showed them (then in a thread:
    those that do not fit the cookie go to the session). The storage is made when first used: most
    requests (fragments, calls) never touch it, and making it cost as much as a URL lookup."""

    def process_request(self, request: HttpRequest) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        return super().process_response(request, response) if _made(request) else response

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        if not _made(request):
            return False
        storage = request._messages  # type: ignore[attr-defined]
        return bool(storage.used or storage.added_new)


def _made(request: HttpRequest) -> bool:
    """Whether the request's message storage was made (used by a view, a template or the middleware)."""
    storage = getattr(request, "_messages", None)
    return storage is not None and getattr(storage, "_wrapped", None) is not empty
