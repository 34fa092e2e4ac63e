"""Many tabs on one session: each is sent every row, in order, none lost or repeated, through calls one at a
time, a flood and a page change; and a stored batch is rendered once for all of them, not once per tab."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.template.loader import render_to_string
from support.web import (
    WAIT,
    anonymous_communicator,
    frames_when,
    live_runtime,
    logged_in_client,
    make_share_link,
    make_user,
    receive_until,
    request,
    session_communicator,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.frames import stored_rpc_id
from sessions.models import McpSession, TimelineFrame
from sessions.timeline.calls import call_context
from sessions.web import consumers, feed
from sessions.web.shortcuts import call_card_html

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

VIEWERS = 50
ROW = re.compile(r'<div class="frame [^"]*" role="listitem" id="f-(\d+)"')
COUNT = re.compile(r'id="frame-count" class="muted" hx-swap-oob="true">(\d+)<')


class Tab:
    """What a browser tab would show: its pane's rows, as the socket's messages replace and append them."""

    def __init__(self, communicator: Any) -> None:
        self.communicator = communicator
        self.rows: list[int] = []
        self.count = 0
        self.counts: list[int] = []  # every frame count, in order: one per stored batch it heard of
        self.appended: list[int] = []  # every row appended, in order

    async def read_until(self, done: Any) -> None:
        async with asyncio.timeout(WAIT * 2):
            while not done(self):
                self.apply(await self.communicator.receive_from(timeout=WAIT))

    def apply(self, message: str) -> None:
        for part in re.split(r'(?=<div id="timeline-rows")|(?=<div hx-swap-oob="rowsend)', message):
            seqs = [int(s) for s in ROW.findall(part)]
            if part.startswith('<div id="timeline-rows"'):
                self.rows = seqs
            elif part.startswith('<div hx-swap-oob="rowsend'):
                self.rows += seqs
                self.appended += seqs
        for found in COUNT.findall(message):
            self.count = int(found)
            self.counts.append(self.count)

    def shows_newest(self, last: int) -> bool:
        return self.count == last and bool(self.rows) and self.rows[-1] == last


def _in_order_without_gaps(rows: list[int]) -> bool:
    return rows == list(range(rows[0], rows[0] + len(rows))) if rows else True


async def _last_seq(session: McpSession) -> int:
    return (await database_sync_to_async(McpSession.objects.get)(pk=session.pk)).last_seq


async def test_fifty_tabs_get_every_row_in_order_and_each_batch_is_rendered_once(bad_stdio: Any) -> None:
    async with live_runtime():
        alice = await make_user()
        spec = bad_stdio("flood")
        session = await start_session(alice, stdio_config(spec["command"], spec["args"]))
        tabs = []
        for _ in range(VIEWERS):
            communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
            assert (await communicator.connect(timeout=WAIT))[0]
            tabs.append(Tab(communicator))
        last = await _last_seq(session)
        await asyncio.gather(*(tab.read_until(lambda t: t.shows_newest(last)) for tab in tabs))

        # Calls one at a time: every tab is sent each new row once, appended in order, and the batch that
        # carries them is rendered once for all fifty.
        before, caught_up = dict(feed.stats), last
        for i in range(5):
            await request(session, "tools/call", {"name": "t", "arguments": {"count": 3 + i}})
        last = await _last_seq(session)
        await asyncio.gather(*(tab.read_until(lambda t: t.shows_newest(last)) for tab in tabs))
        for tab in tabs:
            assert tab.appended[-(last - caught_up) :] == list(range(caught_up + 1, last + 1))
            assert len(tab.appended) == len(set(tab.appended)), "a row appended twice"
        batches = len([c for c in tabs[0].counts if c > caught_up])
        assert 0 < feed.stats["batches"] - before["batches"] <= batches, (
            "a batch is rendered once, not per tab"
        )
        assert feed.stats["rows"] - before["rows"] <= last - caught_up

        # A flood: more than a page at once. Each tab ends showing the newest rows, in order, none twice,
        # and its frame count is the session's; the redraws are shared by the tabs, not made per tab.
        before = dict(feed.stats)
        await request(session, "tools/call", {"name": "t", "arguments": {"count": 3000}})
        last = await _last_seq(session)
        await asyncio.gather(*(tab.read_until(lambda t: t.shows_newest(last)) for tab in tabs))
        for tab in tabs:
            assert _in_order_without_gaps(tab.rows) and len(tab.rows) == len(set(tab.rows)), tab.rows
            assert tab.counts == sorted(tab.counts), "frame counts go back"
        assert feed.stats["rows"] - before["rows"] < 3000 + 10 * 200, "the flood was rendered per tab"

        # A page change on one tab (Older, then back to live) changes that tab alone.
        browsing = tabs[0]
        await browsing.communicator.send_to(json.dumps({"action": "older"}))
        await browsing.read_until(lambda t: t.rows and t.rows[-1] < last)
        assert _in_order_without_gaps(browsing.rows)
        await request(session, "tools/call", {"name": "t", "arguments": {"count": 2}})
        newest = await _last_seq(session)
        await asyncio.gather(*(tab.read_until(lambda t: t.shows_newest(newest)) for tab in tabs[1:]))
        await browsing.read_until(lambda t: t.count == newest)
        assert browsing.rows[-1] < last, "a tab browsing older rows is not pulled to the newest"
        await browsing.communicator.send_to(json.dumps({"action": "live"}))
        await browsing.read_until(lambda t: t.shows_newest(newest))
        assert _in_order_without_gaps(browsing.rows)
        for tab in tabs:
            await tab.communicator.disconnect()


def _counted(factory: Any, made: dict[str, int], name: str, asked: list[tuple[Any, ...]]) -> Any:
    """``factory`` (a maker for ``feed.once``, one per asking tab) that notes what it was asked with,
    and counts in ``made[name]`` the makes that ran (feed.once runs the first tab's)."""

    def counting(*args: Any) -> Any:
        asked.append(args)
        make = factory(*args)

        async def counted() -> Any:
            made[name] += 1
            return await make()

        return counted

    return counting


async def _session_with_tabs(everything_stdio: dict, count: int = 5) -> tuple[Any, McpSession, list[Any]]:
    """Alice's session of server-everything, and ``count`` live sockets on it (in a live runtime)."""
    alice = await make_user()
    session = await start_session(alice, stdio_config(everything_stdio["command"], everything_stdio["args"]))
    tabs = []
    for _ in range(count):
        communicator = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
        assert (await communicator.connect(timeout=WAIT))[0]
        tabs.append(communicator)
    return alice, session, tabs


async def test_a_calls_end_and_its_activity_are_made_once_for_every_tab(
    everything_stdio: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = {"ends": 0, "activity": 0}
    asked: list[tuple[Any, ...]] = []
    activity = consumers._activity
    monkeypatch.setattr(consumers, "_finished", _counted(consumers._finished, made, "ends", []))
    monkeypatch.setattr(consumers, "_activity", _counted(activity, made, "activity", asked))
    async with live_runtime():
        alice, session, tabs = await _session_with_tabs(everything_stdio)
        # Asked to answer at once: the call's end then reaches the tabs as an event of its own.
        started = await request(
            session,
            "tools/call",
            {"name": "echo", "arguments": {"message": "once"}},
            wait=0,
            user_id=alice.pk,
        )
        rpc_id = started["rpc_id"]
        for tab in tabs:
            heard = {"card": False, "activity": False}
            async with asyncio.timeout(WAIT * 2):
                while not all(heard.values()):
                    message = await tab.receive_from(timeout=WAIT)
                    # The end, out of band (the Requests list's own card of it may come before).
                    end = f'id="call-{rpc_id}-state" class="call-state" hx-swap-oob="true"'
                    heard["card"] |= end in message and "Echo: once" in message
                    heard["activity"] |= (
                        'hx-swap-oob="beforeend:#activity-list"' in message and "sent" in message
                    )
        assert made == {"ends": 1, "activity": 1}, made
        # The entry came with its event, and reads as the stored row does.
        _, activity_id, entry = asked[0]
        assert entry["user"] == "alice" and entry["action"] == "sent"
        shown = await activity(session, activity_id, entry)()
        assert shown == await activity(session, activity_id, {})() and "alice" in shown
        for tab in tabs:
            await tab.disconnect()


async def test_the_card_drawn_for_the_tab_that_called_is_the_one_every_other_tab_gets(
    everything_stdio: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with live_runtime():
        alice = await make_user()
        session = await start_session(
            alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
        )
        params = {"name": "echo", "arguments": {"message": "the same card"}}
        answered = await call_card_html(session, alice.pk, "tools/call", params)
        # The recorder stores the call's frames a moment after its answer reached the caller.
        request = (await frames_when(session, method="tools/call", direction="out"))[-1]
        request_seq, rpc_id = request.seq, stored_rpc_id(request.rpc_id)
        await wait_until(lambda: TimelineFrame.objects.filter(session=session, pair_seq=request_seq).exists())
        # Drawn from the timeline, as a tab that did not send the request draws it: the very same card.
        from_timeline = await database_sync_to_async(call_context)(session, rpc_id)
        assert render_to_string("sessions/_call.html", from_timeline) == answered
        # So the Requests list's push takes the card kept for it and reads no frame.
        read: list[Any] = []

        def counted(*args: Any, **kwargs: Any) -> Any:
            read.append(args)
            return call_context(*args, **kwargs)

        monkeypatch.setattr(consumers, "call_context", counted)
        row = {"seq": request_seq, "rpc_id": request.rpc_id}
        pushed = await consumers._cards(session, [row])()
        assert read == [] and f'<div hx-swap-oob="afterbegin:#call-list">{answered}</div>' in pushed
        # A card this process did not draw (another process's tab sent it) comes from the timeline.
        assert await consumers._cards(session, [{**row, "seq": request_seq + 10_000}])() == pushed
        assert len(read) == 1


def _count_state_drawings(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, int], dict[str, int]]:
    """Per state change (its serial): how many sockets asked for its drawing, and how often it was drawn."""
    asked: dict[str, int] = {}
    made: dict[str, int] = {}
    once = feed.once

    async def counted(key: Any, make: Any) -> Any:
        if key[1] != "state":
            return await once(key, make)
        asked[key[2]] = asked.get(key[2], 0) + 1

        async def counted_make() -> Any:
            made[key[2]] = made.get(key[2], 0) + 1
            return await make()

        return await once(key, counted_make)

    monkeypatch.setattr(feed, "once", counted)
    return asked, made


async def test_a_state_change_is_drawn_once_for_every_tab(
    everything_stdio: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, made = _count_state_drawings(monkeypatch)
    async with live_runtime():
        alice, session, tabs = await _session_with_tabs(everything_stdio)
        client = await logged_in_client(alice)
        assert (await client.post(f"/s/{session.public_id}/disconnect")).status_code == 302
        for tab in tabs:
            # The state, its actions and the overview in one message, with the tab's timeline controls.
            message = await receive_until(tab, 'class="status status-closed"')
            assert 'id="session-actions"' in message and 'id="timeline-controls"' in message
        # Each change drawn once, however many tabs asked (all five, for the session's end at least).
        assert made and all(count == 1 for count in made.values()), made
        assert set(made) == set(asked) and 5 in asked.values(), asked
        for tab in tabs:
            await tab.disconnect()


async def test_a_state_change_is_drawn_once_for_every_viewer_of_a_share(
    everything_stdio: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, made = _count_state_drawings(monkeypatch)
    async with live_runtime():
        alice = await make_user()
        session = await start_session(
            alice, stdio_config(everything_stdio["command"], everything_stdio["args"])
        )
        client = await logged_in_client(alice)
        token = await make_share_link(client, session, audience="anyone")
        viewers = [anonymous_communicator(f"/ws/shared/{token}/") for _ in range(5)]
        for viewer in viewers:
            assert (await viewer.connect(timeout=WAIT))[0]
        assert (await client.post(f"/s/{session.public_id}/disconnect")).status_code == 302
        for viewer in viewers:
            message = await receive_until(viewer, 'class="status status-closed"')
            assert 'id="timeline-controls"' in message and "hx-post" not in message
        # The end drawn once for the share, however many of its viewers asked (all five).
        assert made and all(count == 1 for count in made.values()), made
        assert set(made) == set(asked) and 5 in asked.values(), asked
        for viewer in viewers:
            await viewer.disconnect()
