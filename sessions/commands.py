"""How views and consumers talk to the runtime: messages over the channel layer, never direct calls."""

from __future__ import annotations

import asyncio
from typing import Any

from channels.layers import get_channel_layer

from sessions.models import McpSession
from sessions.runtime import RUNTIME_CHANNEL, ensure_embedded_runtime

__all__ = ["CommandFailed", "request", "send_command", "start_session"]


class CommandFailed(Exception):
    """The session's owner is gone or refused the command."""


async def start_session(session: McpSession) -> None:
    """Ask the runtime to open the session's connection (an owner task takes it from there)."""
    ensure_embedded_runtime()
    await get_channel_layer().send(RUNTIME_CHANNEL, {"type": "session.start", "session_id": session.pk})


async def send_command(session: McpSession, command: str, **fields: Any) -> None:
    """Send a command to the session's owner without waiting for an answer."""
    if not session.worker_channel:
        raise CommandFailed("the session is not live")
    ensure_embedded_runtime()
    await get_channel_layer().send(
        session.worker_channel, {"type": "owner.command", "command": command, **fields}
    )


async def call(session: McpSession, command: str, timeout: float = 10.0, **fields: Any) -> dict[str, Any]:
    """Send a command and wait for the owner's first reply."""
    layer = get_channel_layer()
    reply = await layer.new_channel()
    await send_command(session, command, reply=reply, **fields)
    try:
        answer: dict[str, Any] = await asyncio.wait_for(layer.receive(reply), timeout)
    except TimeoutError:
        raise CommandFailed("the session's owner did not answer") from None
    if answer.get("event") == "error":
        raise CommandFailed(answer.get("error", "the command failed"))
    return answer


async def request(
    session: McpSession,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    wait: float = 2.0,
    **fields: Any,
) -> dict[str, Any]:
    """Send an MCP request through the owner; return its outcome if it ends within ``wait`` seconds.

    The answer is ``{"event": "started", "rpc_id": …}`` when the request is still running (its
    outcome then reaches viewers as a ``call.done`` group message), else the ``done`` outcome.
    """
    layer = get_channel_layer()
    reply = await layer.new_channel()
    await send_command(session, "request", reply=reply, method=method, params=params, wait=wait, **fields)
    try:
        started: dict[str, Any] = await asyncio.wait_for(layer.receive(reply), 10)
    except TimeoutError:
        raise CommandFailed("the session's owner did not answer") from None
    if started.get("event") == "error":
        raise CommandFailed(started.get("error", "the request failed"))
    try:
        done: dict[str, Any] = await asyncio.wait_for(layer.receive(reply), wait)
    except TimeoutError:
        return started
    return done
