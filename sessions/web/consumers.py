"""The session page's live socket: its timeline (``TimelineConsumer``), and everything else the owner
publishes: state, call progress and answers, review cards, authorizations, activity, notes, presence.

Besides filters and paging, the tab sends the ids of the running call cards it shows, and which panel it
shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string

from sessions.frames import stored_rpc_id
from sessions.models import McpSession, PendingReview
from sessions.runtime import client
from sessions.runtime import messages as m
from sessions.runtime.db_threads import in_pages_thread
from sessions.runtime.link import Link, link_of
from sessions.servers import LOG_LEVELS
from sessions.teams import access
from sessions.timeline.calls import call_context, draws_a_card
from sessions.timeline.flow import FlowState
from sessions.timeline.overview import overview
from sessions.timeline.queries import TimelineFilter, page_of_rows
from sessions.web import (
    calls,
    feed,
    flow,
    live,
    llm,
    logs,
    oauth,
    prompts,
    resources,
    tap_controls,
    tasks,
    together,
    tools,
)
from sessions.web.shortcuts import placed, refusal
from sessions.web.timeline_live import TimelineConsumer

logger = logging.getLogger(__name__)

# How many of the review cards a tab showed stay once ended, saying how and who answered.
ENDED_SHOWN = 3
# How many running call cards one tab may ask the socket to finish for it (see ``_watch_calls``).
WATCHED_CALLS = 50
# How many of a tab's sent forms may wait for their answers at once (a call's waits half a second at most).
SENT_AT_ONCE = 50
# The forms a tab sends over its socket while it is open (ws-send), and what answers each.
SENT_FORMS = {
    "call": tools.call_from_socket,
    "request": calls.request_from_socket,
    "prompt": prompts.prompt_from_socket,
    "template": resources.template_from_socket,
}

__all__ = ["SessionConsumer"]


@in_pages_thread
def _owned_session(public_id: str, user_id: int) -> McpSession | None:
    """The session if the person is a member of its team (any role may watch); else None."""
    found = access.session_with_role(user_id, public_id)
    return None if found is None else found[0]


@in_pages_thread
def _refresh(session: McpSession) -> McpSession:
    session.refresh_from_db()
    return session


@in_pages_thread
def _rows(session: McpSession, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
    return page_of_rows(session, flt, **where)


@in_pages_thread
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
    context = {
        "reviews": reviews,
        "resolved": resolved,
        "session": session,
        "oob": True,
        "draft_models": llm.offered_to(session, reviews),
    }
    return render_to_string("sessions/_reviews.html", context), shown


@in_pages_thread
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


def _activity(session: McpSession, activity_id: int, fields: dict[str, Any]) -> Callable[[], Awaitable[str]]:
    """An activity entry as the log shows it: from the event's fields when it has them, else read back."""

    async def make() -> str:
        entry: Any
        if fields:
            entry = together.entry_of(fields)
        else:
            entry = await in_pages_thread(together.activity_entry)(session, activity_id)
        if entry is None:
            return ""
        return render_to_string("sessions/activity/_live_entry.html", {"entry": entry, "session": session})

    return make


@in_pages_thread
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


