"""``/tap/<token>/…``: a tap endpoint's secret URL, a streaming reverse proxy in the web processes.

A plain ASGI route beside Django's (``inspector/asgi.py``), not a view: a host is not a browser (no
cookies, no Origin, no CSRF token), and an SSE stream stays open for as long as the host wants it, so
the route sits outside the session, CSRF and same-origin middleware and takes from a request only what
it forwards. Django serves it the token's lookup, through the ORM on the runtime's database thread.

A request goes to the same path and query on the upstream's origin (the path after the token), with
the host's headers but the hop-by-hop ones, ``Host``, ``Cookie`` (never the app's cookies) and what a
front proxy adds (``Forwarded``, ``X-Forwarded-*``, ``X-Real-IP``); every connection to the upstream is
held to the team's egress rules. The response streams back a chunk at a time, without ``Set-Cookie``
and under ``Content-Security-Policy: sandbox``: whatever the upstream sends is served from the
inspector's origin, and must never run there. Each exchange is handed, as it passes, to its host
connection's ``HostedTap`` (``inspector/tap_sessions.py``), which records it.

An unknown token is a 404 and a revoked one a 410, both saying nothing more. Every request joins the
endpoint's group before its lookup; revoking sends to that group, so a stream in flight ends at once.
The access log shows ``/tap/[redacted]/…`` (``inspector.auth.RedactQueryStrings``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from inspector.tap._http_gate import EventCutter, HttpGate, gated_events
from inspector.tap._proxy import HOP_BY_HOP, _EndpointRewriter, _origin_key
from inspector.tap_sessions import Endpoint, HostedTap, TapHub
from inspector.tap_shared import RemoteTap
from sessions.runtime import store
from sessions.teams.models import TapEndpoint, token_digest

__all__ = ["PREFIX", "REVOKED", "serve"]

PREFIX = "/tap/"
REVOKED = "tap.revoked"
"""The group message revoking an endpoint sends its exchanges in flight."""
TOKEN = re.compile(r"[A-Za-z0-9_-]{20,100}")
METHODS = frozenset({"GET", "POST", "DELETE"})
"""What an MCP host sends: Streamable HTTP and legacy SSE, and OAuth's discovery and token requests."""
_NOT_FORWARDED = HOP_BY_HOP | {
    b"host",
    b"content-length",
    b"expect",
    b"cookie",
    b"forwarded",
    b"x-forwarded-for",
    b"x-forwarded-host",
    b"x-forwarded-proto",
    b"x-forwarded-port",
    b"x-real-ip",
}
_NOT_RETURNED = HOP_BY_HOP | {b"set-cookie", b"content-security-policy", b"x-content-type-options"}
_OWN_HEADERS = [
    (b"content-security-policy", b"sandbox; default-src 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
_LAST_USED_EVERY = timedelta(minutes=1)
ORDER_WAIT = 2.0
"""Seconds a request waits at most for the one the host sent before it to go upstream first."""
_ORDER: dict[str, asyncio.Future[None]] = {}
"""Per endpoint (by digest), the newest request's turn: done once it has gone upstream."""

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_hub: TapHub | None = None


def hub() -> TapHub:
    """This process's host connections (made at its first tap request)."""
    global _hub
    if _hub is None:
        _hub = TapHub(get_channel_layer())
    return _hub


async def serve(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answer one request to a tap endpoint's URL."""
    raw_path: bytes = scope.get("raw_path") or scope["path"].encode()
    token, _, tail = raw_path[len(PREFIX) :].partition(b"/")
    if not settings.INSPECTOR_HOSTED or not TOKEN.fullmatch(token.decode("latin-1")):
        await _plain(send, 404, "Not found")
        return
    if scope["method"] not in METHODS:
        await _plain(
            send, 405, "A tap endpoint takes GET, POST and DELETE.", [(b"allow", b"GET, POST, DELETE")]
        )
        return
    digest = token_digest(token.decode("ascii"))
    # Taken before the first await: requests go upstream in the order the host sent them.
    before, turn = _ORDER.get(digest), asyncio.get_running_loop().create_future()
    _ORDER[digest] = turn
    try:
        await _serve(scope, receive, send, token.decode("ascii"), tail, digest, before, turn)
    finally:
        if not turn.done():
            turn.set_result(None)
        if _ORDER.get(digest) is turn:
            del _ORDER[digest]


async def _serve(
    scope: dict[str, Any],
    receive: Receive,
    send: Send,
    token: str,
    tail: bytes,
    digest: str,
    before: asyncio.Future[None] | None,
    turn: asyncio.Future[None],
) -> None:
    layer = get_channel_layer()
    group = TapEndpoint.group_for(digest)
    try:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
    except Exception as exc:  # the channel layer is down: no way to hear a revocation
        await _plain(
            send, 503, f"The inspector cannot take tap traffic now ({type(exc).__name__}); try again."
        )
        return
    try:
        endpoint = await _lookup(digest)
        if endpoint is None:
            await _plain(send, 404, "Not found")
        elif endpoint.revoked:
            await _plain(send, 410, "Gone")
        else:
            if (
                before is not None
            ):  # the host's previous request goes first (a stuck one holds none back long)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(before), ORDER_WAIT)
            target = b"/" + tail + (b"?" + scope["query_string"] if scope.get("query_string") else b"")
            exchange = _Exchange(scope, receive, send, endpoint, token, channel, turn)
            await exchange.run(target.decode("latin-1"))
    finally:
        with contextlib.suppress(Exception):
            await layer.group_discard(group, channel)


@store.in_db_thread
def _lookup(digest: str) -> Endpoint | None:
    row = TapEndpoint.objects.filter(digest=digest).select_related("team").first()
    if row is None:
        return None
    now = timezone.now()
    if row.revoked is None and (row.last_used is None or now - row.last_used > _LAST_USED_EVERY):
        TapEndpoint.objects.filter(pk=row.pk).update(last_used=now)
    allow = row.team.egress_allow if isinstance(row.team.egress_allow, list) else []
    return Endpoint(
        pk=row.pk,
        name=row.name,
        url=row.url,
        team_id=row.team_id,
        owner_id=row.created_by_id,
        revoked=row.revoked is not None,
        egress_allow=tuple(str(e) for e in allow),
    )


class _HostedRewriter(_EndpointRewriter):
    """Legacy SSE's endpoint event, rewritten to the tap's URL: an absolute URL on the upstream's origin
    (as the local tap does) and a path, which would resolve outside ``/tap/<token>/`` otherwise."""

    def __init__(self, upstream: str, tap_base: str, prefix: str) -> None:
        super().__init__(upstream, tap_base)
        self.prefix = prefix

    def _rewrite(self, lines: list[bytes]) -> bytes | None:
        out = super()._rewrite(lines)
        if out is not None or (b"event: endpoint" not in lines and b"event:endpoint" not in lines):
            return out
        rewritten, changed = [], False
        for line in lines:
            name, sep, value = line.partition(b":")
            path = value.removeprefix(b" ").strip()
            if name == b"data" and sep and path.startswith(b"/") and not path.startswith(b"//"):
                self.given = self.prefix + path.decode("latin-1")
                line, changed = b"data: " + self.given.encode("latin-1"), True
            rewritten.append(line)
        return b"\n".join(rewritten) if changed else None


class _Exchange:
    """One request of a host: forwarded, its response streamed back, both handed to its connection."""

    def __init__(
        self,
        scope: dict[str, Any],
        receive: Receive,
        send: Send,
        endpoint: Endpoint,
        token: str,
        channel: str,
        turn: asyncio.Future[None],
    ) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.endpoint, self.token, self.channel, self.turn = endpoint, token, channel, turn
        parts = urlsplit(endpoint.url)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        host = next((v for n, v in scope["headers"] if n == b"host"), b"").decode("latin-1") or "localhost"
        self.base = f"{scope.get('scheme', 'http')}://{host}"
        self.started = False

    async def run(self, target: str) -> None:
        method = self.scope["method"]
        body = await self._body()
        if body is None:
            return  # the host left mid-request
        headers = [(n, v) for n, v in self.scope["headers"]]
        named = {v.strip().lower() for n, v in headers if n == b"connection" for v in v.split(b",")}
        forward = [(n, v) for n, v in headers if n not in _NOT_FORWARDED and n not in named]
        sid = next((v.decode("latin-1") for n, v in headers if n == b"mcp-session-id"), None)
        listen = f"{self.base}{PREFIX}[redacted]{urlsplit(self.endpoint.url).path}"
        try:
            tap = await hub().find(self.endpoint, listen, sid, sid is None and _is_initialize(method, body))
        except Exception as exc:  # the channel layer or the database is down: nothing can be recorded
            await _plain(self.send, 503, f"The inspector cannot take tap traffic now ({type(exc).__name__}).")
            return
        xid = next(tap.ids)
        tap.in_flight += 1
        try:
            if isinstance(tap, HostedTap) and method == "POST":
                gated = await self._gated(tap, xid, sid or "", target, headers, body)
                if gated is None:
                    return
                body = gated
            await self._forward(tap, xid, method, target, forward, body)
        finally:
            tap.in_flight -= 1

    async def _gated(
        self,
        tap: HostedTap,
        xid: int | str,
        sid: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> bytes | None:
        """The POST body through the connection's breakpoints and faults (``inspector/tap_gates.py``):
        what to forward, or None once the tap has answered the host itself (or dropped the message)."""
        gate = tap.controls.traffic.http["out"]
        if not gate.on() or urlsplit(target).path not in tap.frames.mcp_paths:
            return body
        verdict = await gate.decide(body)
        if verdict.change is not None:
            tap.put("http-tap", xid, verdict.change, sid, body, target)
        if verdict.action == "forward":
            return verdict.body
        accept = b", ".join(v for n, v in headers if n == b"accept").lower()
        stream = b"text/event-stream" in accept
        if verdict.action == "answer":
            # As the local tap answers: JSON, which every Streamable HTTP client reads, unless the host
            # takes only a stream.
            if stream and b"application/json" not in accept:
                answer, ctype = b"event: message\ndata: " + verdict.body + b"\n\n", b"text/event-stream"
            else:
                answer, ctype = verdict.body, b"application/json"
            await self.send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", ctype), *_OWN_HEADERS],
                }
            )
            await self.send({"type": "http.response.body", "body": answer})
        elif verdict.kind != "request":
            await self.send({"type": "http.response.start", "status": 202, "headers": list(_OWN_HEADERS)})
            await self.send({"type": "http.response.body", "body": b""})
        else:  # a dropped request: the host waits for an answer that never comes, until its own deadline
            if stream:
                head = [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                    *_OWN_HEADERS,
                ]
                await self.send({"type": "http.response.start", "status": 200, "headers": head})
            await self._host_left()
        return None

    async def _forward(
        self,
        tap: HostedTap | RemoteTap,
        xid: int | str,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> None:
        tap.put("http-request", xid, method, target, headers, body)
        client = hub().client(self.endpoint)
        framed = any(n in (b"content-length", b"transfer-encoding") for n, _ in self.scope["headers"])
        try:
            request = client.build_request(
                method, self.origin + target, headers=headers, content=body if framed or body else None
            )
            request.extensions["trace"] = self._trace
            response = await client.send(request, stream=True)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            why = str(exc) or type(exc).__name__
            tap.put("http-failed", xid, f"cannot reach {self.origin}: {why}")
            await _plain(self.send, 502, f"The tap endpoint cannot reach its server: {why}")
            return
        try:
            given = response.headers.get("mcp-session-id")
            if given and tap.sid is None:
                hub().bind(tap, given)
            await self._respond(tap, xid, method, response)
        finally:
            await response.aclose()
        if method == "DELETE" and response.status_code < 300:
            tap.end("the host ended the HTTP session")

    async def _trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's progress: once this request is written upstream, the host's next one may go."""
        if event.endswith("send_request_body.complete") and not self.turn.done():
            self.turn.set_result(None)

    async def _respond(
        self, tap: HostedTap | RemoteTap, xid: int | str, method: str, response: httpx.Response
    ) -> None:
        raw = response.headers.raw
        named = {v.strip().lower() for n, v in raw if n.lower() == b"connection" for v in v.split(b",")}
        back = [(n.lower(), self._location(v) if n.lower() == b"location" else v) for n, v in raw]
        back = [(n, v) for n, v in back if n not in _NOT_RETURNED and n not in named]
        gate = _in_gate(tap, response)
        ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
        json_answer = method == "POST" and ctype == "application/json" and response.status_code == 200
        if isinstance(tap, HostedTap) and gate is not None and gate.on() and json_answer:
            await self._gated_json(tap, xid, response, back, gate)
            return
        await self.send(
            {"type": "http.response.start", "status": response.status_code, "headers": back + _OWN_HEADERS}
        )
        self.started = True
        tap.put("http-response", xid, response.status_code, response.reason_phrase, raw)
        streamed = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        rewriter = None
        if streamed and method == "GET":
            rewriter = _HostedRewriter(
                self.endpoint.url, f"{self.base}{PREFIX}{self.token}", PREFIX + self.token
            )
        cutter = EventCutter() if streamed and gate is not None else None
        pumping = asyncio.ensure_future(self._pump(tap, xid, response, rewriter, cutter))
        leaving = asyncio.ensure_future(self._host_left())
        revoked = asyncio.ensure_future(self._revoked())
        try:
            await asyncio.wait({pumping, leaving, revoked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (leaving, revoked):
                task.cancel()
            if not pumping.done():
                pumping.cancel()
                why = "the tap endpoint was revoked" if revoked.done() and not revoked.cancelled() else None
                tap.put("http-end", xid, why, why is None)
                with contextlib.suppress(OSError, RuntimeError):
                    await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            for task in (pumping, leaving, revoked):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if revoked.done() and not revoked.cancelled():
            hub().revoked(self.endpoint.pk)

    async def _pump(
        self,
        tap: HostedTap | RemoteTap,
        xid: int | str,
        response: httpx.Response,
        rewriter: _HostedRewriter | None,
        cutter: EventCutter | None = None,
    ) -> None:
        """Pass the body on a chunk at a time, each handed to the connection once it is written; with a
        ``cutter``, an SSE stream's events go one at a time through the connection's gate while it is
        asked (``inspector/tap_gates.py``)."""
        try:
            async for chunk in response.aiter_raw():
                out = chunk
                if rewriter is not None:
                    out = rewriter.feed(chunk)
                    if rewriter.given is not None:  # recorded without the token
                        tap.put("http-rewrote", xid, rewriter.given.replace(self.token, "[redacted]"))
                        rewriter.given = None
                if cutter is not None and isinstance(tap, HostedTap):
                    gate = tap.controls.traffic.http["in"]
                    if cutter.buffer or gate.on():
                        await self._events(tap, xid, cutter, out)
                        continue
                    cutter.passed(out)
                if out:
                    await self.send({"type": "http.response.body", "body": out, "more_body": True})
                tap.put("http-chunk", xid, chunk)
            if rewriter is not None and rewriter.held and not rewriter.done:
                await self.send({"type": "http.response.body", "body": rewriter.held, "more_body": True})
        except httpx.HTTPError as exc:
            # The server broke off: the host's body ends there (ASGI cannot reset the connection).
            tap.put(
                "http-end", xid, f"the server's response broke off: {str(exc) or type(exc).__name__}", False
            )
            await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})
        tap.put("http-end", xid, None, False)

    async def _events(self, tap: HostedTap, xid: int | str, cutter: EventCutter, data: bytes) -> None:
        """Each whole event of the stream through the gate, in order; what the host got is recorded."""
        gate = tap.controls.traffic.http["in"]
        async for out in gated_events(gate, cutter, data, lambda change: tap.put("http-tap", xid, change)):
            await self.send({"type": "http.response.body", "body": out, "more_body": True})
            tap.put("http-chunk", xid, out)

    async def _gated_json(
        self,
        tap: HostedTap,
        xid: int | str,
        response: httpx.Response,
        back: list[tuple[bytes, bytes]],
        gate: HttpGate,
    ) -> None:
        """A JSON answer read whole and put to the gate before the host gets its head (its length may
        change)."""
        parts: list[bytes] = []
        try:
            async for chunk in response.aiter_raw():
                parts.append(chunk)
        except httpx.HTTPError as exc:
            why = str(exc) or type(exc).__name__
            tap.put("http-response", xid, response.status_code, response.reason_phrase, response.headers.raw)
            tap.put("http-end", xid, f"the server's response broke off: {why}", False)
            await _plain(self.send, 502, f"The tap endpoint's server broke off its answer: {why}")
            return
        verdict = await gate.decide(b"".join(parts))
        if verdict.change is not None:
            tap.put("http-tap", xid, verdict.change)
        if verdict.action != "forward":
            # The answer was dropped: the host waits for it until its own deadline, and leaves.
            await self._host_left()
            tap.put("http-end", xid, None, True)
            return
        body = verdict.body
        back = [(n, v) for n, v in back if n != b"content-length"]
        back.append((b"content-length", str(len(body)).encode()))
        await self.send(
            {"type": "http.response.start", "status": response.status_code, "headers": back + _OWN_HEADERS}
        )
        self.started = True
        tap.put("http-response", xid, response.status_code, response.reason_phrase, response.headers.raw)
        await self.send({"type": "http.response.body", "body": body})
        tap.put("http-chunk", xid, body)
        tap.put("http-end", xid, None, False)

    async def _host_left(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass

    async def _revoked(self) -> None:
        layer = get_channel_layer()
        while (await layer.receive(self.channel)).get("type") != REVOKED:
            pass

    async def _body(self) -> bytes | None:
        parts: list[bytes] = []
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return None
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                return b"".join(parts)

    def _location(self, value: bytes) -> bytes:
        """A redirect to the upstream's own origin goes through the tap instead (to another: as it is)."""
        url = value.decode("latin-1")
        if "://" not in url or _origin_key(url) != _origin_key(self.endpoint.url):
            return value
        parts = urlsplit(url)
        query = f"?{parts.query}" if parts.query else ""
        return f"{self.base}{PREFIX}{self.token}{parts.path}{query}".encode("latin-1")


def _in_gate(tap: HostedTap | RemoteTap, response: httpx.Response) -> HttpGate | None:
    """The connection's server → host gate, for a plain response from the MCP endpoint (asked about
    its messages only while it has rules or faults: ``HttpGate.on``)."""
    if not isinstance(tap, HostedTap):
        return None
    plain = response.headers.get("content-encoding", "identity").strip().lower() in ("", "identity")
    path = response.request.url.raw_path.decode("ascii", "replace").split("?")[0]
    return tap.controls.traffic.http["in"] if plain and path in tap.frames.mcp_paths else None


def _is_initialize(method: str, body: bytes) -> bool:
    """Whether a request starts a connection (read only for a POST without a session id)."""
    if method != "POST" or b'"initialize"' not in body:
        return False
    with contextlib.suppress(ValueError, RecursionError):
        message = json.loads(body)
        return isinstance(message, dict) and message.get("method") == "initialize"
    return False


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = text.encode() + b"\n"
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *_OWN_HEADERS,
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
