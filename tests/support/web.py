"""Helpers for web tests: a live session runtime in the test's event loop, users, sessions, waits.

Tests that use these need ``@pytest.mark.django_db(transaction=True)``: the runtime writes from
worker threads, which a wrapping test transaction would hide.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from channels.db import database_sync_to_async
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers, get_channel_layer
from django.contrib.auth.models import User
from django.test import AsyncClient

from sessions.models import McpSession, PendingReview, TimelineFrame
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.host import ensure_embedded_runtime, stop_embedded_runtime
from support.teams import ateam_of

WAIT = 20.0
OUR_ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
"""A socket's headers as a page of the app sends them (the same origin)."""
SHARE_LINK = re.compile(r"/shared/([A-Za-z0-9_-]{20,})/")


@asynccontextmanager
async def fresh_layer() -> AsyncIterator[Any]:
    """A channel layer instance of this test's own, empty, closed at the end.

    Each test has its own event loop, and channels-redis keeps asyncio locks bound to the loop that
    made them.
    """
    channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)
    layer = get_channel_layer()
    await layer.flush()
    try:
        yield layer
    finally:
        await layer.flush()
        close_pools = getattr(layer, "close_pools", None)
        if close_pools is not None:
            await close_pools()
        channel_layers.backends.pop(DEFAULT_CHANNEL_LAYER, None)


@asynccontextmanager
async def live_runtime() -> AsyncIterator[None]:
    """Run the embedded runtime in this loop on a fresh channel layer; stop it after."""
    async with fresh_layer():
        ensure_embedded_runtime()
        try:
            yield
        finally:
            await stop_embedded_runtime("the test ended")


@contextmanager
def scripted_servers() -> Iterator[list[Any]]:
    """Meanwhile every session the runtime starts talks to a scripted server that answers the handshake
    (``sessions.engine.testing``): no process, no socket. Yields the targets it would have connected to."""
    from sessions.engine.testing import ScriptedTransport
    from sessions.runtime import owner

    targets: list[Any] = []

    def scripted(target: Any) -> ScriptedTransport:
        targets.append(target)
        return ScriptedTransport(handshake=True)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, "make_transport", scripted)
        yield targets


@database_sync_to_async
def make_user(name: str = "alice") -> User:
    user, _ = User.objects.get_or_create(username=name)
    return user


async def logged_in_client(user: User) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


def stdio_config(command: str, args: list[str], **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "test server",
        "transport": "stdio",
        "command": command,
        "args": args,
        "env": {},
        "protocol_version": "2025-11-25",
        "capabilities": {"review_roots": False},
        "timeout": 30,
        "max_total_timeout": 120,
    }
    config.update(extra)
    return config


def http_config(url: str, transport: str = "http", **extra: Any) -> dict[str, Any]:
    return stdio_config("", [], transport=transport, url=url, **extra)


async def wait_until(check: Callable[[], Any], timeout: float = WAIT, what: str = "condition") -> Any:
    """Poll a database condition until it holds (the runtime writes from other tasks)."""
    async with asyncio.timeout(timeout):
        while True:
            value = await database_sync_to_async(check)()
            if value:
                return value
            await asyncio.sleep(0.02)


async def start_session(user: User, config: dict[str, Any], roots: list[Any] | None = None) -> McpSession:
    """Create a session row, ask the runtime to start it, and wait until it is ready."""
    session = await McpSession.objects.acreate(
        owner=user, team=await ateam_of(user), name=config["name"], config=config, roots=roots or []
    )
    await client.start_session(session)

    def ready() -> McpSession | None:
        session.refresh_from_db()
        if session.status in ("failed", "closed"):
            raise AssertionError(f"session ended: {session.status_note}")
        return session if session.status == "ready" and session.worker_channel else None

    return await wait_until(ready, what="session ready")


async def frames_of(session: McpSession, **where: Any) -> list[TimelineFrame]:
    return [f async for f in TimelineFrame.objects.filter(session=session, **where).order_by("seq")]


async def frames_when(session: McpSession, **where: Any) -> list[TimelineFrame]:
    """The frames ``where`` selects, once there is one: an answer reaches its caller a moment before the
    recorder has stored the frames around it."""
    wanted = TimelineFrame.objects.filter(session=session, **where)
    await wait_until(wanted.exists, what=f"a frame {where} stored")
    return await frames_of(session, **where)


