"""From a tap to the rest of the product: a tap session, made as the running inspector makes it (a tap's
spool taken in by ``TapIngester``), is shareable (the link's page and frames, redacted), exportable
(JSON Lines and HTML), searchable, comparable with another session, and the tap's recording opens as a
recording. No process: the spool is written by the tap's own observer, in this process."""

from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import AsyncClient
from support.teams import ateam_of
from support.web import finish, logged_in_client

from sessions.engine import Frame, TapObserver
from sessions.models import McpSession, TimelineFrame
from sessions.runtime.taps import TAP_TRANSPORT, TapIngester

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "sk-live-" + "7" * 24
LINK = re.compile(r"/shared/([A-Za-z0-9_-]{20,})/")


def line(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def tap_frames(name: str, tools: list[str]) -> list[Frame]:
    """A host's conversation with its server as a stdio tap's observer makes it: spawn, handshake, the
    tools listed, a call that carries a secret-looking argument, a line on stderr, the exit."""
    observer = TapObserver()
    spawned = observer.spawned(4242, "fake-server", ["--stdio"], cwd="/tmp")
    spawned.transport["tap"] = {"name": name, "run": name, "pid": os.getpid(), "started": 0, "host": "test"}
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"},
    }
    result = {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"},
    }
    call = {"name": "echo", "arguments": {"message": "find-me-in-search", "api_key": SECRET}}
    answer = {"content": [{"type": "text", "text": "Echo: find-me-in-search"}]}
    frames = [spawned]
    frames += observer.client_line(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
    frames += observer.server_line(line({"jsonrpc": "2.0", "id": 1, "result": result}))
    frames += observer.client_line(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    frames += observer.client_line(line({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
    listed = [{"name": tool, "inputSchema": {"type": "object"}} for tool in tools]
    frames += observer.server_line(line({"jsonrpc": "2.0", "id": 3, "result": {"tools": listed}}))
    frames += observer.client_line(line({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}))
    frames += observer.server_line(line({"jsonrpc": "2.0", "id": 2, "result": answer}))
    frames.append(observer.stderr_line(b"fake-server: done"))
    frames += observer.exited(0)
    return frames


async def tap_session(folder: Path, name: str, tools: list[str]) -> tuple[McpSession, bytes]:
    """The session a tap's spool becomes, once the ingester has stored all of it; and the spool's bytes
    (the same JSON Lines as the tap's ``--record``)."""
    folder.mkdir(mode=0o700, exist_ok=True)
    spool = folder / f"{name}.jsonl"
    recording = "".join(
        json.dumps(f.to_dict(), ensure_ascii=False) + "\n" for f in tap_frames(name, tools)
    ).encode()
    spool.write_bytes(recording)
    spool.chmod(0o600)
    ingester = TapIngester(get_channel_layer(), folder)
    deadline = time.monotonic() + 10
    while spool.exists():  # the ingester removes a spool once every frame of it is stored
        assert time.monotonic() < deadline, "the spool was not taken in"
        await ingester.scan()
    return await McpSession.objects.aget(transport_name=TAP_TRANSPORT, name=name), recording


async def body(response: Any) -> str:
    if response.streaming:
        text = b"".join([chunk async for chunk in response.streaming_content])
        finish(response)
        return text.decode()
    return bytes(response.content).decode()


async def test_a_tap_session_is_shared_exported_searched_compared_and_its_recording_opens(
    tmp_path: Path,
) -> None:
    session, recording = await tap_session(tmp_path / "taps", "product-tap", ["echo"])
    other, _ = await tap_session(tmp_path / "taps", "other-tap", ["echo", "added-in-the-other"])
    frames = [f async for f in TimelineFrame.objects.filter(session=session).order_by("seq")]
    assert session.status == McpSession.Status.CLOSED and len(frames) == len(recording.splitlines())
    owner = await logged_in_client(alice := await User.objects.aget(pk=session.owner_id))
    page = f"/s/{session.public_id}/"
    call = next(f for f in frames if f.method == "tools/call" and f.direction == "out")

    # Shareable: the link's page, its timeline and the frame with the secret, redacted.
    form = {"scope": "all", "expiry": "7d", "audience": "anyone", "label": ""}
    made = await owner.post(f"{page}shares/new", form)
    assert made.status_code == 200, (await body(made))[:500]
    token = LINK.search(await body(made))
    assert token, "the new link is shown"
    visitor, shared = AsyncClient(), f"/shared/{token[1]}/"
    for path in ("", "?tab=conformance", "timeline", f"frames/{call.seq}", "export", "export.html"):
        response = await visitor.get(shared + path)
        assert response.status_code == 200, path
        text = await body(response)
        assert SECRET not in text, path
    assert "find-me-in-search" in await body(await visitor.get(f"{shared}frames/{call.seq}"))

    # Exportable: JSON Lines (redacted by default, every frame) and HTML.
    lines = (await body(await owner.get(f"{page}export"))).splitlines()
    assert [json.loads(x)["seq"] for x in lines] == [f.seq for f in frames]
    assert SECRET not in "\n".join(lines)
    raw = await body(await owner.get(f"{page}export", {"redacted": "0"}))
    assert SECRET in raw  # the recording itself is never changed
    html = await owner.get(f"{page}export.html")
    assert html.status_code == 200 and "tools/call" in await body(html)

    # Searchable: a word of the call finds its frames.
    found = await body(await owner.get("/search", {"q": '"find-me-in-search"'}))
    opened = set(re.findall(r'href="/s/([0-9a-f-]+)/\?frame=(\d+)" aria-label', found))
    assert (str(session.public_id), str(call.seq)) in opened

    # Comparable with another session.
    compared = await owner.get("/compare", {"a": str(session.public_id), "b": str(other.public_id)})
    assert compared.status_code == 200, (await body(compared))[:500]
    assert "added-in-the-other" in await body(compared)

    # The tap's recording (its --record file: the spool's own lines) opens as a recording.
    upload = io.BytesIO(recording)
    upload.name = "tap.jsonl"
    response = await owner.post("/recordings/open", {"recording": upload})
    assert response.status_code == 302, (await body(response))[:500]
    team = await ateam_of(alice)
    opened_session = await McpSession.objects.exclude(pk__in=[session.pk, other.pk]).aget(team=team)
    reopened = [f async for f in TimelineFrame.objects.filter(session=opened_session).order_by("seq")]
    assert [(f.seq, f.kind, f.direction, bytes(f.raw)) for f in reopened] == [
        (f.seq, f.kind, f.direction, bytes(f.raw)) for f in frames
    ]
