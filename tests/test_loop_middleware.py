"""Django's middleware run on the event loop (inspector/loop_middleware.py): the message storage."""

from __future__ import annotations

from typing import Any

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


async def test_a_view_s_first_read_rides_on_the_login_trip_to_the_thread(monkeypatch: Any) -> None:
    import threading

    from asgiref.sync import sync_to_async
    from django.contrib.auth.models import AnonymousUser

    from inspector import loop_middleware
    from inspector.http import first_read, reads_first
    from inspector.loop_middleware import LoginRequiredMiddleware

    person = type("Person", (), {"is_authenticated": True, "pk": 7})()
    reads: list[tuple[str, Any, str]] = []

    def read(request: Any, user: Any, public_id: str) -> str:
        reads.append((threading.current_thread().name, user, public_id))
        return f"session {public_id}"

    @reads_first(read)
    async def view(request: Any, public_id: str) -> HttpResponse:
        return HttpResponse(await first_read(request, read, public_id=public_id))

    async def through(request: Any, user: Any) -> Any:
        monkeypatch.setattr(loop_middleware, "get_user", lambda request: user)
        middleware = LoginRequiredMiddleware(sync_to_async(lambda request: HttpResponse()))
        return await middleware.process_view(request, view, (), {"public_id": "abc"})

    post = RequestFactory().post("/s/abc/tools/call")
    assert await through(post, person) is None
    assert post.read_first == "session abc" and reads == [(reads[0][0], person, "abc")]  # type: ignore[attr-defined]
    assert reads[0][0] != threading.current_thread().name  # on the request's thread, not the loop's
    assert (await view(post, public_id="abc")).content == b"session abc" and len(reads) == 1  # not read again

    get = RequestFactory().get("/s/abc/tools/call")  # not a method it reads first for: the view's own affair
    assert await through(get, person) is None and not hasattr(get, "read_first")
    anonymous = RequestFactory().post("/s/abc/tools/call")
    answer = await through(anonymous, AnonymousUser())  # nobody signed in: nothing read, the login asked
    assert answer is not None and answer.status_code == 302 and len(reads) == 1
