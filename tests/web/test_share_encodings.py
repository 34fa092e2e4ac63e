"""A server that gives the session's secret back in every common encoding (tests/servers/echo_secret.py:
in results, logs, stderr, response headers, and split across two stderr lines and two log notifications):
no share surface and no redacted export shows any of them; the owner's raw export holds them all.
"""

from __future__ import annotations

import base64
import contextlib
import html
import importlib.util
import json
import re
import secrets
import sys
from pathlib import Path
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.test import AsyncClient
from support.processes import free_port, start_http_server
from support.web import (
    finish,
    http_config,
    live_runtime,
    logged_in_client,
    make_user,
    receive_until,
    request,
    start_session,
    stdio_config,
    wait_until,
)

from sessions.models import McpSession, TimelineFrame

pytestmark = pytest.mark.django_db(transaction=True)

ECHO_SERVER = Path(__file__).resolve().parents[1] / "servers" / "echo_secret.py"
ORIGIN = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]


def _server_module() -> Any:
    """The test server's own ``encodings`` and ``SPLIT``: what it sends is what is looked for."""
    spec = importlib.util.spec_from_file_location("echo_secret", ECHO_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ECHO = _server_module()


def _looked_for(secret: str) -> dict[str, str]:
    """Every encoding the server sends, the two pieces of the split secret, and the three base64
    fragments any base64 text holding the secret holds (whatever its neighbours)."""
    found = dict(ECHO.encodings(secret))
    found["first piece"], found["second piece"] = secret[: ECHO.SPLIT], secret[ECHO.SPLIT :]
    data = secret.encode()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + data + bytes(3)).decode()
        first, last = -(-8 * offset // 6), 8 * (offset + len(data)) // 6
        found[f"base64 fragment at {offset}"] = encoded[first:last]
    return found


async def _body(response: Any) -> str:
    if response.streaming:
        body = b"".join([chunk async for chunk in response.streaming_content])
        finish(response)
    else:
        body = bytes(response.content)
    return body.decode("utf-8", errors="replace")


async def _drain(communicator: WebsocketCommunicator) -> str:
    seen = ""
    while not await communicator.receive_nothing(timeout=0.5):
        seen += await communicator.receive_from(timeout=5)
    return seen


async def _make_link(client: AsyncClient, session: McpSession) -> str:
    data = {"scope": "all", "expiry": "7d", "audience": "anyone", "label": ""}
    response = await client.post(f"/s/{session.public_id}/shares/new", data)
    assert response.status_code == 200, response.content.decode()[:500]
    found = re.search(r"/shared/([A-Za-z0-9_-]{20,})/", response.content.decode())
    assert found, "the new link is shown"
    return found.group(1)


async def _shown(owner: AsyncClient, session: McpSession, token: str) -> dict[str, str]:
    """Every surface of the share (pages, fragments, every frame, every export, the socket catching up
    and live), the session's redacted exports and the sharer's preview, as text."""
    from inspector.asgi import application

    visitor, base = AsyncClient(), f"/shared/{token}/"
    shown: dict[str, str] = {}
    for path in (
        "",
        "?tab=conformance",
        "panel/overview",
        "panel/conformance",
        "timeline",
        "timeline?before=9999",
    ):
        response = await visitor.get(base + path)
        assert response.status_code == 200, path
        shown[base + path] = await _body(response)
    last = (await McpSession.objects.aget(pk=session.pk)).last_seq
    for seq in range(1, last + 1):
        response = await visitor.get(f"{base}frames/{seq}")
        assert response.status_code == 200, seq
        shown[f"frame {seq}"] = await _body(response)
    for path in ("export", "export.html", "collection.json"):
        response = await visitor.get(base + path)
        assert response.status_code == 200, path
        shown[base + path] = await _body(response)
        response = await owner.get(f"/s/{session.public_id}/{path}")
        assert response.status_code == 200, path
        shown[f"session {path}"] = await _body(response)
    preview = await owner.post(
        f"/s/{session.public_id}/shares/preview", {"scope": "all", "expiry": "7d", "audience": "team"}
    )
    assert preview.status_code == 200
    shown["preview"] = await _body(preview)
    socket = WebsocketCommunicator(application, f"/ws/shared/{token}/?after=0&first=0", headers=ORIGIN)
    assert (await socket.connect(timeout=10))[0]
    shown["socket, catching up"] = await _drain(socket)
    answer = await request(session, "tools/call", {"name": "leak", "arguments": {}}, wait=15)
    shown["socket, live"] = await receive_until(socket, f'id="f-{answer["response_seq"]}"')
    shown["socket, live"] += await _drain(socket)
    await socket.disconnect()
    return shown


def _strings(value: Any, out: list[str]) -> None:
    """Every string in a JSON value, and in JSON written inside them."""
    if isinstance(value, str):
        out.append(value)
        if value[:1] in ("{", "["):
            with contextlib.suppress(ValueError):
                _strings(json.loads(value), out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _strings(key, out)
            _strings(item, out)
    elif isinstance(value, list):
        for item in value:
            _strings(item, out)


def _texts(body: str) -> list[str]:
    """What a person reads in a body: as it is, HTML unescaped, and every string of the JSON in it
    (a JSON Lines record's bytes are JSON written inside a JSON string)."""
    texts = [body, html.unescape(body)]
    for line in [body, *body.splitlines()]:
        if line[:1] in ("{", "["):
            with contextlib.suppress(ValueError):
                _strings(json.loads(line), texts)
    return texts


def _leaks(shown: dict[str, str], looked_for: dict[str, str]) -> list[str]:
    return [
        f"{where} shows the {name}: {value}"
        for where, body in shown.items()
        for text in _texts(body)
        for name, value in looked_for.items()
        if value in text
    ]


async def _leak_and_check(owner: AsyncClient, session: McpSession, secret: str, split_in_stderr: bool) -> str:
    """Call ``leak``; check the raw export holds every encoding and no share surface any; the raw export."""
    answer = await request(session, "tools/call", {"name": "leak", "arguments": {}}, wait=15)
    assert "base64-at-2" in str(answer.get("result")), answer
    if split_in_stderr:  # stderr is read apart from the answer: wait for the last line it writes
        stderr = TimelineFrame.objects.filter(session=session, kind="stderr")
        await wait_until(
            lambda: any(b"(the rest)" in bytes(raw) for raw in stderr.values_list("raw", flat=True))
        )
    looked_for = _looked_for(secret)
    # The control: the recording as it is holds every encoding and both pieces.
    raw = await _body(await owner.get(f"/s/{session.public_id}/export?redacted=0"))
    assert [
        name for name, value in looked_for.items() if not any(value in text for text in _texts(raw))
    ] == []
    token = await _make_link(owner, session)
    shown = await _shown(owner, session, token)
    leaks = _leaks(shown, looked_for)
    assert not leaks, "\n".join(leaks[:20])
    assert "[redacted]" in shown[f"/shared/{token}/export"]
    return raw


@pytest.mark.slow
async def test_no_share_surface_shows_a_stdio_servers_secret_in_any_encoding_or_split_across_frames() -> None:
    secret = f"sk/{secrets.token_hex(6)}+Kéy=Val&go now"
    async with live_runtime():
        alice = await make_user("alice")
        owner = await logged_in_client(alice)
        config = stdio_config(
            sys.executable, [str(ECHO_SERVER), "stdio"], env={"API_KEY": secret}, name="echo"
        )
        session = await start_session(alice, config)
        await _leak_and_check(owner, session, secret, split_in_stderr=True)
        frames = TimelineFrame.objects.filter(session=session)
        assert await frames.filter(kind="stderr").acount() >= len(ECHO.encodings(secret)) + 2
        assert await frames.filter(method="notifications/message").acount() >= len(ECHO.encodings(secret)) + 2


@pytest.mark.slow
async def test_no_share_surface_shows_an_http_servers_secret_in_any_encoding_nor_in_its_headers() -> None:
    secret = f"sk/{secrets.token_hex(6)}+Key=Val&go now"
    port = free_port()
    argv = [sys.executable, str(ECHO_SERVER), "http", "--port", str(port)]
    with start_http_server(argv, port, env={"API_KEY": secret}):
        async with live_runtime():
            alice = await make_user("alice")
            owner = await logged_in_client(alice)
            url = f"http://127.0.0.1:{port}/mcp"
            session = await start_session(alice, http_config(url, name="echo", headers={"X-Api-Key": secret}))
            raw = await _leak_and_check(owner, session, secret, split_in_stderr=False)
            assert "x-echo-base64-at-1" in raw.lower()  # the headers were recorded
