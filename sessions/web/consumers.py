"""The live view of one session: frames after N from the database, then whatever the owner publishes.

The browser speaks htmx's websocket extension: we send HTML fragments that swap out of band; it
sends JSON (form values) for filters and paging, the ids of the running call cards it shows, and which
panel it shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string

from sessions.models import McpSession, PendingReview
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.servers import LOG_LEVELS
from sessions.teams import access
from sessions.timeline.calls import call_context
from sessions.timeline.flow import FlowState
from sessions.timeline.overview import overview
from sessions.timeline.queries import PAGE, TimelineFilter, page_of_rows
from sessions.web import flow, live, logs, oauth, tasks, together

# How often, at most, a flood redraws the newest rows of a viewer's timeline (seconds), and how many
# it draws: a screenful, not a page (older rows are a click away), so the tab stays quick to answer.
JUMP_INTERVAL = 0.25
JUMP_ROWS = 50
# How many of the review cards a tab showed stay once ended, saying how and who answered.
ENDED_SHOWN = 3
# How many running call cards one tab may ask the socket to finish for it (see ``_watch_calls``).
WATCHED_CALLS = 50

__all__ = ["SessionConsumer"]


@database_sync_to_async
def _owned_session(public_id: str, user_id: int) -> McpSession | None:
    """The session if the person is a member of its team (any role may watch); else None."""
    found = access.session_with_role(user_id, public_id)
    return None if found is None else found[0]


@database_sync_to_async
def _refresh(session: McpSession) -> McpSession:
    session.refresh_from_db()
    return session


@database_sync_to_async
def _rows(session: McpSession, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
    return page_of_rows(session, flt, **where)


@database_sync_to_async
def _render_reviews(session: McpSession, seen: set[int]) -> tuple[str, set[int]]:
    """The waiting review cards, and how those this tab showed ended (who answered); the cards shown."""
    reviews = list(PendingReview.objects.filter(session=session, status=PendingReview.Status.WAITING))
    shown = seen | {r.pk for r in reviews}
    ended = (
        PendingReview.objects.filter(session=session, pk__in=shown)
        .exclude(status=PendingReview.Status.WAITING)
        .select_related("answered_by")
        .order_by("-resolved", "-pk")
    )
    resolved = list(ended[:ENDED_SHOWN])[::-1]
    context = {"reviews": reviews, "resolved": resolved, "session": session, "oob": True}
    return render_to_string("sessions/_reviews.html", context), shown


@database_sync_to_async
def _render_calls(session: McpSession, rpc_ids: list[int]) -> tuple[list[str], set[int]]:
    """What the timeline says of running call cards: the finished ones' state and body, the others'
    latest progress; and which are still running."""
    fragments: list[str] = []
    running: set[int] = set()
    for rpc_id in rpc_ids:
        context = call_context(session, rpc_id)
        if context["running"]:
            running.add(rpc_id)
            if context["progress"]:
                fragments.append(render_to_string("sessions/_progress.html", {**context, "oob": True}))
        else:
            fragments.append(render_to_string("sessions/calls/_finished.html", context))
    return fragments, running


def _call_ids(value: Any) -> list[int]:
    """Request ids a tab sent (a list of whole numbers); anything else is dropped, at most WATCHED_CALLS."""
    if not isinstance(value, list):
        return []
    ids = [v for v in value if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63]
    return ids[:WATCHED_CALLS]


@database_sync_to_async
def _render_activity(session: McpSession, activity_id: int) -> str:
    entry = together.activity_entry(session, activity_id)
    if entry is None:
        return ""
    return render_to_string("sessions/activity/_live_entry.html", {"entry": entry, "session": session})


@database_sync_to_async
def _render_note(session: McpSession, note_id: int, user_id: int) -> list[str]:
    """A new note's frame: its marker on the timeline, and its threads if the tab has it open."""
    context = together.note_update(session, note_id, user_id)
    if context is None:
        return []
    marker = {"seq": context["note_seq"], "count": context["count"], "oob": True}
    return [
        render_to_string("sessions/notes/_marker.html", marker),
        render_to_string("sessions/notes/_threads.html", context),
    ]


