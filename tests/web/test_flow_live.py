"""The live socket draws the timeline as a flow when a tab asks for it, and keeps following in it."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from support.web import live_runtime, make_user, request, session_communicator, start_session, stdio_config

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


async def _drain(communicator: Any) -> str:
    seen = ""
    while await communicator.receive_nothing(timeout=0.5) is False:
        seen += await communicator.receive_from(timeout=10)
    return seen


async def test_a_tab_that_asks_for_the_flow_gets_it_live_and_can_switch_back(everything_stdio: dict) -> None:
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(everything_stdio["command"], everything_stdio["args"])
        session = await start_session(alice, config)
        await request(session, "tools/call", {"name": "echo", "arguments": {"message": "before"}})
        path = f"/ws/sessions/{session.public_id}/?after=3&first=1&view=flow"
        communicator = await session_communicator(alice, path)
        assert (await communicator.connect(timeout=10))[0]
        first = await communicator.receive_from(timeout=10)
        # The table the page was rendered with is replaced by the flow, from the newest window.
        assert 'class="frames flow"' in first and 'id="f-1"' in first
        await _drain(communicator)

        await request(session, "tools/call", {"name": "echo", "arguments": {"message": "live"}})
        row = (
            r'class="frame flow-row ([^"]*)" role="listitem" id="f-(\d+)" data-seq="\d+" data-pair="([\d ]*)"'
        )
        seen, asked, answered = "", [], []
        # Until the live call's answer: the client's answer to the server's roots/list may come first.
        async with asyncio.timeout(10):
            while not (asked and set(asked) <= set(answered)):
                seen += await communicator.receive_from(timeout=10)
                rows = re.findall(row, seen)
                asked = [s for classes, s, _ in rows if "shape-request" in classes and "dir-out" in classes]
                answered = [pair for classes, _, pair in rows if "shape-response" in classes]
        assert 'hx-swap-oob="rowsend:#timeline-rows" data-view="flow"' in seen
        # The answer points at the request sent live before it.
        assert [pair for pair in answered if pair in asked] == asked
        hostile_views: list[Any] = [["flow"], "<svg>", None, {"flow": 1}]
        for view in hostile_views:
            await communicator.send_to(text_data=json.dumps({"action": "view", "view": view}))
            assert 'id="timeline-rows"' not in await _drain(communicator)  # nothing redrawn
        await communicator.send_to(text_data=json.dumps({"action": "view", "view": "table"}))
        table = await communicator.receive_from(timeout=10)
        assert 'id="timeline-rows" class="frames"' in table and "flow-row" not in table
        await communicator.disconnect()
