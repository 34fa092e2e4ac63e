"""The HTTP tap's client towards the server (inspector/tap/_upstream.py) against an in-process asyncio
server that answers as told: keep-alive reuse, a connection the server closed while idle, chunked and
compressed bodies passed raw, a body broken off, a server that cannot be reached."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from inspector.tap._upstream import Upstream, UpstreamError

Answer = Callable[[int], bytes]


class Server:
    """Each request read (head and Content-Length body) and answered with ``answer(n)``; after it, the
    connection closes when ``close_after`` says so."""

    def __init__(self, answer: Answer, close_after: Callable[[int], bool] = lambda n: False) -> None:
        self.answer, self.close_after = answer, close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                lines = head.lower().split(b"\r\n")
                length = next((int(v.split(b":")[1]) for v in lines if v.startswith(b"content-length")), 0)
                self.requests.append(head + await reader.readexactly(length))
                n = len(self.requests)
                writer.write(self.answer(n))
                await writer.drain()
                if self.close_after(n):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()
        self.closed.set()


async def started(server: Server) -> tuple[asyncio.Server, str]:
    listening = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    return listening, f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"


def ok(body: bytes) -> Answer:
    return lambda n: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


async def read_all(chunks: AsyncIterator[bytes]) -> bytes:
    return b"".join([chunk async for chunk in chunks])


async def test_a_connection_is_reused_and_one_the_server_closed_while_idle_is_not() -> None:
    server = Server(ok(b"hello"), close_after=lambda n: n == 2)
    listening, origin = await started(server)
    upstream = Upstream(origin)
    try:
        for _ in range(2):
            reply = await upstream.send("POST", "/mcp", [(b"X-Kept", b"Yes")], b"{}")
            assert reply.status_code == 200 and await read_all(reply.chunks()) == b"hello"
            await reply.aclose()
        assert server.connections == 1
        await asyncio.wait_for(server.closed.wait(), 5)
        assert await asyncio.wait_for(upstream.idle[0].reader.read(1), 5) == b""  # its FIN, read
        assert not upstream.idle[0].reusable()
        reply = await upstream.send("GET", "/mcp?x=1", [], None)
        assert await read_all(reply.chunks()) == b"hello"
        await reply.aclose()
        assert server.connections == 2
        first, _, last = server.requests
        assert first.startswith(b"POST /mcp HTTP/1.1\r\n")
        assert b"\r\nX-Kept: Yes\r\n" in first and b"\r\nContent-Length: 2\r\n" in first
        assert last.startswith(b"GET /mcp?x=1 HTTP/1.1\r\n") and b"content-length" not in last.lower()
    finally:
        await upstream.aclose()
        listening.close()


async def test_a_chunked_gzip_body_passes_raw_and_its_head_as_sent() -> None:
    raw = b"\x1f\x8b compressed bytes"
    chunked = (
        b"HTTP/1.1 201 Made\r\nContent-Encoding: gzip\r\nX-Case: AbC\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunked += b"%x\r\n%s\r\n0\r\n\r\n" % (len(raw), raw)
    listening, origin = await started(Server(lambda n: chunked))
    upstream = Upstream(origin)
    try:
        reply = await upstream.send("POST", "/", [], b"")
        assert (reply.status_code, reply.reason_phrase) == (201, "Made")
        assert (b"X-Case", b"AbC") in reply.headers and reply.header("content-encoding") == "gzip"
        assert await read_all(reply.chunks()) == raw
        await reply.aclose()
    finally:
        await upstream.aclose()
        listening.close()


async def test_a_body_broken_off_and_an_unreachable_server_raise_upstream_errors() -> None:
    cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this"
    listening, origin = await started(Server(lambda n: cut, close_after=lambda n: True))
    upstream = Upstream(origin)
    try:
        reply = await upstream.send("POST", "/", [], b"{}")
        with pytest.raises(UpstreamError):
            await read_all(reply.chunks())
        await reply.aclose()
        assert upstream.idle == []
    finally:
        await upstream.aclose()
        listening.close()
    await listening.wait_closed()
    with pytest.raises(UpstreamError):
        await Upstream(origin).send("POST", "/", [], b"{}")
