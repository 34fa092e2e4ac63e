"""A view that cannot reach the engine (the channel layer's server is down) answers 503 and says so."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

from sessions.runtime.link import ChannelLayerDown

__all__ = ["EngineDownMiddleware"]

RETRY_AFTER = 5
"""Seconds: the layer reconnects by itself, within about this once Redis is back."""


class EngineDownMiddleware:
    """Turn a ``ChannelLayerDown`` out of a view into a 503 that says what is wrong, never a 500."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        response: Awaitable[HttpResponse] = self.get_response(request)
        return await response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, ChannelLayerDown):
            return None
        message = (
            f"The engine cannot be reached now: its channel layer is down ({exception}). "
            "It reconnects by itself: try again in a moment."
        )
        response = HttpResponse(render_to_string("sessions/_error.html", {"message": message}), status=503)
        response["Retry-After"] = str(RETRY_AFTER)
        return response
