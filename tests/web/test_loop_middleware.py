"""Django's middleware run on the event loop (inspector/loop_middleware.py). The first test fails when
the Django code it relies on changes: re-check the module against the new code (and its figures in
docs/bench.md) before updating the fingerprints."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import inspect
from typing import Any

import pytest
from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.sessions.backends.cache import SessionStore
from django.http import HttpResponse
from django.test import AsyncClient, RequestFactory
from support.teams import team_of

from inspector.loop_middleware import MessageMiddleware, _made
from sessions.models import McpSession

# What the module subclasses, or relies on to behave as it did when written (a short SHA-256 of each
# one's source, Django 5.2.19).
UPSTREAM = {
    "django.core.handlers.base.BaseHandler.load_middleware": "a1fb7ee5f8586195",
    "django.core.handlers.base.BaseHandler.adapt_method_mode": "1f6383b647ac2959",
    "django.utils.deprecation.MiddlewareMixin": "719062a110865f71",
    "django.middleware.security.SecurityMiddleware": "7c0daafdd127de47",
    "django.contrib.sessions.middleware.SessionMiddleware": "81dfc7bdab259429",
    "django.middleware.common.CommonMiddleware": "0a9411bc1510a38c",
    "django.middleware.csrf.CsrfViewMiddleware": "461e7a1110dea43f",
    "django.contrib.auth.middleware.AuthenticationMiddleware": "016788fb7214c6ed",
    "django.contrib.auth.middleware.LoginRequiredMiddleware": "ef2dcc6c9ed06b26",
    "django.contrib.auth.get_user": "08a852f701f765bc",
    "django.contrib.messages.middleware.MessageMiddleware": "68bbf99a11d6e87e",
    "django.middleware.clickjacking.XFrameOptionsMiddleware": "b005c3dcd16801e1",
}


def _find(name: str) -> Any:
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(name)


def test_the_upstream_code_it_relies_on_is_the_code_it_was_written_against() -> None:
    changed = [
        name
        for name, digest in UPSTREAM.items()
        if hashlib.sha256(inspect.getsource(_find(name)).encode()).hexdigest()[:16] != digest
    ]
    assert changed == [], f"changed upstream, re-check inspector/loop_middleware.py against it: {changed}"


@pytest.mark.django_db(transaction=True)
def test_a_logged_in_post_hops_to_a_thread_only_for_its_database_work(monkeypatch: Any) -> None:
    """Django runs every hook of its middleware in a thread in an async chain; these run in place."""
    from asgiref import sync

    alice = User.objects.create(username="alice")
    session = McpSession.objects.create(owner=alice, team=team_of(alice), name="everything")
    hops: list[str] = []
    real = sync.SyncToAsync.__call__

    async def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        func = self.func
        while isinstance(func, functools.partial):
            func = func.func
        hops.append(getattr(func, "__qualname__", type(func).__name__))
        return await real(self, *args, **kwargs)

    async def post() -> int:
        client = AsyncClient(enforce_csrf_checks=True)
        await client.aforce_login(alice)
        await client.get("/")
        token = client.cookies["mcp_inspector_csrftoken"].value
        monkeypatch.setattr(sync.SyncToAsync, "__call__", counted)
        ping = f"/s/{session.public_id}/ping"  # the session is not live: the pong says so
        response = await client.post(ping, {"x": "1"}, headers={"X-CSRFToken": token})
        return response.status_code

    assert asyncio.run(post()) == 200
    hooks = [h for h in hops if "Middleware.process_" in h]
    assert hooks == [], hooks
    assert "get_user" in hops  # who is signed in: the one trip of the login check


def _request(cookies: dict[str, str] | None = None) -> Any:
    request = RequestFactory().get("/")
    request.COOKIES.update(cookies or {})
    request.session = SessionStore()
    return request


def test_a_request_that_never_uses_messages_never_makes_their_storage() -> None:
    request = _request()
    response = MessageMiddleware(lambda request: HttpResponse("ok"))(request)
    assert not _made(request)
    assert "messages" not in response.cookies


def test_a_message_added_in_one_request_is_shown_in_the_next() -> None:
    middleware = MessageMiddleware(
        lambda request: (messages.success(request, "Session ended."), HttpResponse("ok"))[1]
    )
    first = _request()
    response = middleware(first)
    assert _made(first)
    cookie = response.cookies["messages"].value
    assert cookie

    shown: list[str] = []
    reader = MessageMiddleware(
        lambda request: (shown.extend(str(m) for m in messages.get_messages(request)), HttpResponse("ok"))[1]
    )
    answer = reader(_request({"messages": cookie}))
    assert shown == ["Session ended."]
    assert answer.cookies["messages"]["max-age"] == 0  # shown once: the cookie is cleared
