"""One host connection through a tap endpoint, one session, whichever web process its requests land in.

The process that records a connection's session (its owner: the one that served its ``initialize``)
writes a ``teams.TapConnection`` row once the server gives the connection its ``Mcp-Session-Id``. A
request carrying that id that lands in another web process is forwarded upstream by that process as
any request is, but its exchange's items (``http-request``, ``http-chunk``...) are handed to the owner
over the channel layer (the session's ``worker_channel``, the owner hub's own channel) rather than
recorded here: the owner makes them frames in its one sequence, with its one observer, so the pairing
of answers to requests and the verdicts span the whole connection. When the owner is gone (its session
no longer live), the next request makes a session here, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Iterator
from typing import Any

from channels.layers import BaseChannelLayer
from django.db import IntegrityError

from sessions.models import McpSession
from sessions.runtime import store
from sessions.teams.models import TapConnection

__all__ = ["ITEMS", "RemoteTap", "owner_of", "save"]

log = logging.getLogger(__name__)

ITEMS = "tap.items"
"""The channel-layer message that carries another process's items of a connection to its owner."""


class RemoteTap:
    """A host connection another web process records: this process forwards its requests and sends
    their items to that process's hub, in order (one sender at a time)."""

    def __init__(self, layer: BaseChannelLayer, channel: str, pk: int, sid: str, prefix: str) -> None:
        self.layer, self.channel, self.pk, self.sid = layer, channel, pk, sid
        # Exchange ids of this process, apart from the owner's own (its are numbers).
        self.ids: Iterator[int | str] = (f"{prefix}#{n}" for n in itertools.count(1))
        self.in_flight = 0
        self.found = time.monotonic()
        self.queue: asyncio.Queue[list[Any] | None] = asyncio.Queue()
        self.sender = asyncio.create_task(self._send(), name=f"tap-remote-{pk}")

    def put(self, what: str, *payload: Any) -> None:
        self.queue.put_nowait([what, list(payload), time.time()])

    def end(self, note: str) -> None:
        self.put("end", note)

    def close(self) -> None:
        """No more items: the sender stops once what is queued is sent."""
        self.queue.put_nowait(None)

    async def _send(self) -> None:
        while True:
            item = await self.queue.get()
            batch: list[list[Any]] = []
            while item is not None:
                batch.append(item)
                if self.queue.empty():
                    break
                item = self.queue.get_nowait()
            if batch:
                try:
                    await self.layer.send(self.channel, {"type": ITEMS, "session": self.pk, "items": batch})
                except Exception as exc:  # the owner's items are lost; the host's traffic is not
                    log.warning("handing a tap connection's items to its web process failed: %s", exc)
            if item is None:
                return


@store.in_db_thread
def owner_of(endpoint_pk: int, sid: str) -> tuple[int, str] | None:
    """The live session recording this connection, and its owner's channel; None when there is none."""
    found = (
        TapConnection.objects.filter(
            endpoint_id=endpoint_pk, mcp_session_id=sid, session__status__in=McpSession.LIVE
        )
        .exclude(session__worker_channel="")
        .values_list("session_id", "session__worker_channel")
        .first()
    )
    return (int(found[0]), str(found[1])) if found is not None else None


@store.in_db_thread
def save(endpoint_pk: int, sid: str, session_pk: int) -> None:
    """The connection's session, for the other web processes to find (a newer one replaces an old one)."""
    with contextlib.suppress(
        IntegrityError
    ):  # recorded by another process at the same moment: its row stands
        TapConnection.objects.update_or_create(
            endpoint_id=endpoint_pk, mcp_session_id=sid[:200], defaults={"session_id": session_pk}
        )
