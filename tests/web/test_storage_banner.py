"""A session whose frames cannot be stored says so on its page, live, and stops saying so when they can."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import get_channel_layer
from support.teams import ateam_of
from support.web import WAIT, fresh_layer, make_user, session_communicator

from sessions.models import McpSession
from sessions.runtime import messages as m

pytestmark = pytest.mark.django_db(transaction=True)


async def _until(communicator: Any, wanted: str) -> str:
    async with asyncio.timeout(WAIT):
        while True:
            fragment = str(await communicator.receive_from(timeout=WAIT))
            if wanted in fragment:
                return fragment


async def test_the_page_shows_the_frames_held_and_lost_while_storage_fails_and_clears_after() -> None:
    async with fresh_layer():
        alice = await make_user()
        session = await McpSession.objects.acreate(
            owner=alice, team=await ateam_of(alice), name="full", status="closed"
        )
        page = await session_communicator(alice, f"/ws/sessions/{session.public_id}/")
        assert (await page.connect(timeout=WAIT))[0]
        await _until(page, 'id="session-state"')
        layer = get_channel_layer()
        await layer.group_send(session.group_name, m.encode_event(m.StorageChanged("disk full", 1234, 56)))
        banner = await _until(page, 'id="storage-status"')
        assert 'role="alert"' in banner
        assert "Storage failing (disk full): 1234 frames held in memory, 56 lost" in banner
        await layer.group_send(session.group_name, m.encode_event(m.StorageChanged("", 0, 56)))
        cleared = await _until(page, 'id="storage-status"')
        assert "Storage failing" not in cleared and 'role="alert"' not in cleared
        await page.disconnect()
