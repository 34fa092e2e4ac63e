"""Response headers Django does not set on its own, and the cross-origin request guard."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.db import DatabaseError
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseBase,
    HttpResponseForbidden,
)
from django.shortcuts import render
from django.utils.cache import patch_cache_control
from django.utils.deprecation import MiddlewareMixin
from whitenoise.middleware import WhiteNoiseMiddleware

from inspector.loop_middleware import small_body
from inspector.origins import is_own_origin
from sessions.runtime import storage
from sessions.timeline.recordings import MAX_BYTES as MAX_RECORDING_BYTES

__all__ = [
    "BodySizeMiddleware",
    "ContentSecurityPolicyMiddleware",
    "NoStoreMiddleware",
    "NulParameterMiddleware",
    "SameOriginMiddleware",
    "StaticFilesMiddleware",
    "StorageFullMiddleware",
    "body_limit",
    "body_too_large",
    "content_security_policy",
]

logger = logging.getLogger("inspector.security")


def content_security_policy(request: HttpRequest) -> str:
    """Return the policy for a page served to request."""
    # Everything (scripts, styles, htmx requests, websockets) comes from our own origin;
    # servers' content is rendered as escaped text, never as markup or script. 'self' covers
    # same-origin websockets under CSP 3, but older WebKit needs the ws(s) origin spelled out.
    try:
        ws_origin = f" {'wss' if request.is_secure() else 'ws'}://{request.get_host()}"
    except DisallowedHost:
        # The response is a 400 for the bad Host; it needs no websocket.
        ws_origin = ""
    return "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            f"connect-src 'self'{ws_origin}",
            # data: for images and audio that servers send base64-encoded.
            "img-src 'self' data:",
            "media-src 'self' data:",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


class _Middleware:
    """Sync or async, as the chain is: a sync-only middleware would hold the one thread that every
    thread-sensitive database call shares for as long as each async view runs."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return self.respond(request, self.get_response)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        early = self.before(request)
        if early is not None:
            return early
        return self.after(request, await self.get_response(request))

    def respond(self, request: HttpRequest, get_response: Any) -> HttpResponseBase:
        early = self.before(request)
        if early is not None:
            return early
        return self.after(request, get_response(request))

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        return None

    def after(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        return response


class ContentSecurityPolicyMiddleware(_Middleware):
    """Add a Content-Security-Policy header unless the view set its own."""

    def after(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        if "Content-Security-Policy" not in response.headers:
            response.headers["Content-Security-Policy"] = content_security_policy(request)
        return response


def body_limit() -> int:
    """The largest request body any view takes: a recording, with the form's other fields beside it."""
    return MAX_RECORDING_BYTES + settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def body_too_large() -> str:
    """What a request with a body over ``body_limit`` is told."""
    return f"The request is larger than {body_limit() >> 20} MiB, more than anything here takes."


class BodySizeMiddleware(_Middleware):
    """Refuse a request whose declared body is bigger than any view takes before a view reads it.

    Under daphne such a body never gets this far (``inspector.daphne_http`` refuses it unread); this
    guards the other ways in (Django's test client, another ASGI server), where Django would parse it
    to disk first.
    """

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:  # Django answers a malformed length itself
            return None
        limit = body_limit()
        if declared <= limit:
            return None
        return HttpResponse(
            body_too_large(),
            status=413,
            content_type="text/plain",
        )


class NoStoreMiddleware(_Middleware):
    """Cache-Control: no-store on everything the app renders (pages, fragments, exports, the login
    pages): each is one person's, and may show what a server sent; no browser or proxy may keep it.

    Placed after the static files, which are the same for everyone and cached as WhiteNoise says.
    """

    def after(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        patch_cache_control(response, no_store=True)
        return response


class NulParameterMiddleware(_Middleware):
    """Refuse a NUL character in any query or form parameter, or a URL part: no text field takes
    one, and PostgreSQL refuses it in text, so the answer is a 400 here rather than a 500 anywhere.

    A view hook, placed after CSRF's: a big form is parsed on a worker thread, never on the event loop.
    """

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if self.is_async:
            setattr(self, "process_view", self._process_view_async)  # noqa: B010 - in an async chain

    async def _process_view_async(
        self, request: HttpRequest, view: Any, args: Any, kwargs: dict[str, Any]
    ) -> Any:
        if small_body(request):
            return NulParameterMiddleware.process_view(self, request, view, args, kwargs)
        return await sync_to_async(NulParameterMiddleware.process_view)(self, request, view, args, kwargs)

    def process_view(self, request: HttpRequest, view: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        values = [*request.GET.lists(), *(request.POST.lists() if request.method == "POST" else ())]
        named = [(name, [value]) for name, value in kwargs.items() if isinstance(value, str)]
        for name, items in [*values, *named]:
            if "\x00" in name or any("\x00" in item for item in items):
                return HttpResponseBadRequest(
                    f"{name.replace(chr(0), '?')[:60]} holds a NUL character, which no field takes.",
                    content_type="text/plain",
                )
        return None


_SAFE_METHODS = frozenset({"GET", "HEAD"})


class SameOriginMiddleware(_Middleware):
    """Refuse requests another origin makes: the inspector launches processes, so fail closed.

    A request whose Origin header names anyone but us is refused whatever its method, which stops
    cross-site fetches and DNS rebinding. Browsers that send fetch metadata also tell us when a
    request comes from another site, or another port of this host ("same-site"); only plain
    navigations (following a link) may come from there.
    """

    def before(self, request: HttpRequest) -> HttpResponseBase | None:
        refusal = self.refusal(request)
        if refusal:
            logger.warning("Forbidden (%s): %s", refusal, request.path)
            return HttpResponseForbidden(f"Forbidden: {refusal}.", content_type="text/plain")
        return None

    @staticmethod
    def refusal(request: HttpRequest) -> str | None:
        """Return why request must be refused, or None to let it through."""
        origin = request.headers.get("Origin")
        # get_host() validates Host against ALLOWED_HOSTS first (400 on failure).
        if origin is not None and not is_own_origin(origin, request.scheme or "", request.get_host()):
            return "cross-origin request"
        site = request.headers.get("Sec-Fetch-Site")
        if site in ("cross-site", "same-site"):
            navigation = request.headers.get("Sec-Fetch-Mode") == "navigate"
            if not (navigation and request.method in _SAFE_METHODS):
                return f"{site} request"
        return None


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise that also runs in an async chain; our static files are small, so they are read whole."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any = None, settings: Any = settings) -> None:
        super().__init__(get_response, settings)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        found = self.find_file(request.path_info) if self.autorefresh else self.files.get(request.path_info)
        if found is None:
            response: HttpResponseBase = await self.get_response(request)
            return response
        served = found.get_response(request.method, request.META)
        body = b""
        if served.file is not None:
            with served.file:
                body = served.file.read()
        answer = HttpResponse(body, status=int(served.status))
        del answer["Content-Type"]
        for name, value in served.headers:
            answer[name] = value
        return answer


class StorageFullMiddleware(MiddlewareMixin):
    """A write the database refused for a full disk: 503, saying so; pages that only read still work."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DatabaseError) or not storage.is_full(exception):
            return None
        logger.warning("%s %s: the database refused a write, its disk is full", request.method, request.path)
        hosted = settings.INSPECTOR_HOSTED
        where = "the disk of the database" if hosted else f"the data folder ({settings.DATA_DIR})"
        message = (
            f"Storage is full: this could not be saved. Free some space in {where}, then try again. "
            "Pages that only read still work."
        )
        template = "sessions/_error.html" if getattr(request, "htmx", False) else "error.html"
        response = render(request, template, {"message": message}, status=503)
        response.headers["Retry-After"] = "60"
        return response
