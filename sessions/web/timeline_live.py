"""What the session page's socket and a share's have in common: one session's timeline, live.

A tab asks for the frames after the last one it shows, then follows the session's group. A stored batch
is rendered once per process (``sessions/web/feed.py``) and each tab picks its rows by its filter; when
more than a screenful comes within a tick of the clock (``JUMP_INTERVAL``), tabs are sent the newest
rows at the next tick instead, all of them at the same moments so that tabs showing the same thing
share one rendering. The browser speaks htmx's websocket
extension: it is sent HTML fragments that swap out of band, and sends JSON (form values).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Hashable
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from sessions.runtime import messages as m
from sessions.timeline.queries import PAGE, TimelineFilter
from sessions.web import feed

__all__ = ["JUMP_INTERVAL", "JUMP_ROWS", "TimelineConsumer", "frame_number"]

# How often, at most, a flood redraws the newest rows of a viewer's timeline (seconds), and how many
# it draws: a screenful, not a page (older rows are a click away), so the tab stays quick to answer.
JUMP_INTERVAL = 0.25
JUMP_ROWS = 50


def frame_number(text: str) -> int:
    """A frame number from the socket's query string: ASCII digits in range, else 0 (from the start)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else 0


class TimelineConsumer(AsyncWebsocketConsumer):
    """A tab's live timeline: catching up, following batches, paging, filtering; subclasses say whose."""

    source: Hashable  # whose rows these are, as the process's renderings are keyed
    start: Any  # the wall time the rows' times count from
    after: int
    oldest: int
    filter: TimelineFilter
    browsing: bool
    view = "table"

    # --- what a subclass provides ---------------------------------------------------------

    async def read_rows(self, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
        """A page of rows from the database, as this tab may see them."""
        raise NotImplementedError

    async def batch_rows(self, event: m.FramesStored) -> list[dict[str, Any]]:
        """The rows of a stored batch, as this tab may see them (before its own filter)."""
        raise NotImplementedError

    def pane_context(self) -> dict[str, Any]:
        """What the timeline's pane and controls need besides the rows (the session, a share's base)."""
        raise NotImplementedError

    async def replaced(self, rows: list[dict[str, Any]], context: dict[str, Any]) -> str:
        """The message that replaces the rows shown with ``rows`` (the table; a subclass may draw a flow)."""
        rendered = feed.render_rows(rows, self.start)
        return render_to_string("sessions/_timeline_replace.html", {**context, "rendered": rendered})

    async def appended(self, rows: list[dict[str, Any]]) -> str | None:
        """The message that appends ``rows`` when the tab draws them itself (a flow); None: the table."""
        return None

    async def after_batch(self, event: m.FramesStored, rows: list[dict[str, Any]]) -> None:
        """What else a batch changes on the tab (a subclass's panels)."""

    # --- the timeline --------------------------------------------------------------------

    def read_query(self) -> dict[str, str]:
        """The socket's query: where the tab's rows end and begin, its filter."""
        query = {k: v[0] for k, v in parse_qs(self.scope.get("query_string", b"").decode()).items()}
        self.after = frame_number(query.get("after", "0"))
        self.caught_up = 0  # the newest frame the tab was brought up to date with when it connected
        self.oldest = frame_number(query.get("first", "0"))
        self.filter = TimelineFilter.from_data(query)
        self.browsing = False
        self._jump_pending = False
        self._jump_task: asyncio.Task[None] | None = None
        # The tick of the clock the last batch came in, how many rows came in it, and whether the one
        # before was a flood (``_flooding``).
        self._tick, self._tick_rows, self._flood = 0, 0, False
        return query

    async def timeline_action(self, data: dict[str, Any]) -> bool:
        """Do what the tab asked of its timeline; False if it asked something else."""
        action = data.get("action")
        if action == "filter":
            self.filter = TimelineFilter.from_data(data)
            await self.replace_rows(await self.read_rows(self.filter), live=True)
        elif action == "older":
            rows = await self.read_rows(self.filter, before=self.oldest or self.after + 1)
            if rows:
                await self.replace_rows(rows, live=False)
        elif action == "live":
            await self.replace_rows(await self.read_rows(self.filter), live=True)
        else:
            return False
        return True

    async def catch_up(self, last_seq: int) -> None:
        """Send what was stored after the tab's last row: appended, or the newest page if that is more.

        ``last_seq`` is the session's, read after joining its group and before these reads: every frame
        after it comes in a batch the tab hears of, and a batch's rows sent here are not sent again.
        """
        rows = await self.read_rows(self.filter, after=self.after, limit=PAGE + 1)
        if len(rows) > PAGE or (rows and not self.oldest) or self.view != "table":
            await self.replace_rows(await self.read_rows(self.filter), live=True)
        elif rows:
            await self.send(text_data=feed.appended(feed.render_rows(rows, self.start)))
            self.after = max(self.after, rows[-1]["seq"])
        self.after = self.caught_up = max(self.after, last_seq)
        count = render_to_string("sessions/_frame_count.html", {"count": last_seq, "oob": True})
        await self.send(text_data=count)

    async def replace_rows(self, rows: list[dict[str, Any]], *, live: bool) -> None:
        self.browsing = not live
        self.oldest = rows[0]["seq"] if rows else 0
        if rows:
            self.after = max(self.after, rows[-1]["seq"])
        context = {**self.pane_context(), "live": live, "filter": self.filter}
        await self.send(text_data=await self.replaced(rows, context))

    async def frames_stored(self, event: m.FramesStored) -> None:
        """A batch is stored: append the tab's new rows, or schedule a redraw of the newest in a flood."""
        batch = await feed.once((self.source, "batch", event.first, event.last), lambda: self._batch(event))
        await self.after_batch(
            event, batch.rows
        )  # the frame count, which ends the timeline's part, comes last
        if self.browsing or self._jump_pending:
            await self.send(text_data=batch.count)
        elif self._flooding(max(0, event.last - self.after)):
            # More arrived than a person can read as it comes: show the newest rows at the next tick.
            self._schedule_jump()
            await self.send(text_data=batch.count)
        else:
            rows = batch.rows
            if rows and rows[0]["seq"] > self.after + 1:
                # A batch was dropped or cut short: what is missing comes from the database, for this tab.
                missing = await self.read_rows(TimelineFilter(), after=self.after, limit=PAGE)
                missing = [r for r in missing if r["seq"] < rows[0]["seq"] and self.filter.matches(r)]
                if missing:
                    await self.send(text_data=await self._append(missing))
            drawn = await self.appended([r for r in rows if r["seq"] > self.after and self.filter.matches(r)])
            await self.send(
                text_data=drawn + batch.count if drawn else batch.message(self.filter, self.after)
            )
        self.after = max(self.after, event.last)

    async def _batch(self, event: m.FramesStored) -> feed.Batch:
        return feed.Batch(await self.batch_rows(event), self.start, event.last)

    async def _append(self, rows: list[dict[str, Any]]) -> str:
        return await self.appended(rows) or feed.appended(feed.render_rows(rows, self.start))

    def _flooding(self, new: int) -> bool:
        """Whether ``new`` rows, with the others of this tick of the clock, are more than a screenful; a
        tick that was makes the next one a flood too, so a steady flood is only ever redrawn."""
        tick = math.floor(asyncio.get_running_loop().time() / JUMP_INTERVAL)
        if tick != self._tick:
            self._flood = tick == self._tick + 1 and self._tick_rows > JUMP_ROWS
            self._tick, self._tick_rows = tick, 0
        self._tick_rows += new
        return new > PAGE or self._flood or self._tick_rows > JUMP_ROWS

    def _schedule_jump(self) -> None:
        if self._jump_pending:
            return
        self._jump_pending = True
        self._jump_task = asyncio.get_running_loop().create_task(self._jump_later())

    async def _jump_later(self) -> None:
        # Every tab wakes at the same ticks of the clock, so tabs with the same view share a redraw.
        loop = asyncio.get_running_loop()
        tick = math.floor(loop.time() / JUMP_INTERVAL) + 1
        await asyncio.sleep(tick * JUMP_INTERVAL - loop.time())
        self._jump_pending = False
        if self.browsing:
            return
        # A flow keeps state of its own: drawn for this tab alone.
        mine = self.channel_name if self.view != "table" else ""
        key = (self.source, "newest", self.filter, self.view, tick, mine)
        message, first, last = await feed.once(key, self._newest)
        if self.browsing:  # the tab asked for older rows while the newest were drawn
            return
        self.oldest, self.after = first, max(self.after, last)
        await self.send(text_data=message)

    async def _newest(self) -> tuple[str, int, int]:
        rows = await self.read_rows(self.filter, limit=JUMP_ROWS)
        context = {**self.pane_context(), "live": True, "filter": self.filter}
        message = await self.replaced(rows, context)
        return message, (rows[0]["seq"] if rows else 0), (rows[-1]["seq"] if rows else 0)

    def stop_jumping(self) -> None:
        if self._jump_task is not None:
            self._jump_task.cancel()

    @staticmethod
    def parsed(text_data: str | None) -> dict[str, Any] | None:
        """What the tab sent, if it is a JSON object (anything else asks nothing)."""
        try:
            data = json.loads(text_data or "{}")
        except (ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None
