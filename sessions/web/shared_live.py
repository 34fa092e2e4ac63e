"""The live view of a share: what ``SessionConsumer`` does for the session page, read-only and redacted.

It follows the session's group for new frames and state, shows only the share's scope, redacts every
fragment it sends, and sends the session's owner nothing at all (a shared viewer is not a viewer the
owner counts, and can ask it nothing). It also joins the share's own group: revoking the link sends
``share.revoked`` there, and the socket closes; so does reaching the link's expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

from django.template.loader import render_to_string
from django.utils import timezone

from sessions.runtime import messages as m
from sessions.runtime.db_threads import in_pages_thread
from sessions.teams.models import Share
from sessions.timeline.queries import TimelineFilter
from sessions.timeline.shared import SharedSession, find_share
from sessions.web import feed
from sessions.web.shares import may_open
from sessions.web.timeline_live import TimelineConsumer

__all__ = ["CLOSE_GONE", "SharedConsumer"]

# Close codes: the link is revoked or expired (htmx does not reconnect on these), or opens nothing.
CLOSE_GONE = 4410
CLOSE_UNKNOWN = 4404
CLOSE_LOGIN = 4401


@in_pages_thread
def _open(token: str, user: Any) -> tuple[Share | None, SharedSession | None, str]:
    share = find_share(token)
    why = may_open(share, user)
    if why or share is None:
        return share, None, why or "unknown"
    return share, SharedSession.of(share), ""


@in_pages_thread
def _rows(shared: SharedSession, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
    return shared.rows(flt, **where)


@in_pages_thread
def _batch_rows(shared: SharedSession, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return shared.redacted_rows([r for r in rows if shared.in_scope(r)])


@in_pages_thread
def _refreshed(shared: SharedSession) -> Any:
    """The session read again, as the share shows it."""
    shared.session.refresh_from_db()
    return shared.shown_session()


@in_pages_thread
def _still_open(share: Share) -> bool:
    share.refresh_from_db(fields=["revoked", "expires"])
    return share.usable


class SharedConsumer(TimelineConsumer):
    """Stream a share's scope of one session, redacted; it takes nothing but view changes."""

    share: Share
    shared: SharedSession

    async def connect(self) -> None:
        token = self.scope["url_route"]["kwargs"]["token"]
        share, shared, why = await _open(token, self.scope.get("user"))
        if shared is None or share is None:
            codes = {"login": CLOSE_LOGIN, "revoked": CLOSE_GONE, "expired": CLOSE_GONE}
            await self.close(code=codes.get(why, CLOSE_UNKNOWN))
            return
        self.share, self.shared = share, shared
        # Every viewer of one share is shown the same redacted rows: renderings are the share's.
        self.source, self.start = share.group_name, shared.session.start_wall
        self.base = f"/shared/{token}/"
        self.groups_joined = [shared.session.group_name, share.group_name]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        self.read_query()
        self.filter = TimelineFilter()
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
        self.shown, drawn = await self._drawn_state()
        await self.catch_up(self.shown.last_seq)
        await self._send_state(drawn)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "_expiry", None) is not None and self._expiry is not asyncio.current_task():
            self._expiry.cancel()  # type: ignore[union-attr]
        if hasattr(self, "filter"):
            self.stop_jumping()
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    # --- the timeline, as the share shows it ------------------------------------------------

    async def read_rows(self, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
        return await _rows(self.shared, flt, **where)

    async def batch_rows(self, event: m.FramesStored) -> list[dict[str, Any]]:
        return await _batch_rows(self.shared, event.rows)

    def pane_context(self) -> dict[str, Any]:
        return {"session": self.shown, "shared": {"base": self.base}}

    # --- what the browser asks: only how to view --------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        data = self.parsed(text_data)
        if data is not None:
            # Anything but a view change (a request, an answer, a cancel) is not something a share can do.
            await self.timeline_action(data)

    # --- the session's group, and the share's ---------------------------------------------------

    async def session_event(self, message: dict[str, Any]) -> None:
        """New frames and state changes; calls, progress and reviews are not part of a share."""
        match m.decode_event(message):
            case m.FramesStored() as event:
                await self.frames_stored(event)
            case m.StateChanged() as event:
                key = (self.source, "state", event.serial)
                shown, drawn = await feed.once(key, self._drawn_state)
                self.shown = copy.copy(shown)  # each viewer its own, as each tab has
                await self._send_state(drawn)

    async def share_revoked(self, message: dict[str, Any]) -> None:
        await self._gone("revoked")

    async def _expire_after(self, delay: float) -> None:
        await asyncio.sleep(max(0.0, delay))  # a timer, not a wait for another task
        await self._gone("expired")

    async def _gone(self, state: str) -> None:
        with contextlib.suppress(Exception):
            await self.send(text_data=render_to_string("shares/_gone_live.html", {"state": state}))
        await self.close(code=CLOSE_GONE)

    async def _drawn_state(self) -> tuple[Any, str]:
        """The session read again as the share shows it, and its state and overview drawn: the same for
        every viewer of the share (its group names the share)."""
        shown = await _refreshed(self.shared)
        facts = await in_pages_thread(self.shared.overview)()
        context = {"shared": {"base": self.base}, "session": shown, "oob": True}
        drawn = render_to_string("sessions/_session_state.html", context)
        return shown, drawn + render_to_string("sessions/panels/overview.html", {**context, **facts})

    async def _send_state(self, drawn: str) -> None:
        """The state and overview drawn for the share, with this viewer's own timeline controls."""
        controls = {**self.pane_context(), "live": not self.browsing, "oob": True}
        await self.send(text_data=drawn + render_to_string("sessions/_timeline_controls.html", controls))
