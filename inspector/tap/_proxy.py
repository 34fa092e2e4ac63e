"""The HTTP tap's forwarding: a reverse proxy from a local address to a Streamable HTTP or SSE server.

The listening side is asyncio streams with h11 (HTTP/1.1 as bytes in, events out, no server framework
between the host and us: every header the host sent is seen with its own name and order, and a body is
forwarded a chunk at a time as it arrives); the upstream side is h11 too (``_upstream``), adding no
header of its own but ``Host`` and the body's length. A request goes to the same path and query on the
server's origin, with every header unchanged but those a proxy must not forward (RFC 9110 §7.6.1:
``Connection`` and the headers it names, ``Keep-Alive``, ``Proxy-Connection``, ``TE``, ``Trailer``,
``Transfer-Encoding``, ``Upgrade``, ``Proxy-Authenticate``, ``Proxy-Authorization``), and ``Host``, which
names the server (its framing is the proxy's own). A response comes back the same way, its body passed
on raw (still compressed, if it was) a chunk at a time, never held whole.

Two things are rewritten, both only when they name the server's own origin, so the host keeps talking
through the tap: legacy SSE's ``endpoint`` event (a relative one passes as it is, and resolves to the
tap) and a redirect's ``Location``. With ``rewrite_resource`` (``--rewrite-resource``) two more, for OAuth
through the tap: a challenge's ``resource_metadata`` URL and the protected resource metadata's
``resource``, so a host that holds the resource to the URL it connected to (RFC 9728 §3.3) accepts the
tap's. Everything is handed to the spool thread (``_http_spool``) as it passes, after it was forwarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import itertools
import json
import re
import time
import zlib
from typing import Any
from urllib.parse import urlsplit

import h11

from inspector.tap._gate import Items
from inspector.tap._http_gate import EventCutter, HttpTraffic, Verdict, gated_events
from inspector.tap._upstream import Reply, Upstream, UpstreamError

__all__ = ["Proxy"]

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authorization",
    }
)
_NOT_FORWARDED = HOP_BY_HOP | {b"host", b"content-length", b"expect"}
"""Request headers the proxy sets itself: the server's Host, and the body's framing."""
_NOT_RETURNED = HOP_BY_HOP
_READ = 1 << 16
MAX_REQUEST_BYTES = 64 * 1024 * 1024
"""A request body is read whole before it is forwarded (one JSON-RPC message); past this, 413."""
_FIRST_EVENT_LIMIT = 1 << 16
"""Bytes of an SSE stream held back at most while looking for a legacy ``endpoint`` event."""
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_METADATA_PATH = "/.well-known/oauth-protected-resource"
_METADATA_BYTES = 1 << 20
"""A protected resource metadata document bigger than this passes unchanged."""
_RESOURCE_METADATA = re.compile(rb'(resource_metadata\s*=\s*)(?:"([^"]*)"|([^\s,]+))', re.IGNORECASE)


def _origin_key(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


class _EndpointRewriter:
    """Holds an SSE stream's first event back until it is whole; an ``endpoint`` event that names the
    server's origin is handed on naming the tap's. Everything after it passes untouched."""

    def __init__(self, upstream: str, tap_origin: str) -> None:
        self.upstream = upstream
        self.tap_origin = tap_origin
        self.held = b""
        self.done = False
        self.given: str | None = None
        self.endpoint: str | None = None
        """The ``endpoint`` event's URL as the host got it (legacy SSE), relative or absolute."""

    def feed(self, chunk: bytes) -> bytes:
        if self.done:
            return chunk
        data, self.held = self.held + chunk, b""
        start = 0
        while (end := _EVENT_END.search(data, start)) is not None:
            block = data[start : end.start()]
            lines = block.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
            if all(line.startswith(b":") or not line for line in lines):
                start = end.end()  # only comments so far: the first event is still to come
                continue
            self.done = True
            rewritten = self._rewrite(lines)
            if rewritten is None:
                return data
            return data[:start] + rewritten + data[end.start() :]
        if len(data) > _FIRST_EVENT_LIMIT:
            self.done = True
            return data
        self.held = data
        return b""

    def _rewrite(self, lines: list[bytes]) -> bytes | None:
        if b"event: endpoint" not in lines and b"event:endpoint" not in lines:
            return None
        data = [
            v.removeprefix(b" ") for n, sep, v in (line.partition(b":") for line in lines) if n == b"data"
        ]
        self.endpoint = b"\n".join(data).decode("utf-8", errors="replace").strip() if data else None
        out, changed = [], False
        for line in lines:
            name, sep, value = line.partition(b":")
            url = value.removeprefix(b" ").decode("utf-8", errors="replace").strip()
            if name == b"data" and sep and "://" in url and _origin_key(url) == _origin_key(self.upstream):
                parts = urlsplit(url)
                self.given = self.tap_origin + parts.path + (f"?{parts.query}" if parts.query else "")
                line, changed = b"data: " + self.given.encode(), True
                self.endpoint = self.given
            out.append(line)
        return b"\n".join(out) if changed else None


