"""Warm starts through the web: the pointer on Connect starts the server, the connect adopts it."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from support.teams import ateam_of
from support.web import frames_of, live_runtime, logged_in_client, make_user, wait_until

from sessions.models import McpSession, ServerConfig
from sessions.runtime.host import ensure_embedded_runtime

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 20.0


def _form(starts: Path, server: dict[str, Any], intent: str = "page-1") -> dict[str, str]:
    """The connect form for ``server``, wrapped so that each process it starts adds a line to ``starts``."""
    script = f"printf 'x\\n' >> {shlex.quote(str(starts))}; exec \"$@\""
    command = shlex.join(["sh", "-c", script, "sh", server["command"], *server["args"]])
    return {
        "transport": "stdio",
        "command": command,
        "name": "warm",
        "protocol_version": "2025-11-25",
        "timeout": "60",
        "max_total_timeout": "600",
        "intent": intent,  # the page's key, which its hint and its click both send
    }


async def _held(runtime: Any, count: int) -> None:
    async with asyncio.timeout(WAIT):
        while len(runtime.warm) != count or runtime._warming:
            await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_the_pointer_on_connect_starts_the_server_and_the_connect_adopts_it(
    sdk_stdio: dict[str, Any], tmp_path: Path
) -> None:
    async with live_runtime():
        runtime = ensure_embedded_runtime()
        client = await logged_in_client(await make_user())
        starts = tmp_path / "starts"
        # Nothing starts for a form that is not ready, nor while warm starts are switched off.
        assert (await client.post("/connect/warm", {"transport": "stdio", "command": ""})).status_code == 204
        with override_settings(INSPECTOR_WARM_START=False):
            off = await client.post("/connect/warm", _form(tmp_path / "off", sdk_stdio))
            assert off.status_code == 204
        form = _form(starts, sdk_stdio)
        assert (await client.post("/connect/warm", form)).status_code == 204
        assert (await client.post("/connect/warm", form)).status_code == 204  # the same again: one process
        await _held(runtime, 1)
        assert not (tmp_path / "off").exists()
        held = runtime.warm._held[0].transport.process
        response = await client.post("/connect", form)
        assert response.status_code == 302
        session = await McpSession.objects.aget()
        await wait_until(lambda: McpSession.objects.filter(pk=session.pk, status="ready").exists())
        spawned = [f for f in await frames_of(session, kind="state") if "started process" in f.note]
        assert len(spawned) == 1 and f"started process {held.pid}," in spawned[0].note
        assert "a warm start" in spawned[0].note
        assert starts.read_text() == "x\n"
        assert len(runtime.warm) == 0
        # The click's own hint, arriving after it (focus on the press), starts nothing; the next
        # page's hover, at once after, does (a new intent). The runtime takes hints in order, so once
        # the second is held, one held in all says the first started nothing.
        assert (await client.post("/connect/warm", form)).status_code == 204
        again = _form(tmp_path / "again", sdk_stdio, intent="page-2")
        assert (await client.post("/connect/warm", again)).status_code == 204
        await _held(runtime, 1)
        assert str(tmp_path / "again") in " ".join(runtime.warm._held[0].target.args)
        assert starts.read_text() == "x\n"


async def test_a_warm_start_is_only_a_post_and_only_for_ones_own_saved_servers() -> None:
    async with live_runtime():
        alice, bob = await make_user("alice"), await make_user("bob")
        server = await ServerConfig.objects.acreate(
            team=await ateam_of(alice), owner=alice, name="mine", transport="stdio", command="true"
        )
        as_bob = await logged_in_client(bob)
        assert (await as_bob.post(f"/servers/{server.pk}/warm")).status_code == 404
        as_alice = await logged_in_client(alice)
        assert (await as_alice.get(f"/servers/{server.pk}/warm")).status_code == 405
        assert (await as_alice.get("/connect/warm")).status_code == 405
