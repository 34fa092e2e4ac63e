"""The HTTP tap's side towards the server: HTTP/1.1 with h11 over asyncio streams, connections kept alive.

The listening side already speaks h11; speaking it towards the server too keeps one HTTP machine on the
forwarding path, where a general client's layers (auth, redirects, cookies, its request and URL models,
its pool's locks) cost more per request than the rest of the tap. What a reverse proxy needs is small:
send a request as given, read the head, pass the body on raw (still compressed, chunked framing undone),
and reuse a connection whose exchange ended cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import h11

__all__ = ["Reply", "Upstream", "UpstreamError"]

_READ = 1 << 16
CONNECT_TIMEOUT = 10.0
WRITE_TIMEOUT = 60.0
"""No read timeout: SSE streams idle for minutes, and the host times its own requests."""


class UpstreamError(Exception):
    """The server could not be reached, or broke off mid-exchange."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(h11.CLIENT)

    def reusable(self) -> bool:
        """Idle and not closed by the server meanwhile (an idle connection has nothing to read)."""
        return not self.writer.transport.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):
            self.writer.transport.abort()

    async def next_event(self) -> object:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.h11.receive_data(await self.reader.read(_READ))


class Reply:
    """A server's response: its head, and its body read on demand a chunk at a time."""

    def __init__(self, upstream: Upstream, conn: _Connection, head: h11.Response, target: str) -> None:
        self._upstream, self._conn = upstream, conn
        self.status_code = head.status_code
        self.reason_phrase = head.reason.decode("latin-1")
        self.headers: list[tuple[bytes, bytes]] = list(head.headers.raw_items())
        """As the server sent them, names in their own case, in order."""
        self.target = target
        self.path = urlsplit(target).path
        self._done = False

    def header(self, name: str, default: str = "") -> str:
        """The first header of that name (case-insensitive), as text."""
        key = name.lower().encode("latin-1")
        return next((v.decode("latin-1") for n, v in self.headers if n.lower() == key), default)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; raises ``UpstreamError`` when the server breaks off."""
        conn = self._conn
        while True:
            try:
                event = await conn.next_event()
            except (h11.RemoteProtocolError, OSError) as exc:
                raise UpstreamError(str(exc) or type(exc).__name__) from exc
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._done = True
                return
            else:
                raise UpstreamError("the server closed the connection")

    async def aclose(self) -> None:
        """The connection goes back for the next request when its exchange ended cleanly, else closes."""
        conn, self._conn = self._conn, None  # type: ignore[assignment]
        if conn is None:
            return
        clean = self._done and conn.h11.our_state is h11.DONE and conn.h11.their_state is h11.DONE
        if clean:
            try:
                conn.h11.start_next_cycle()
            except h11.LocalProtocolError:
                clean = False
        if clean:
            self._upstream.idle.append(conn)
        else:
            conn.close()


class Upstream:
    """Connections to one origin (``http`` or ``https``), each used by one exchange at a time."""

    def __init__(self, origin: str) -> None:
        parts = urlsplit(origin)
        self.https = parts.scheme.lower() == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.netloc = parts.netloc.rpartition("@")[2].encode("idna" if parts.netloc.isascii() else "utf-8")
        # Verified against the system's authorities (and SSL_CERT_FILE / SSL_CERT_DIR, as OpenSSL reads them).
        self.tls = ssl.create_default_context() if self.https else None
        self.idle: list[_Connection] = []

    async def _connection(self) -> _Connection:
        while self.idle:
            conn = self.idle.pop()
            if conn.reusable():
                return conn
            conn.close()
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host, self.port, ssl=self.tls, server_hostname=self.host if self.tls else None
                ),
                CONNECT_TIMEOUT,
            )
        except TimeoutError as exc:
            raise UpstreamError(f"no connection within {CONNECT_TIMEOUT:g} s") from exc
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamError(str(exc) or type(exc).__name__) from exc
        return _Connection(reader, writer)

    async def send(
        self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes | None
    ) -> Reply:
        """Send the request (``body`` ``None``: no body and no framing) and read the response's head."""
        conn = await self._connection()
        head = [(b"Host", self.netloc), *headers]
        if body is not None:
            head.append((b"Content-Length", str(len(body)).encode()))
        try:
            out = conn.h11.send(h11.Request(method=method, target=target, headers=head))
            if body:
                out += conn.h11.send(h11.Data(data=body))
            out += conn.h11.send(h11.EndOfMessage())
            conn.writer.write(out)
            await asyncio.wait_for(conn.writer.drain(), WRITE_TIMEOUT)
            while True:
                event = await conn.next_event()
                if isinstance(event, h11.Response):
                    return Reply(self, conn, event, target)
                if not isinstance(event, h11.InformationalResponse):
                    raise UpstreamError("the server closed the connection before answering")
        except (h11.ProtocolError, OSError, TimeoutError) as exc:
            conn.close()
            raise UpstreamError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            conn.close()
            raise

    async def aclose(self) -> None:
        for conn in self.idle:
            conn.close()
        self.idle.clear()