async def frames_stored(session: McpSession, *seqs: int) -> None:
    """Wait until the session's frames ``seqs`` are in the database: a chat or an eval run goes on once
    the owner has a tool's answer, and the recorder stores its frames a moment later."""
    wanted = set(seqs)

    def there() -> bool:
        return TimelineFrame.objects.filter(session=session, seq__in=wanted).count() == len(wanted)

    await wait_until(there, what=f"frames {sorted(wanted)} stored")


async def waiting_review(session: McpSession, method: str) -> PendingReview:
    def find() -> PendingReview | None:
        return PendingReview.objects.filter(session=session, method=method, status="waiting").first()

    return await wait_until(find, what=f"a waiting {method}")


def message(frame: TimelineFrame) -> Any:
    return json.loads(bytes(frame.raw))


async def session_communicator(user: User, path: str) -> Any:
    """Return a WebsocketCommunicator for ``path`` carrying ``user``'s session cookie, from our origin."""
    from channels.testing import WebsocketCommunicator

    from inspector.asgi import application

    client = AsyncClient()
    await client.aforce_login(user)
    cookies = "; ".join(f"{name}={morsel.value}" for name, morsel in client.cookies.items())
    return WebsocketCommunicator(application, path, headers=[*OUR_ORIGIN, (b"cookie", cookies.encode())])


def anonymous_communicator(path: str) -> Any:
    """Return a WebsocketCommunicator for ``path`` from our origin, signed in as nobody."""
    from channels.testing import WebsocketCommunicator

    from inspector.asgi import application

    return WebsocketCommunicator(application, path, headers=OUR_ORIGIN)


async def make_share_link(client: AsyncClient, session: McpSession, **fields: str) -> str:
    """Make a share link from the session's page, as its form does; return the token it shows once."""
    data = {"scope": "all", "expiry": "7d", "audience": "team", "label": "", **fields}
    response = await client.post(f"/s/{session.public_id}/shares/new", data)
    assert response.status_code == 200, response.content.decode()[:500]
    found = SHARE_LINK.search(response.content.decode())
    assert found, "the new link is shown"
    return found.group(1)


async def receive_until(communicator: Any, text: str, timeout: float = WAIT) -> str:
    """What the socket sends until ``text`` appears in it."""
    seen = ""
    async with asyncio.timeout(timeout):
        while text not in seen:
            seen += await communicator.receive_from(timeout=timeout)
    return seen


ANSWER_CARD = '<div hx-swap-oob="afterbegin:#call-list"><article id="call-'
"""How a form sent over the live socket is answered: its call card, at the top of the Requests list."""


async def receive_card(communicator: Any, text: str, timeout: float = WAIT) -> str:
    """The answer card of a form sent over the socket, and what followed it until ``text`` shows: the
    timeline's rows, which show the same text, may come first, and a card running past its half second
    finishes later."""
    seen = await receive_until(communicator, ANSWER_CARD, timeout)
    card = seen[seen.rindex(ANSWER_CARD) :]
    if text not in card:
        card += await receive_until(communicator, text, timeout)
    return card


async def wait_for_tool(session: McpSession, name: str, timeout: float = WAIT) -> None:
    """Wait until the server lists a tool (server-everything adds capability-gated tools a moment
    after `initialized`, and says so with notifications/tools/list_changed)."""

    def changes() -> int:
        return TimelineFrame.objects.filter(
            session=session, method="notifications/tools/list_changed"
        ).count()

    async with asyncio.timeout(timeout):
        while True:
            seen = await database_sync_to_async(changes)()
            answer = await request(session, "tools/list", None, wait=timeout)
            if name in {t["name"] for t in answer.get("result", {}).get("tools", [])}:
                return
            await wait_until(lambda seen=seen: changes() > seen)


def finish(response: Any) -> None:
    """Close a test-client response (streamed files need it) without closing the test's database
    connection: the request_finished signal would, inside the test's transaction."""
    from django.core.signals import request_finished
    from django.db import close_old_connections

    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


async def request(
    session: McpSession,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    wait: float = 2.0,
    **fields: Any,
) -> dict[str, Any]:
    """Send an MCP request through the session's owner; its outcome as one dict for assertions:
    ``{"event": "done", "result"|"error": …, "rpc_id", …}``, or ``{"event": "started", "rpc_id"}``."""
    answer = await client.request(session, m.Request(method, params, wait=wait, **fields))
    if isinstance(answer, m.Done):
        return {"event": "done", **answer.outcome}
    return {"event": "started", "rpc_id": answer.rpc_id}
