"""Daphne's HTTP server as the app runs it: request bodies bounded in size, and in memory.

Three things daphne's request does not do, done in its subclass here:

- **Forms left to Django.** Twisted's HTTP request parses a multipart or form POST body itself, into
  ``request.args`` (which daphne never reads), reading the whole body into memory and parsing it on the
  event loop; Twisted's ``Request`` has a switch for that (``parsePOSTFormSubmission``), which daphne
  does not set. Django's own parser streams the body to a temporary file instead.
- **A body over the limit refused before it is read**: by its declared ``Content-Length`` as soon as
  the headers are in (no ``100 Continue``), or, chunked, as soon as what came passes the limit. The
  answer is a 413 with ``Connection: close``; what the client still sends is read and dropped for a
  few seconds, so that a client busy sending sees the answer rather than a reset connection.
- **A body handed to the application a piece at a time.** Twisted keeps a body on disk (over 100 kB,
  or chunked) until it is all in; daphne then queues it to the application whole, every chunk at
  once, in memory. Here a big body goes to the application through ``receive_for``, which reads the
  next piece from the file each time the application asks.

The one thing patched is daphne's factory class, where its server looks it up
(``daphne.server.HTTPFactory``); tests/project/test_daphne_http.py fails if daphne or Twisted change
what this relies on.
"""

from __future__ import annotations

import contextvars
import io
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import IO, Any

from daphne import http_protocol

__all__ = ["HTTPFactory", "WebRequest", "leave_bodies_to_django", "receive_for"]

logger = logging.getLogger("inspector.security")

PIECE = 1 << 16
"""How much of a body the application gets per ``http.request`` message (Twisted reads as much at once)."""
LINGER = 5.0
"""Seconds a refused connection still reads (and drops) what its client sends, before it is closed."""

# The body of the request whose application daphne is creating: asyncio copies the context into the
# application's task when it is made, inside ``WebRequest.process``, and ``receive_for`` reads it there.
_body: contextvars.ContextVar[IO[bytes] | None] = contextvars.ContextVar("request_body", default=None)


def body_limit() -> int:
    """The largest body any view takes (``inspector.middleware``, which also guards other servers)."""
    from inspector import middleware

    return middleware.body_limit()


def body_too_large() -> bytes:
    """What a request refused for its body is told, as the middleware tells it."""
    from inspector import middleware

    return middleware.body_too_large().encode() + b"\n"


class WebRequest(http_protocol.WebRequest):  # type: ignore[misc]
    """Daphne's request, made with Twisted's form parsing off, its body bounded and handed over in pieces."""

    content: IO[bytes]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.refused = False
        self._received = 0
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)

    def gotLength(self, length: int | None) -> None:
        if length is not None and length > body_limit():
            # Before Twisted answers "Expect: 100-continue": the client need not send a byte of it.
            self.requestHeaders.removeHeader(b"Expect")
            self._refuse(f"{length} bytes declared")
            length = 0
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return
        self._received += len(data)
        if self._received > body_limit():
            self._refuse(f"{self._received} bytes sent so far")
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
        if not self.refused:
            super().requestReceived(command, path, version)

    def process(self) -> Any:
        body = self.content
        size = body.seek(0, io.SEEK_END)
        body.seek(0)
        if size <= PIECE:
            return super().process()  # one message: daphne queues it as it is
        # Daphne would queue the whole file now; it queues an empty last piece instead, after which
        # receive_for's pieces come first.
        self.content = io.BytesIO()
        token = _body.set(body)
        try:
            return super().process()
        finally:
            _body.reset(token)

    def _refuse(self, detail: str) -> None:
        """Answer 413 at once, whatever stage the body is at, and close the connection after a grace."""
        self.refused = True
        channel = self.channel
        limit, text = body_limit(), body_too_large()
        head = (
            b"HTTP/1.1 413 Content Too Large\r\n"
            b"Content-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % len(text)
        )
        # The request line is the channel's until the body is in; it is only for the log line.
        method = _printable(getattr(channel, "_command", b"?"))
        path = _printable(getattr(channel, "_path", b"?").split(b"?", 1)[0])
        peer = channel.transport.getPeer()
        client = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        logger.warning("Refused %s %s: a body over %d bytes (%s) [%s]", method, path, limit, detail, client)
        # Everything the client sends from now on is dropped, the rest of this body included.
        channel.dataReceived = _drop
        channel.rawDataReceived = _drop
        transport = channel.transport
        transport.write(head + text)
        half_close = getattr(transport, "loseWriteConnection", None)
        if half_close is not None:
            half_close()
        closing = channel.callLater(LINGER, channel.loseConnection)
        self.notifyFinish().addBoth(lambda _: closing.cancel() if closing.active() else None)


def _printable(text: bytes) -> str:
    """Bytes a client sent, for a log line: control characters escaped, as Django logs paths."""
    return text.decode("latin-1").encode("unicode_escape").decode("ascii")


def _drop(data: bytes) -> None:
    """What a refused connection does with what its client still sends."""


class HTTPFactory(http_protocol.HTTPFactory):  # type: ignore[misc]
    """Daphne's HTTP factory, its connections making ``WebRequest``s."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = WebRequest
        return protocol


Receive = Callable[[], Awaitable[dict[str, Any]]]


def receive_for(scope: dict[str, Any], receive: Receive) -> Receive:
    """The ``receive`` an application gets: the request's body from its file, a piece per call, when
    ``WebRequest`` kept it back from daphne's queue; then daphne's own messages."""
    body = _body.get()
    if body is None or scope.get("type") != "http":
        return receive
    pending: list[IO[bytes]] = [body]

    async def receive_body() -> dict[str, Any]:
        if pending:
            piece = pending[0].read(PIECE)
            if piece:
                return {"type": "http.request", "body": piece, "more_body": True}
            pending.pop().close()
        return await receive()

    return receive_body


def leave_bodies_to_django() -> None:
    """Make daphne's server use ``HTTPFactory``, where it serves the app (``mcp-inspector``, ``daphne
    inspector.asgi:application``, ``runserver``: each imports ``daphne.server`` before the app)."""
    # Not imported here: importing it installs Twisted's reactor, which another server has no use for.
    server: Any = sys.modules.get("daphne.server")
    if server is not None:
        server.HTTPFactory = HTTPFactory