def _frame_number(text: str) -> int:
    """A frame number from the socket's query string: ASCII digits in range, else 0 (from the start)."""
    if text.isascii() and text.isdigit() and len(text) < 19:
        return int(text)
    return 0


class SessionConsumer(AsyncWebsocketConsumer):
    """Stream one session's timeline and state to a browser tab; thin: rendering and forwarding only."""

    session: McpSession
    group: str
    after: int
    filter: TimelineFilter
    browsing: bool
    oldest: int
    view: str  # "table" or "flow" (sessions/web/flow.py): how this tab draws the timeline
    flow: FlowState

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        found = await _owned_session(self.scope["url_route"]["kwargs"]["public_id"], user.pk)
        if found is None:
            await self.close(code=4404)
            return
        self.session = found
        self.group = found.group_name
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.after = _frame_number(query.get("after", ["0"])[0])
        self.filter = TimelineFilter.from_data({k: v[0] for k, v in query.items()})
        self.oldest = _frame_number(query.get("first", ["0"])[0])
        self.view = "flow" if query.get("view", [""])[0] == "flow" else "table"
        self.flow = FlowState()
        self.browsing = False
        self.panel: str | None = None  # the panel the tab shows, once it says
        self._jump_pending = False
        self._jump_task: asyncio.Task[None] | None = None
        self.reviews_shown: set[int] = set()
        self.calls_watched: set[int] = set()
        self.user_id, self.name = user.pk, user.get_username()
        self.roster = together.Roster()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._catch_up()
        await self._send_reviews()
        await self._send_authorizations()
        self.watching = ""
        await self._watch()
        await self._announce("join")
        self._beat_task = asyncio.get_running_loop().create_task(self._beat())

    async def _watch(self) -> None:
        """Tell the session's owner that a tab watches it (idle sessions end); a new owner hears it too."""
        if self.session.worker_channel and self.session.worker_channel != self.watching:
            with contextlib.suppress(client.CommandFailed):
                await client.send_command(self.session, m.Viewer(1))
            self.watching = self.session.worker_channel

    async def disconnect(self, code: int) -> None:
        for name in ("_jump_task", "_beat_task"):
            task = getattr(self, name, None)
            if task is not None:
                task.cancel()
        if hasattr(self, "roster"):
            with contextlib.suppress(Exception):  # the others drop this tab within EXPIRY anyway
                await self._announce("leave")
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if getattr(self, "watching", ""):
            self.session = await _refresh(self.session)
            if self.session.worker_channel == self.watching:
                with contextlib.suppress(client.CommandFailed):
                    await client.send_command(self.session, m.Viewer(-1))

    # --- what the browser asks ----------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        try:
            data = json.loads(text_data or "{}")
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: nothing asked
            return
        if not isinstance(data, dict):
            return
        action = data.get("action")
        if action == "filter":
            self.filter = TimelineFilter.from_data(data)
            self.browsing = False
            await self._replace_rows(await _rows(self.session, self.filter), live=True)
        elif action == "older":
            rows = await _rows(self.session, self.filter, before=self.oldest or self.after + 1)
            if rows:
                self.browsing = True
                await self._replace_rows(rows, live=False)
        elif action == "live" or (action == "view" and data.get("view") in flow.VIEWS):
            self.view = data["view"] if action == "view" else self.view
            self.browsing = False
            await self._replace_rows(await _rows(self.session, self.filter), live=True)
        elif action == "calls":
            await self._watch_calls(_call_ids(data.get("ids")))
        elif action == "panel" and isinstance(data.get("name"), str) and len(data["name"]) <= 40:
            before, self.panel = self.panel, data["name"]  # which live fragments it shows (live.fragments)
            if self.panel == "logging" and before not in (None, "logging"):
                # Lines stored between the panel's read and this message were not sent: redraw.
                await self._send_log(data.get("min_level"))

    # --- what the owner publishes (group messages) -----------------------------------------

    async def session_event(self, message: dict[str, Any]) -> None:
        """Every event of the session's group (see sessions/runtime/messages.py), by its kind."""
        match m.decode_event(message):
            case m.FramesStored() as event:
                await self._frames_stored(event)
            case m.StateChanged():
                await self._state_changed()
            case m.CallProgress() as event:
                # rpc_id too: the template names the card by it when the progress carries none.
                progress = event.fields()
                context = {"progress": progress, "rpc_id": progress.get("rpc_id"), "session": self.session}
                await self._send("sessions/_progress.html", {**context, "oob": True})
            case m.CallDone(outcome):
                # Only the card's state and body: its header, arguments and place stay put.
                context = await database_sync_to_async(call_context)(
                    self.session, outcome["rpc_id"], outcome=outcome
                )
                self.calls_watched.discard(outcome["rpc_id"])
                await self._send("sessions/calls/_finished.html", context)
            case m.ReviewChanged():
                await self._send_reviews()
            case m.AuthorizationChanged():
                await self._send_authorizations()
            case m.ActivityAdded(activity_id):
                fragment = await _render_activity(self.session, activity_id)
                if fragment:
                    await self.send(text_data=fragment)
            case m.NoteAdded(note_id):
                for fragment in await _render_note(self.session, note_id, self.user_id):
                    await self.send(text_data=fragment)
            case m.Presence() as event:
                await self._presence(event)

    # --- who else is watching (see sessions/web/together.py) --------------------------------

    async def _announce(self, kind: str) -> None:
        event = m.Presence(kind, self.channel_name, self.user_id, self.name)
        await self.channel_layer.group_send(self.group, m.encode_event(event))

    async def _presence(self, event: m.Presence) -> None:
        if event.kind == "join" and event.channel != self.channel_name:
            # Tell the newcomer this tab is here too: on its own channel, not the whole group.
            here = m.Presence("here", self.channel_name, self.user_id, self.name)
            with contextlib.suppress(Exception):
                await self.channel_layer.send(event.channel, m.encode_event(here))
        if self.roster.heard(event):
            await self._send_presence()

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(settings.INSPECTOR_PRESENCE_HEARTBEAT)
            with contextlib.suppress(Exception):  # a layer hiccup: the next beat tries again
                await self._announce("beat")
            if self.roster.prune():
                await self._send_presence()

    async def _send_presence(self) -> None:
        context = {"people": self.roster.people(), "me": self.user_id}
        await self._send("sessions/activity/_presence.html", context)

    async def _frames_stored(self, event: m.FramesStored) -> None:
        rows = [r for r in event.rows if r["seq"] > self.after]
        if self.calls_watched and event.answers:
            await self._watch_calls(sorted(self.calls_watched))
        if not self.browsing:
            if event.last - self.after > PAGE:
                # More arrived than a viewer shows (a flood): show the newest page instead of
                # appending, at most a few times a second however fast batches come.
                self._schedule_jump()
            else:
                if rows and rows[0]["seq"] > self.after + 1:
                    # A batch was dropped or cut short: fetch what is missing from the database.
                    missing = await _rows(self.session, TimelineFilter(), after=self.after, limit=PAGE)
                    rows = [r for r in missing if r["seq"] < rows[0]["seq"]] + rows
                shown = [r for r in rows if self.filter.matches(r)]
                if shown and not self._jump_pending and self.view == "flow":
                    await self.send(text_data=flow.appended(self.session, self.flow, shown))
                elif shown and not self._jump_pending:
                    await self._send(
                        "sessions/_timeline_append.html", {"rows": shown, "session": self.session}
                    )
        for fragment in live.fragments(self.session, rows, self.panel):
            await self.send(text_data=fragment)
        if tasks.touches(rows):
            await self.send(text_data=await database_sync_to_async(tasks.render_list)(self.session))
        self.after = max(self.after, event.last)
        await self._send("sessions/_frame_count.html", {"count": event.last})

    def _schedule_jump(self) -> None:
        if self._jump_pending:
            return
        self._jump_pending = True
        loop = asyncio.get_running_loop()
        self._jump_task = loop.create_task(self._jump_later())

    async def _jump_later(self) -> None:
        await asyncio.sleep(JUMP_INTERVAL)  # coalesce a flood's batches into one redraw
        self._jump_pending = False
        if not self.browsing:
            await self._replace_rows(await _rows(self.session, self.filter, limit=JUMP_ROWS), live=True)

    async def _state_changed(self) -> None:
        self.session = await _refresh(self.session)
        await self._watch()
        await self._send_state()
        if self.calls_watched:  # a session that ended ends its running calls
            await self._watch_calls(sorted(self.calls_watched))

    async def _watch_calls(self, rpc_ids: list[int]) -> None:
        """Bring a tab's running call cards up to date, and finish each later from the stored response.

        The tab asks on every (re)connect and for every running card it adds: an answer that came
        while its socket was down, or before the card was on the page, is not lost. A response not
        stored yet finishes the card when its frame is (``_frames_stored``), or ``CallDone`` does.
        """
        fragments, running = await _render_calls(self.session, rpc_ids)
        watched = (self.calls_watched - set(rpc_ids)) | running
        self.calls_watched = set(sorted(watched)[-WATCHED_CALLS:])  # the newest, however often it asks
        for fragment in fragments:
            await self.send(text_data=fragment)

    async def _send_state(self) -> None:
        await self._send("sessions/_session_state.html", {"session": self.session})
        await self._send("sessions/_session_actions.html", {"session": self.session, "oob": True})
        facts = await database_sync_to_async(overview)(self.session)
        await self._send("sessions/panels/overview.html", {"session": self.session, "oob": True, **facts})
        # "following live" only while the session is live: an ended one says so instead.
        controls = {"session": self.session, "live": not self.browsing}
        await self._send("sessions/_timeline_controls.html", controls)

    # --- helpers --------------------------------------------------------------------------

    async def _catch_up(self) -> None:
        rows = await _rows(self.session, self.filter, after=self.after, limit=PAGE + 1)
        if len(rows) > PAGE or (rows and not self.oldest) or self.view == "flow":
            rows = await _rows(self.session, self.filter)
            await self._replace_rows(rows, live=True)
        elif rows:
            await self._send("sessions/_timeline_append.html", {"rows": rows, "session": self.session})
        self.session = await _refresh(self.session)
        self.after = max(self.after, self.session.last_seq)
        await self._send("sessions/_frame_count.html", {"count": self.session.last_seq})
        # The state may have changed between the page's render and joining the group.
        await self._send_state()

    async def _replace_rows(self, rows: list[dict[str, Any]], *, live: bool) -> None:
        self.oldest = rows[0]["seq"] if rows else 0
        context = {"rows": rows, "session": self.session, "live": live, "filter": self.filter}
        if self.view == "flow":
            html, self.flow = await database_sync_to_async(flow.replaced)(self.session, rows, context)
            await self.send(text_data=html)
        else:
            await self._send("sessions/_timeline_replace.html", context)

    async def _send_reviews(self) -> None:
        html, self.reviews_shown = await _render_reviews(self.session, self.reviews_shown)
        await self.send(text_data=html)

    async def _send_authorizations(self) -> None:
        waiting = await database_sync_to_async(oauth.waiting_authorizations)(self.session)
        context = {"authorizations": waiting, "session": self.session, "oob": True}
        await self._send("sessions/oauth/_authorizations.html", context)

    async def _send_log(self, min_level: Any) -> None:
        level = min_level if min_level in LOG_LEVELS else "debug"
        lines = await database_sync_to_async(logs.log_lines)(self.session, level)
        await self._send("sessions/resources/_log_redraw.html", {"log_lines": lines})

    async def _send(self, template: str, context: dict[str, Any]) -> None:
        await self.send(text_data=render_to_string(template, context))