class Proxy:
    """Serve host connections, one task each: a request in, forwarded, its response streamed back."""

    def __init__(
        self,
        upstream: str,
        items: Items,
        *,
        rewrite_resource: bool = False,
        traffic: HttpTraffic | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        self.traffic = traffic
        """Breakpoints and faults (``_http_gate``); ``None``: every message passes as it is."""
        self.mcp_paths = {parts.path or "/"}
        self.upstream = upstream
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.tap_origin = ""
        """``http://host:port`` the tap listens on (known once it is bound)."""
        self.items = items
        self.rewrite_resource = rewrite_resource
        self.ids = itertools.count(1)
        self.writers: set[asyncio.StreamWriter] = set()
        self.legacy: dict[str, _LegacyStream] = {}
        """A legacy SSE session's stream to its host, by the endpoint's path and query its POSTs go to."""
        self.client = Upstream(self.origin)

    def _put(self, what: str, *payload: Any) -> None:
        self.items.put((what, payload, time.time(), time.monotonic()))

    def close_hosts(self) -> None:
        """Close every host connection now (a fault): the host sees its connections drop."""
        for writer in list(self.writers):
            writer.transport.abort()

    def _gate(self, direction: str, target: str) -> Any:
        """The direction's gate when it is to be asked about a message to ``target``, else ``None``."""
        if self.traffic is None:
            return None
        gate = self.traffic.http[direction]
        return gate if gate.on() and urlsplit(target).path in self.mcp_paths else None

    async def aclose(self) -> None:
        for writer in list(self.writers):
            writer.transport.abort()
        await self.client.aclose()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One host connection: its requests one after the other (keep-alive), until either side closes."""
        self.writers.add(writer)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                event = await _next_event(conn, reader)
                if not isinstance(event, h11.Request):
                    break
                if not await self._exchange(conn, reader, writer, event):
                    break
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    break
                conn.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            with contextlib.suppress(h11.LocalProtocolError, OSError):
                await _answer(conn, writer, exc.error_status_hint, f"bad request: {exc}")
        except (OSError, asyncio.IncompleteReadError):
            pass  # the host went away
        finally:
            self.writers.discard(writer)
            writer.close()

    async def _exchange(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        request: h11.Request,
    ) -> bool:
        """Forward one request and stream its response back; say whether the connection can go on."""
        target = request.target.decode("latin-1")
        if not target.startswith("/"):
            await _answer(conn, writer, 400, "the tap is a reverse proxy: send origin-form requests (/path)")
            return False
        if conn.they_are_waiting_for_100_continue:
            writer.write(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        body = await _read_body(conn, reader)
        if body is None:
            await _answer(
                conn, writer, 413, f"the tap forwards request bodies up to {MAX_REQUEST_BYTES} bytes"
            )
            return False
        headers = request.headers.raw_items()
        method = request.method.decode("ascii")
        xid = next(self.ids)
        read = time.time(), time.monotonic()
        gate = self._gate("out", target) if method == "POST" else None
        if gate is not None:
            verdict = await gate.decide(body)
            if verdict.change is not None:
                # With the request's session id and body: the spool files it in its host's session.
                sid = next((v for n, v in headers if n.lower() == b"mcp-session-id"), b"")
                self._put("http-tap", xid, verdict.change, sid.decode("latin-1"), body, target)
            if verdict.action != "forward":
                legacy = self.legacy.get(target)
                return await _answered(conn, reader, writer, headers, verdict, legacy)
            body = verdict.body
        # Timed as the host sent it: latency a fault added shows in the answer's.
        self.items.put(("http-request", (xid, method, target, headers, body), *read))
        named = {v.strip().lower() for n, v in headers if n.lower() == b"connection" for v in v.split(b",")}
        forward = [(n, v) for n, v in headers if n.lower() not in _NOT_FORWARDED and n.lower() not in named]
        framed = any(n.lower() in (b"content-length", b"transfer-encoding") for n, _ in headers)
        try:
            response = await self.client.send(method, target, forward, body if framed or body else None)
        except UpstreamError as exc:
            why = str(exc)
            self._put("http-failed", xid, f"cannot reach {self.origin}: {why}")
            await _answer(conn, writer, 502, f"mcp-inspector tap: cannot reach {self.origin}: {why}")
            return True
        try:
            return await self._respond(conn, reader, writer, method, response, xid)
        finally:
            await response.aclose()

    async def _respond(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        method: str,
        response: Reply,
        xid: int,
    ) -> bool:
        raw = response.headers
        named = {v.strip().lower() for n, v in raw if n.lower() == b"connection" for v in v.split(b",")}
        back = [(n, self._location(v) if n.lower() == b"location" else v) for n, v in raw]
        back = [(n, v) for n, v in back if n.lower() not in _NOT_RETURNED and n.lower() not in named]
        reason = response.reason_phrase.encode("latin-1", errors="replace")
        if self.rewrite_resource:
            back = self._challenges(back, xid)
            if method == "GET" and response.status_code == 200 and self._is_metadata(response):
                return await self._metadata(conn, writer, response, back, reason, xid)
        ctype = response.header("content-type").split(";")[0].strip().lower()
        plain = response.header("content-encoding", "identity").strip().lower() in ("", "identity")
        target = response.target
        gate = self._gate("in", target) if plain and method == "POST" else None
        if gate is not None and ctype == "application/json" and response.status_code == 200:
            return await self._gated_json(conn, reader, writer, response, back, reason, xid)
        writer.write(conn.send(h11.Response(status_code=response.status_code, headers=back, reason=reason)))
        self._put("http-response", xid, response.status_code, response.reason_phrase, raw)
        streamed = ctype == "text/event-stream"
        rewriter = _EndpointRewriter(self.upstream, self.tap_origin) if streamed and method == "GET" else None
        gated = self.traffic is not None and streamed and plain and urlsplit(target).path in self.mcp_paths
        pump = self._pump(conn, writer, response, xid, rewriter, EventCutter() if gated else None)
        if not streamed:
            return await pump
        # A stream may idle for minutes: watch the host meanwhile, and end the upstream stream when it leaves.
        pumping = asyncio.ensure_future(pump)
        watching = asyncio.ensure_future(_watch(conn, reader))
        try:
            await asyncio.wait({pumping, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watching.cancel()
            if not pumping.done():
                pumping.cancel()
                self._put("http-end", xid, None, True)
            with contextlib.suppress(asyncio.CancelledError):
                await watching
        try:
            return await pumping
        except asyncio.CancelledError:
            return False

    async def _pump(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        response: Reply,
        xid: int,
        rewriter: _EndpointRewriter | None,
        cutter: EventCutter | None = None,
    ) -> bool:
        """Pass the body on a chunk at a time, each handed to the spool once it is written; with a
        ``cutter``, an SSE stream's events go one at a time through the gate while it is asked."""
        gate = self.traffic.http["in"] if self.traffic is not None else None
        legacy: _LegacyStream | None = None
        try:
            async for chunk in response.chunks():
                if rewriter is not None:
                    out = rewriter.feed(chunk)
                    if rewriter.given is not None:
                        self._put("http-rewrote", xid, rewriter.given)
                        rewriter.given = None
                    if rewriter.endpoint is not None and legacy is None:
                        legacy = self._legacy_stream(conn, writer, rewriter.endpoint)
                else:
                    out = chunk
                if cutter is not None and gate is not None and (cutter.buffer or gate.on()):
                    await self._events(conn, writer, xid, cutter, out, legacy)
                    continue
                if cutter is not None:
                    cutter.passed(out)
                if out:
                    writer.write(conn.send(h11.Data(data=out)))
                    if legacy is not None:
                        legacy.wrote(out)
                self._put("http-chunk", xid, chunk)
                await writer.drain()
            if rewriter is not None and rewriter.held and not rewriter.done:
                writer.write(conn.send(h11.Data(data=rewriter.held)))
        except (UpstreamError, h11.LocalProtocolError) as exc:
            # The server broke off: so does the tap, so the host sees an incomplete body as it would have.
            why = f"the server's response broke off: {str(exc) or type(exc).__name__}"
            self._put("http-end", xid, why, False)
            writer.transport.abort()
            return False
        except OSError:
            self._put("http-end", xid, None, True)
            return False
        finally:
            if legacy is not None:
                legacy.closed = True
                self.legacy = {k: v for k, v in self.legacy.items() if v is not legacy}
        writer.write(conn.send(h11.EndOfMessage()))
        self._put("http-end", xid, None, False)
        await writer.drain()
        return True

    def _legacy_stream(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, endpoint: str
    ) -> _LegacyStream:
        """A legacy SSE stream gave its endpoint: its POSTs are the MCP endpoint's, and the tap's own
        answers to them go on this stream."""
        parts = urlsplit(endpoint)
        self.mcp_paths.add(parts.path or "/")
        stream = self.legacy[(parts.path or "/") + (f"?{parts.query}" if parts.query else "")] = (
            _LegacyStream(conn, writer)
        )
        return stream

    async def _events(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        xid: int,
        cutter: EventCutter,
        data: bytes,
        legacy: _LegacyStream | None = None,
    ) -> None:
        """Each whole event of the stream through the gate, in order; what the host got is recorded."""
        assert self.traffic is not None
        gate = self.traffic.http["in"]
        async for piece in gated_events(
            gate, cutter, data, lambda change: self._put("http-tap", xid, change)
        ):
            writer.write(conn.send(h11.Data(data=piece)))
            if legacy is not None:
                legacy.wrote(piece)
            self._put("http-chunk", xid, piece)
            await writer.drain()

    async def _gated_json(
        self,
        conn: h11.Connection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        response: Reply,
        back: list[tuple[bytes, bytes]],
        reason: bytes,
        xid: int,
    ) -> bool:
        """A JSON answer read whole and put to the gate before the host gets its head (its length may
        change)."""
        assert self.traffic is not None
        whole = await self._read_whole(writer, response, xid)
        if whole is None:
            return False
        verdict = await self.traffic.http["in"].decide(whole)
        if verdict.change is not None:
            self._put("http-tap", xid, verdict.change)
        if verdict.action != "forward":
            # The answer was dropped: the host waits for it until its own deadline, and leaves.
            await _watch(conn, reader)
            self._put("http-end", xid, None, True)
            return False
        body = verdict.body
        back = [(n, v) for n, v in back if n.lower() != b"content-length"]
        back.append((b"Content-Length", str(len(body)).encode()))
        writer.write(conn.send(h11.Response(status_code=response.status_code, headers=back, reason=reason)))
        self._put("http-response", xid, response.status_code, response.reason_phrase, response.headers)
        writer.write(conn.send(h11.Data(data=body)))
        self._put("http-chunk", xid, body)
        writer.write(conn.send(h11.EndOfMessage()))
        self._put("http-end", xid, None, False)
        await writer.drain()
        return True

    async def _read_whole(self, writer: asyncio.StreamWriter, response: Reply, xid: int) -> bytes | None:
        """The server's whole body; ``None`` when it broke off (recorded, and the host's connection cut)."""
        parts: list[bytes] = []
        try:
            async for chunk in response.chunks():
                parts.append(chunk)
        except UpstreamError as exc:
            self._put("http-response", xid, response.status_code, response.reason_phrase, response.headers)
            self._put(
                "http-end", xid, f"the server's response broke off: {str(exc) or type(exc).__name__}", False
            )
            writer.transport.abort()
            return None
        return b"".join(parts)

    def _tap_url(self, url: str) -> str | None:
        """``url`` on the tap's origin when it names the server's own (else ``None``)."""
        if "://" not in url or _origin_key(url) != _origin_key(self.upstream):
            return None
        parts = urlsplit(url)
        return self.tap_origin + parts.path + (f"?{parts.query}" if parts.query else "")

    def _challenges(self, headers: list[tuple[bytes, bytes]], xid: int) -> list[tuple[bytes, bytes]]:
        """``WWW-Authenticate``'s ``resource_metadata`` on the server's origin is given on the tap's."""

        def swap(found: re.Match[bytes]) -> bytes:
            url = (found[2] if found[2] is not None else found[3]).decode("latin-1")
            given = self._tap_url(url)
            if given is None:
                return found[0]
            self._put("http-gave", xid, f"the tap gave the host resource_metadata={given}")
            return found[1] + b'"' + given.encode("latin-1") + b'"'

        return [
            (n, _RESOURCE_METADATA.sub(swap, v) if n.lower() == b"www-authenticate" else v)
            for n, v in headers
        ]

    @staticmethod
    def _is_metadata(response: Reply) -> bool:
        path = response.path
        ctype = response.header("content-type").split(";")[0].strip().lower()
        return (
            path == _METADATA_PATH or path.startswith(_METADATA_PATH + "/")
        ) and ctype == "application/json"

    async def _metadata(
        self,
        conn: h11.Connection,
        writer: asyncio.StreamWriter,
        response: Reply,
        back: list[tuple[bytes, bytes]],
        reason: bytes,
        xid: int,
    ) -> bool:
        """The protected resource metadata, read whole: its ``resource`` on the server's origin is given
        on the tap's (the body re-encoded, uncompressed); the spool records what the server sent."""
        sent = await self._read_whole(writer, response, xid)
        if sent is None:
            return False
        body, given = sent, None
        document = _json_body(sent, response.header("content-encoding"))
        resource = document.get("resource") if isinstance(document, dict) else None
        if isinstance(document, dict) and isinstance(resource, str) and len(sent) <= _METADATA_BYTES:
            given = self._tap_url(resource)
        if given is not None:
            assert isinstance(document, dict)
            body = json.dumps({**document, "resource": given}).encode()
            framing = (b"content-length", b"content-encoding")
            back = [(n, v) for n, v in back if n.lower() not in framing]
            back.append((b"Content-Length", str(len(body)).encode()))
        writer.write(conn.send(h11.Response(status_code=response.status_code, headers=back, reason=reason)))
        self._put("http-response", xid, response.status_code, response.reason_phrase, response.headers)
        if given is not None:
            self._put("http-gave", xid, f"the tap gave the host resource {given}")
        writer.write(conn.send(h11.Data(data=body)))
        self._put("http-chunk", xid, sent)
        writer.write(conn.send(h11.EndOfMessage()))
        self._put("http-end", xid, None, False)
        await writer.drain()
        return True

    def _location(self, value: bytes) -> bytes:
        """A redirect to the server's own origin goes to the tap's instead (to another: as it is)."""
        url = value.decode("latin-1")
        if "://" not in url or _origin_key(url) != _origin_key(self.upstream):
            return value
        parts = urlsplit(url)
        return (self.tap_origin + parts.path + (f"?{parts.query}" if parts.query else "")).encode("latin-1")


def _json_body(body: bytes, encoding: str) -> Any:
    """A JSON body as sent (identity, gzip or deflate), or ``None`` when it cannot be read."""
    encoding = encoding.strip().lower()
    try:
        if encoding in ("gzip", "x-gzip", "deflate"):
            body = zlib.decompressobj(47 if "gzip" in encoding else 15).decompress(body, _METADATA_BYTES)
        elif encoding not in ("", "identity"):
            return None
        return json.loads(body)
    except (zlib.error, ValueError, RecursionError):
        return None


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> Any:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await reader.read(_READ))


