"""Django's middleware run on the event loop (inspector/loop_middleware.py): the message storage."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.sessions.backends.cache import SessionStore
from django.http import HttpResponse
from django.test import RequestFactory

from inspector.loop_middleware import MessageMiddleware, _made


def _request(cookies: dict[str, str] | None = None) -> object:
    request = RequestFactory().get("/")
    request.COOKIES.update(cookies or {})
    request.session = SessionStore()  # type: ignore[attr-defined]
    return request


def _middleware() -> MessageMiddleware:
    return MessageMiddleware(lambda request: HttpResponse("ok"))


def test_a_request_that_never_uses_messages_never_makes_their_storage() -> None:
    request = _request()
    response = _middleware()(request)
    assert not _made(request)  # type: ignore[arg-type]
    assert "messages" not in response.cookies


def test_a_message_added_in_one_request_is_shown_in_the_next() -> None:
    middleware = MessageMiddleware(
        lambda request: (messages.success(request, "Session ended."), HttpResponse("ok"))[1]
    )
    first = _request()
    response = middleware(first)
    assert _made(first)  # type: ignore[arg-type]
    cookie = response.cookies["messages"].value
    assert cookie

    second = _request({"messages": cookie})
    shown: list[str] = []
    reader = MessageMiddleware(
        lambda request: (shown.extend(str(m) for m in messages.get_messages(request)), HttpResponse("ok"))[1]
    )
    answer = reader(second)
    assert shown == ["Session ended."]
    assert answer.cookies["messages"]["max-age"] == 0  # shown once: the cookie is cleared
