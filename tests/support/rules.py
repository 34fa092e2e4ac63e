"""What the one-test-per-rule engine tests share: a session over a scripted server, its verdicts."""

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sessions.engine import (
    ClientOptions,
    ClientSession,
    Frame,
)
from sessions.engine.testing import (
    ManualClock,
    ScriptedTransport,
    Sent,
)

STATELESS = "2026-07-28"
SERVER_INFO_META = {"io.modelcontextprotocol/serverInfo": {"name": "scripted", "version": "1.0.0"}}
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
LOG = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}}


def flagged(frame: Frame, code: str) -> list[str]:
    """The severities of the verdicts with ``code`` on ``frame`` (one entry per verdict)."""
    return [v.severity for v in frame.verdicts if v.code == code]


def options(**fields: Any) -> ClientOptions:
    """Options for a scripted session: no schema checks unless asked, and a clock that stands still."""
    fields.setdefault("validate", False)
    fields.setdefault("clock", ManualClock())
    return ClientOptions(**fields)


@contextlib.asynccontextmanager
async def connected(
    client: ClientOptions | None = None, **handshake: Any
) -> AsyncIterator[tuple[ClientSession, ScriptedTransport]]:
    """A ready session over a scripted server that answered the handshake with ``handshake`` fields."""
    server = ScriptedTransport(handshake=handshake or True)
    async with ClientSession(server, client or options()) as session:
        yield session, server


async def call(
    session: ClientSession, server: ScriptedTransport, method: str, params: dict[str, Any] | None = None
) -> Sent:
    """Start a request and return what the server received."""
    await session.start_request(method, params)
    return await server.next_sent(method)


def notification(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def progress(token: Any, value: Any) -> dict[str, Any]:
    return notification("notifications/progress", progressToken=token, progress=value)


def stateless(**fields: Any) -> ClientOptions:
    """Options for a scripted session of the stateless revision."""
    return options(protocol_version=STATELESS, **fields)