async def _read_body(conn: h11.Connection, reader: asyncio.StreamReader) -> bytes | None:
    """The request's whole body, or ``None`` past ``MAX_REQUEST_BYTES``."""
    parts: list[bytes] = []
    size = 0
    while True:
        event = await _next_event(conn, reader)
        if isinstance(event, h11.Data):
            size += len(event.data)
            if size > MAX_REQUEST_BYTES:
                return None
            parts.append(bytes(event.data))
        elif isinstance(event, h11.EndOfMessage):
            return b"".join(parts)
        else:
            raise OSError("the host closed the connection mid-request")


async def _watch(conn: h11.Connection, reader: asyncio.StreamReader) -> None:
    """Return when the host closes its side; what it sends meanwhile (a next request) waits in h11."""
    while data := await reader.read(_READ):
        conn.receive_data(data)


async def _answered(
    conn: h11.Connection,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    headers: list[tuple[bytes, bytes]],
    verdict: Verdict,
    legacy: _LegacyStream | None = None,
) -> bool:
    """A POST the tap kept from the server: answered by the tap itself, or dropped.

    The tap's JSON-RPC answer is a 200 ``application/json`` body, which every Streamable HTTP client
    reads (it must accept both forms), unless the host's ``Accept`` names only ``text/event-stream``.
    Under legacy SSE (a POST to a stream's endpoint) the answer is an event on that stream, and the POST
    gets the ``202`` a legacy server gives, dropped or not.
    A dropped notification gets the 202 the server would have given; a dropped request an SSE stream
    that never carries its answer (a plain wait, when the host takes no stream), until the host's own
    deadline makes it leave.
    """
    accept = b", ".join(v for n, v in headers if n.lower() == b"accept").lower()
    stream = b"text/event-stream" in accept
    if legacy is not None and not legacy.closed:
        if verdict.action == "answer":
            legacy.send(b"event: message\ndata: " + verdict.body + b"\n\n")
        # Taken, as a legacy server takes every message: a dropped request's answer never comes.
        head = [(b"Content-Length", b"0")]
        writer.write(conn.send(h11.Response(status_code=202, headers=head, reason=b"Accepted")))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        return True
    if verdict.action == "answer":
        if stream and b"application/json" not in accept:
            body, ctype = b"event: message\ndata: " + verdict.body + b"\n\n", b"text/event-stream"
        else:
            body, ctype = verdict.body, b"application/json"
        head = [(b"Content-Type", ctype), (b"Content-Length", str(len(body)).encode())]
        writer.write(conn.send(h11.Response(status_code=200, headers=head, reason=b"OK")))
        writer.write(conn.send(h11.Data(data=body)))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        return True
    if verdict.kind != "request":
        head = [(b"Content-Length", b"0")]
        writer.write(conn.send(h11.Response(status_code=202, headers=head, reason=b"Accepted")))
        writer.write(conn.send(h11.EndOfMessage()))
        await writer.drain()
        return True
    if stream:
        head = [(b"Content-Type", b"text/event-stream"), (b"Cache-Control", b"no-cache")]
        writer.write(conn.send(h11.Response(status_code=200, headers=head, reason=b"OK")))
        await writer.drain()
    await _watch(conn, reader)
    return False