class SessionConsumer(TimelineConsumer):
    """Stream one session's timeline and state to a browser tab; thin: rendering and forwarding only."""

    session: McpSession
    group: str
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
        self.group = self.source = found.group_name
        self.start = found.start_wall
        query = self.read_query()
        self.view = "flow" if query.get("view") == "flow" else "table"
        self.flow = FlowState()
        self.panel: str | None = None  # the panel the tab shows, once it says
        self.reviews_shown: set[int] = set()
        self.calls_watched: set[int] = set()
        self.calls_sent: set[asyncio.Task[None]] = set()
        self.user_id, self.name = user.pk, user.get_username()
        self.roster = together.Roster()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self.session = await _refresh(self.session)
        await self.catch_up(self.session.last_seq)
        # The state may have changed between the page's render and joining the group.
        await self._send_state()
        await self._send_reviews()
        await self._send_authorizations()
        self.watching = ""
        await self._watch()
        await self._announce("join")
        self._beat_task = asyncio.get_running_loop().create_task(self._beat())
        self.layer_link = link_of(self.channel_layer)
        if self.layer_link is not None:
            self._link_task = asyncio.get_running_loop().create_task(self._follow_link(self.layer_link))

    async def _watch(self) -> None:
        """Tell the session's owner that a tab watches it (idle sessions end); a new owner hears it too."""
        if self.session.worker_channel and self.session.worker_channel != self.watching:
            with contextlib.suppress(client.CommandFailed, client.ChannelLayerDown):
                await client.send_command(self.session, m.Viewer(1))
            self.watching = self.session.worker_channel

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "filter"):
            self.stop_jumping()
        for task in getattr(self, "calls_sent", ()):
            task.cancel()  # the call goes on in its owner; the timeline has its card
        if getattr(self, "_beat_task", None) is not None:
            self._beat_task.cancel()
        if getattr(self, "_link_task", None) is not None:
            self._link_task.cancel()
        if hasattr(self, "roster"):
            with contextlib.suppress(Exception):  # the others drop this tab within EXPIRY anyway
                await self._announce("leave")
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
        if getattr(self, "watching", ""):
            self.session = await _refresh(self.session)
            if self.session.worker_channel == self.watching:
                with contextlib.suppress(client.CommandFailed, client.ChannelLayerDown):
                    await client.send_command(self.session, m.Viewer(-1))

    # --- the timeline, as this session's page has it -------------------------------------------

    async def read_rows(self, flt: TimelineFilter, **where: Any) -> list[dict[str, Any]]:
        return await _rows(self.session, flt, **where)

    async def batch_rows(self, event: m.FramesStored) -> list[dict[str, Any]]:
        return event.rows

    def pane_context(self) -> dict[str, Any]:
        return {"session": self.session}

    async def replaced(self, rows: list[dict[str, Any]], context: dict[str, Any]) -> str:
        if self.view != "flow":
            return await super().replaced(rows, context)
        html, self.flow = await in_pages_thread(flow.replaced)(self.session, rows, context)
        return html

    async def appended(self, rows: list[dict[str, Any]]) -> str | None:
        if self.view != "flow":
            return None
        return flow.appended(self.session, self.flow, rows) if rows else ""

    async def after_batch(self, event: m.FramesStored, rows: list[dict[str, Any]]) -> None:
        if self.calls_watched and event.answers:
            await self._watch_calls(sorted(self.calls_watched))
        fresh = [r for r in rows if r["seq"] > self.caught_up]  # the page, read after, showed the others
        make = _async(live.fragments, self.session, fresh, self.panel)
        key = (self.source, "fragments", event.first, event.last, self.panel, len(fresh))
        for fragment in await feed.once(key, make):
            await self.send(text_data=fragment)
        if tasks.touches(fresh):
            await self.send(
                text_data=await feed.once((self.source, "tasks", event.last), _tasks(self.session))
            )
        # A request made in any tab (or by a collection) is a card in every tab; a tap's page has no list.
        asked = [] if self.session.is_tap else [r for r in fresh if draws_a_card(r)]
        if asked:
            cards = (self.source, "cards", event.first, event.last, len(fresh))
            await self.send(text_data=await feed.once(cards, _cards(self.session, asked)))

    # --- what the browser asks ----------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        data = self.parsed(text_data)
        if data is None or await self.timeline_action(data):
            return
        action = data.get("action")
        if action == "view" and data.get("view") in flow.VIEWS:
            self.view = data["view"]
            await self.replace_rows(await self.read_rows(self.filter), live=True)
        elif action == "calls":
            await self._watch_calls(_call_ids(data.get("ids")))
        elif action in SENT_FORMS:
            self._answer(SENT_FORMS[action], data)
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
                await self.frames_stored(event)
            case m.StateChanged() as event:
                await self._state_changed(event)
            case m.StorageChanged() as event:
                await self._send("sessions/_storage.html", {"storage": event})
            case m.CallProgress() as event:
                # rpc_id too: the template names the card by it when the progress carries none.
                progress = event.fields()
                context = {"progress": progress, "rpc_id": progress.get("rpc_id"), "session": self.session}
                await self._send("sessions/_progress.html", context)
            case m.CallDone(outcome):
                # Only the card's state and body: its header, arguments and place stay put.
                self.calls_watched.discard(outcome["rpc_id"])
                # Its frames' places name the call: a session started again numbers its requests anew.
                seqs = (outcome.get("request_seq"), outcome.get("response_seq"))
                key = (self.source, "done", outcome["rpc_id"], *seqs)
                await self.send(text_data=await feed.once(key, _finished(self.session, outcome)))
            case m.ReviewChanged():
                await self._send_reviews()
            case m.AuthorizationChanged():
                await self._send_authorizations()
            case m.ActivityAdded(activity_id, entry):
                logged = (self.source, "activity", activity_id)
                fragment = await feed.once(logged, _activity(self.session, activity_id, entry))
                if fragment:
                    await self.send(text_data=fragment)
            case m.NoteAdded(note_id):
                for fragment in await _render_note(self.session, note_id, self.user_id):
                    await self.send(text_data=fragment)
            case m.Presence() as event:
                await self._presence(event)
            case m.TapChanged(state):
                await self._send_tap(state)

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

    async def _follow_link(self, link: Link) -> None:
        """While the channel layer is down the page says "reconnecting to the engine"; once it is back
        (this tab in its group again), what was stored meanwhile and the session's state."""
        seen, outages = link.changes, link.outages
        while True:
            seen = await link.changed(seen)
            if link.outages != outages:  # said even when it is already back: the tab may have missed events
                outages = link.outages
                await self._send_state(reconnecting=link.problem or link.last_problem)
            if link.up:
                self.session = await _refresh(self.session)
                await self.catch_up(self.session.last_seq)
                await self._watch()
                await self._send_state()

    async def _send_presence(self) -> None:
        context = {"people": self.roster.people(), "me": self.user_id}
        await self._send("sessions/activity/_presence.html", context)

    async def _state_changed(self, event: m.StateChanged) -> None:
        session, drawn = await feed.once((self.source, "state", event.serial), _drawn_state(self.session))
        self.session = copy.copy(session)  # each tab its own: a reconnect reads its tab's again
        await self._watch()
        await self._send_state(drawn=drawn)
        if self.calls_watched:  # a session that ended ends its running calls
            await self._watch_calls(sorted(self.calls_watched))

    async def _watch_calls(self, rpc_ids: list[int]) -> None:
        """Bring a tab's running call cards up to date, and finish each later from the stored response.

        The tab asks on every (re)connect and for every running card it adds: an answer that came
        while its socket was down, or before the card was on the page, is not lost. A response not
        stored yet finishes the card when its frame is (``after_batch``), or ``CallDone`` does.
        """
        fragments, running = await _render_calls(self.session, rpc_ids)
        watched = (self.calls_watched - set(rpc_ids)) | running
        self.calls_watched = set(sorted(watched)[-WATCHED_CALLS:])  # the newest, however often it asks
        for fragment in fragments:
            await self.send(text_data=fragment)

    def _answer(
        self, answer: Callable[[int, Any, dict[str, Any]], Awaitable[str]], form: dict[str, Any]
    ) -> None:
        """A form the tab sent: its answer (a call's card, once the owner answers or after half a
        second, running) is sent when it is ready, while this socket goes on with the timeline. A tab
        with ``SENT_AT_ONCE`` of them waiting is told so, and nothing is sent for it."""
        busy = len(self.calls_sent) >= SENT_AT_ONCE

        async def send() -> None:
            if busy:
                why = f"Not sent: {SENT_AT_ONCE} requests from this tab are still waiting for their answers."
                await self.send(text_data=placed("#call-list", refusal(why)))
                return
            try:
                html = await answer(self.user_id, self.session.public_id, form)
            except Exception:  # a bug: said in the page, as a view's 500 would be, and logged
                logger.exception("answering a form sent over the live socket")
                html = placed("#call-list", refusal("The inspector failed to send this (its log says why)."))
            await self.send(text_data=html)

        task = asyncio.get_running_loop().create_task(send())
        self.calls_sent.add(task)
        task.add_done_callback(self.calls_sent.discard)

    async def _send_state(self, reconnecting: str = "", drawn: str = "") -> None:
        """The session's state (``drawn`` already, for every tab); "reconnecting to the engine" and
        why, while the channel layer is down."""
        link = getattr(self, "layer_link", None)
        if link is not None and not link.up:
            reconnecting = link.problem
        if reconnecting or not drawn:
            drawn = await _state_html(self.session, reconnecting)
        # "following live" only while the session is live: an ended one says so instead.
        controls = {"session": self.session, "live": not self.browsing, "oob": True}
        await self.send(text_data=drawn + render_to_string("sessions/_timeline_controls.html", controls))

    # --- helpers --------------------------------------------------------------------------

    async def _send_tap(self, state: dict[str, Any]) -> None:
        """What a tap holds, and its rules and faults: rendered once per process for every tab."""
        session = self.session

        async def make() -> str:
            return str(await tap_controls.render_live_async(session, state))

        key = (self.source, "tap", state.get("version", -1), bool(state))
        await self.send(text_data=await feed.once(key, make))

    async def _send_reviews(self) -> None:
        html, self.reviews_shown = await _render_reviews(self.session, self.reviews_shown)
        await self.send(text_data=html)

    async def _send_authorizations(self) -> None:
        context = await in_pages_thread(oauth.authorizations_context)(self.session, self.user_id)
        await self._send("sessions/oauth/_authorizations.html", context)

    async def _send_log(self, min_level: Any) -> None:
        level = min_level if min_level in LOG_LEVELS else "debug"
        lines = await in_pages_thread(logs.log_lines)(self.session, level)
        await self._send("sessions/resources/_log_redraw.html", {"log_lines": lines})

    async def _send(self, template: str, context: dict[str, Any]) -> None:
        """A partial of the page, pushed: out of band (``oob``), where a page render puts it in line."""
        await self.send(text_data=render_to_string(template, {**context, "oob": True}))


