"""The live view of a share: what ``SessionConsumer`` does for the session page, read-only and redacted.

It follows the session's group for new frames and state, shows only the share's scope, redacts every
fragment it sends, and sends the session's owner nothing at all (a shared viewer is not a viewer the
owner counts, and can ask it nothing). It also joins the share's own group: revoking the link sends
``share.revoked`` there, and the socket closes; so does reaching the link's expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string
from django.utils import timezone

from sessions.runtime import messages as m
from sessions.teams.models import Share
from sessions.timeline.queries import PAGE, TimelineFilter
from sessions.timeline.shared import SharedSession, find_share
from sessions.web.shares import may_open

__all__ = ["CLOSE_GONE", "SharedConsumer"]

# Close codes: the link is revoked or expired (htmx does not reconnect on these), or opens nothing.
CLOSE_GONE = 4410
CLOSE_UNKNOWN = 4404
CLOSE_LOGIN = 4401


def _frame_number(text: str) -> int:
    """A frame number from the socket's query string: ASCII digits in range, else 0 (from the start)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else 0


@database_sync_to_async
def _open(token: str, user: Any) -> tuple[Share | None, SharedSession | None, str]:
    share = find_share(token)
    why = may_open(share, user)
    if why or share is None:
        return share, None, why or "unknown"
    return share, SharedSession.of(share), ""


@database_sync_to_async
def _rows(shared: SharedSession, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
    return shared.rows(flt, **where)


@database_sync_to_async
def _refreshed(shared: SharedSession) -> Any:
    """The session read again, as the share shows it."""
    shared.session.refresh_from_db()
    return shared.shown_session()


@database_sync_to_async
def _still_open(share: Share) -> bool:
    share.refresh_from_db(fields=["revoked", "expires"])
    return share.usable


class SharedConsumer(AsyncWebsocketConsumer):
    """Stream a share's scope of one session, redacted; it takes nothing but view changes."""

    share: Share
    shared: SharedSession
    after: int
    oldest: int
    filter: TimelineFilter
    browsing: bool

    async def connect(self) -> None:
        token = self.scope["url_route"]["kwargs"]["token"]
        share, shared, why = await _open(token, self.scope.get("user"))
        if shared is None or share is None:
            codes = {"login": CLOSE_LOGIN, "revoked": CLOSE_GONE, "expired": CLOSE_GONE}
            await self.close(code=codes.get(why, CLOSE_UNKNOWN))
            return
        self.share, self.shared = share, shared
        self.groups_joined = [shared.session.group_name, share.group_name]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.after = _frame_number(query.get("after", ["0"])[0])
        self.oldest = _frame_number(query.get("first", ["0"])[0])
        self.filter = TimelineFilter()
        self.browsing = False
        self.shown: Any = None  # the session as the share shows it, once read (_send_state)
        self._expiry: asyncio.Task[None] | None = None
        await self.accept()
        # Revoked between the check and joining its group: the message went by, so look again.
        if not await _still_open(share):
            await self._gone(share.state)
            return
        if share.expires is not None:
            delay = (share.expires - timezone.now()).total_seconds()
            self._expiry = asyncio.get_running_loop().create_task(self._expire_after(delay))
        await self._catch_up()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "_expiry", None) is not None and self._expiry is not asyncio.current_task():
            self._expiry.cancel()  # type: ignore[union-attr]
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    # --- what the browser asks: only how to view --------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "{}")
        except (ValueError, RecursionError):
            return
        if not isinstance(data, dict):
            return
        action = data.get("action")
        if action == "filter":
            self.filter = TimelineFilter.from_data(data)
            self.browsing = False
            await self._replace_rows(await _rows(self.shared, self.filter), live=True)
        elif action == "older":
            rows = await _rows(self.shared, self.filter, before=self.oldest or self.after + 1)
            if rows:
                self.browsing = True
                await self._replace_rows(rows, live=False)
        elif action == "live":
            self.browsing = False
            await self._replace_rows(await _rows(self.shared, self.filter), live=True)
        # Anything else (a request, an answer, a cancel) is not something a share can do: ignored.

    # --- the session's group, and the share's ---------------------------------------------------

    async def session_event(self, message: dict[str, Any]) -> None:
        """New frames and state changes; calls, progress and reviews are not part of a share."""
        match m.decode_event(message):
            case m.FramesStored() as event:
                await self._frames_stored(event)
            case m.StateChanged():
                await self._send_state(await _refreshed(self.shared))

    async def share_revoked(self, message: dict[str, Any]) -> None:
        await self._gone("revoked")

    async def _expire_after(self, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))  # a timer, not a wait for another task
        await self._gone("expired")

    async def _gone(self, state: str) -> None:
        with contextlib.suppress(Exception):
            await self.send(text_data=render_to_string("shares/_gone_live.html", {"state": state}))
        await self.close(code=CLOSE_GONE)

    async def _frames_stored(self, event: m.FramesStored) -> None:
        if not self.browsing and event.last > self.after:
            if event.last - self.after > PAGE:
                await self._replace_rows(await _rows(self.shared, self.filter), live=True)
            else:
                # Read from the database: it may hold frames of batches whose events come next.
                rows = await _rows(self.shared, self.filter, after=self.after, limit=PAGE)
                if rows:
                    await self._send("sessions/_timeline_append.html", {"rows": rows})
                    self.after = max(self.after, rows[-1]["seq"])
        self.after = max(self.after, event.last)
        await self._send("sessions/_frame_count.html", {"count": event.last})

    # --- helpers ----------------------------------------------------------------------------

    async def _catch_up(self) -> None:
        rows = await _rows(self.shared, self.filter, after=self.after, limit=PAGE + 1)
        if len(rows) > PAGE or (rows and not self.oldest):
            await self._replace_rows(await _rows(self.shared, self.filter), live=True)
        elif rows:
            await self._send("sessions/_timeline_append.html", {"rows": rows})
        shown = await _refreshed(self.shared)
        self.after = max(self.after, shown.last_seq)
        await self._send("sessions/_frame_count.html", {"count": shown.last_seq})
        await self._send_state(shown)

    async def _send_state(self, shown: Any) -> None:
        self.shown = shown
        await self._send("sessions/_session_state.html", {"session": shown})
        facts = await database_sync_to_async(self.shared.overview)()
        await self._send("sessions/panels/overview.html", {"session": shown, "oob": True, **facts})
        controls = {"session": shown, "live": not self.browsing}
        await self._send("sessions/_timeline_controls.html", controls)

    async def _replace_rows(self, rows: list[dict[str, Any]], *, live: bool) -> None:
        self.oldest = rows[0]["seq"] if rows else 0
        context = {"rows": rows, "live": live, "filter": self.filter, "session": self.shown}
        await self._send("sessions/_timeline_replace.html", context)

    async def _send(self, template: str, context: dict[str, Any]) -> None:
        shared = {"base": f"/shared/{self.scope['url_route']['kwargs']['token']}/"}
        start = self.shared.session.start_wall  # timeline rows show their time since it
        await self.send(text_data=render_to_string(template, {"t0": start, **context, "shared": shared}))