class _LegacyStream:
    """A legacy SSE stream to its host, into which the tap can put an event of its own, between the
    server's events (never inside one that is still passing)."""

    def __init__(self, conn: h11.Connection, writer: asyncio.StreamWriter) -> None:
        self.conn, self.writer = conn, writer
        self.tail = b"\n\n"
        self.pending: list[bytes] = []
        self.closed = False

    def at_boundary(self) -> bool:
        return self.tail.endswith((b"\n\n", b"\r\r", b"\r\n\r\n"))

    def wrote(self, data: bytes) -> None:
        """The server's bytes just written: the tap's events waiting for an event's end go after them."""
        self.tail = (self.tail + data)[-4:]
        if self.pending and self.at_boundary():
            pending, self.pending = self.pending, []
            for event in pending:
                self.send(event)

    def send(self, event: bytes) -> None:
        if not self.at_boundary():
            self.pending.append(event)
            return
        with contextlib.suppress(h11.LocalProtocolError, OSError, RuntimeError):
            self.writer.write(self.conn.send(h11.Data(data=event)))


async def _answer(conn: h11.Connection, writer: asyncio.StreamWriter, status: int, text: str) -> None:
    """The tap's own answer (no server behind it): plain text, and the connection closes."""
    body = text.encode() + b"\n"
    headers = [
        (b"Content-Type", b"text/plain; charset=utf-8"),
        (b"Content-Length", str(len(body)).encode()),
        (b"Connection", b"close"),
    ]
    reason = http.HTTPStatus(status).phrase.encode()
    writer.write(conn.send(h11.Response(status_code=status, headers=headers, reason=reason)))
    writer.write(conn.send(h11.Data(data=body)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()