async def _state_html(session: McpSession, reconnecting: str) -> str:
    """The session's state, its actions and its overview, out of band."""
    state = {"session": session, "reconnecting": reconnecting, "oob": True}
    facts = await in_pages_thread(overview)(session)
    return (
        render_to_string("sessions/_session_state.html", state)
        + render_to_string("sessions/_session_actions.html", {"session": session, "oob": True})
        + render_to_string("sessions/panels/overview.html", {"session": session, **facts, "oob": True})
    )


def _drawn_state(session: McpSession) -> Callable[[], Awaitable[tuple[McpSession, str]]]:
    """A state change, the same for every tab: the session read again, and its state drawn."""

    async def make() -> tuple[McpSession, str]:
        fresh = await _refresh(session)
        return fresh, await _state_html(fresh, "")

    return make


def _async(function: Any, *args: Any) -> Any:
    """``function(*args)`` as something ``feed.once`` awaits (it reads no database)."""

    async def make() -> Any:
        return function(*args)

    return make


def _cards(session: McpSession, rows: list[dict[str, Any]]) -> Any:
    """The call cards of these requests, newest first, to put at the top of the Requests list: a card
    this process drew for the tab that sent its request as it is, the others from the timeline."""
    kept = [feed.kept(feed.card_key(session, stored_rpc_id(row["rpc_id"]), row["seq"])) for row in rows]

    @in_pages_thread
    def make() -> str:
        cards = [
            card
            or render_to_string("sessions/_call.html", call_context(session, stored_rpc_id(row["rpc_id"])))
            for row, card in zip(reversed(rows), reversed(kept), strict=True)
        ]
        return render_to_string("sessions/calls/_pushed.html", {"cards": cards})

    return make


def _finished(session: McpSession, outcome: dict[str, Any]) -> Any:
    """A running call card's end, the same for every tab."""

    @in_pages_thread
    def make() -> str:
        context = call_context(session, outcome["rpc_id"], outcome=outcome)
        return render_to_string("sessions/calls/_finished.html", {**context, "oob": True})

    return make


def _tasks(session: McpSession) -> Any:
    async def make() -> str:
        return await in_pages_thread(tasks.render_list)(session)

    return make
