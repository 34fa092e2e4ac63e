"""How views and consumers talk to the runtime: typed messages over the channel layer, never direct calls."""

from __future__ import annotations

import asyncio

from channels.layers import get_channel_layer
from django.conf import settings

from sessions.models import McpSession
from sessions.runtime import messages as m
from sessions.runtime import workers
from sessions.runtime.host import ensure_embedded_runtime
from sessions.runtime.link import ChannelLayerDown, link_of
from sessions.runtime.store import in_db_thread

__all__ = [
    "ChannelLayerDown",
    "CommandFailed",
    "call",
    "request",
    "send_command",
    "start_session",
    "warm_start",
    "warm_starts",
]


class CommandFailed(Exception):
    """The session's owner is gone or refused the command."""


class NoAnswer(CommandFailed):
    """The owner did not answer in time."""


async def start_session(session: McpSession, intent: str = "") -> None:
    """Ask the runtime to open the session's connection (an owner task takes it from there).

    Hosted, with no engine worker alive or the channel layer down, the session fails at once and says
    so (it would otherwise show "starting" for ever); ``session`` then holds its new status and note.
    """
    ensure_embedded_runtime()
    if not settings.INSPECTOR_EMBEDDED_RUNTIME:
        failed = await in_db_thread(workers.ask_for_worker)(session.pk)
        if failed is not None:
            session.status, session.status_note = failed.session.status, failed.session.status_note
            session.last_seq, session.ended = failed.session.last_seq, failed.session.ended
            await workers.tell_failed([failed])
            return
    try:
        await get_channel_layer().send(m.RUNTIME_CHANNEL, m.StartSession(session.pk, intent).encode())
    except ChannelLayerDown as exc:
        note = f"the engine cannot be reached now: its channel layer is down ({exc}); reconnect in a moment"
        failed = await in_db_thread(workers.fail_start)(session.pk, note)
        if failed is not None:
            session.status, session.status_note = failed.session.status, failed.session.status_note
            session.last_seq, session.ended = failed.session.last_seq, failed.session.ended


def warm_starts() -> bool:
    """Whether a stdio server is started as the person is about to connect (the local mode's default)."""
    local = settings.INSPECTOR_EMBEDDED_RUNTIME and not settings.INSPECTOR_HOSTED
    return bool(settings.INSPECTOR_WARM_START and local)


async def warm_start(config: dict[str, object], intent: str) -> None:
    """Have the runtime start the config's stdio server now, for the connect of ``intent`` to come."""
    if warm_starts() and config.get("transport", "stdio") == "stdio":
        ensure_embedded_runtime()
        await get_channel_layer().send(m.RUNTIME_CHANNEL, m.WarmStart(config, intent).encode())


async def send_command(session: McpSession, command: m.Command, reply: str = "") -> None:
    """Send a command to the session's owner without waiting for an answer."""
    if session.is_tap:
        raise CommandFailed("a tap session is driven by its host: the inspector only records it")
    if not session.worker_channel:
        raise CommandFailed("the session is not live")
    ensure_embedded_runtime()
    await get_channel_layer().send(session.worker_channel, m.encode_command(command, reply))


async def _answer(reply: str, timeout: float) -> m.Reply:
    layer = get_channel_layer()
    try:
        answer = m.decode_reply(await asyncio.wait_for(layer.receive(reply), timeout))
    except TimeoutError:
        link = link_of(layer)
        if link is not None and not link.up:  # it may have answered: the answer could not come
            raise ChannelLayerDown(link.problem) from None
        raise NoAnswer("the session's owner did not answer") from None
    if isinstance(answer, m.Failed):
        raise CommandFailed(answer.error or "the command failed")
    return answer


async def call(session: McpSession, command: m.Command, timeout: float = 10.0) -> m.Reply:
    """Send a command and wait for the owner's reply."""
    reply = await get_channel_layer().new_channel()
    await send_command(session, command, reply)
    return await _answer(reply, timeout)


async def request(session: McpSession, command: m.Request) -> m.Started | m.Done:
    """Send an MCP request through the owner; return its outcome if it ends within ``command.wait``.

    The answer is ``Started`` when the request is still running (its outcome then reaches viewers as
    a ``CallDone`` event), else ``Done`` with the outcome.
    """
    reply = await get_channel_layer().new_channel()
    await send_command(session, command, reply)
    started = await _answer(reply, 10)
    assert isinstance(started, m.Started)
    try:
        done = await _answer(reply, command.wait if command.wait is not None else 2.0)
    except (NoAnswer, ChannelLayerDown):  # it runs: its card finishes when the live socket hears of it
        return started
    assert isinstance(done, m.Done)
    return done
