"""Daphne's requests leave their bodies to Django, refuse one over the limit unread and hand a big one
over a piece at a time (inspector/daphne_http.py); each test fails if daphne or Twisted change what
that relies on. The requests below go through Twisted's real HTTP channel and daphne's real server
object, on an in-memory transport (tests/timeline/test_recordings.py and tests/project/test_upload_limits.py
send real uploads through a running app)."""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from daphne import http_protocol
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionDone
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.web import http

from inspector import daphne_http, middleware


def test_twisted_s_request_still_takes_the_switch_for_its_form_parsing() -> None:
    parameter = inspect.signature(http.Request.__init__).parameters["parsePOSTFormSubmission"]
    assert parameter.default is True
    assert "self._parsePOSTFormSubmission" in inspect.getsource(http.Request.requestReceived)


def test_daphne_s_server_finds_its_factory_by_the_module_s_name_and_its_requests_take_arguments() -> None:
    from daphne import server

    assert "HTTPFactory" in server.Server.run.__code__.co_names
    build = inspect.getsource(http_protocol.HTTPFactory.buildProtocol)
    assert "protocol.requestFactory = WebRequest" in build
    assert "**kwargs" in inspect.getsource(http_protocol.WebRequest.__init__)


def test_the_server_daphne_runs_makes_requests_that_leave_forms_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from daphne import server

    monkeypatch.setattr(server, "HTTPFactory", server.HTTPFactory)  # put back after the test
    daphne_http.leave_bodies_to_django()
    assert server.HTTPFactory is daphne_http.HTTPFactory
    seen: list[Any] = []
    fake_server = type("Server", (), {"protocol_connected": lambda self, request: seen.append(request)})()
    protocol = server.HTTPFactory(fake_server).buildProtocol(None)
    assert protocol.requestFactory is daphne_http.WebRequest

    class Channel:  # what a request asks of the connection it came on
        factory = type("Factory", (), {"server": fake_server})()
        transport = StringTransport()

        def getPeer(self) -> Any:
            return self.transport.getPeer()

        def getHost(self) -> Any:
            return self.transport.getHost()

    request = protocol.requestFactory(Channel(), queued=False)
    assert seen == [request] and request._parsePOSTFormSubmission is False


def test_another_server_is_left_without_twisted_s_reactor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "daphne.server", raising=False)
    daphne_http.leave_bodies_to_django()
    assert "daphne.server" not in sys.modules


# --- a body over the limit; a big one within it ----------------------------------------------------------

LIMIT = 100_000
PEER = IPv4Address("TCP", "127.0.0.1", 40000)


@dataclass
class Connection:
    """One client connection to daphne's server (never run: no listening, no reactor), through the
    factory the app uses, on an in-memory transport and a clock of its own."""

    server: Any
    protocol: Any
    transport: StringTransport
    clock: Clock
    seen: list[dict[str, Any]] = field(default_factory=list)

    def send(self, data: bytes) -> None:
        self.protocol.dataReceived(data)

    @property
    def request(self) -> Any:
        [request] = self.server.connections
        return request

    @property
    def application(self) -> Any:
        return self.server.connections[self.request].get("application_instance")


@pytest.fixture
def connection(monkeypatch: pytest.MonkeyPatch, settings: Any) -> Iterator[Connection]:
    from daphne.server import Server

    monkeypatch.setattr(middleware, "MAX_RECORDING_BYTES", LIMIT)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 0
    seen: list[dict[str, Any]] = []

    async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
        receive = daphne_http.receive_for(scope, receive)
        while True:
            message = await receive()
            seen.append(message)
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"taken"})

    server = Server(application=application, endpoints=["tcp:0"], signal_handlers=False)
    server.connections = {}
    protocol = daphne_http.HTTPFactory(server).buildProtocol(PEER)
    clock = Clock()
    protocol.callLater = clock.callLater
    transport = StringTransport(peerAddress=PEER)
    protocol.makeConnection(transport)
    yield Connection(server, protocol, transport, clock, seen)
    protocol.connectionLost(Failure(ConnectionDone()))


def head(length: int | None, *extra: bytes) -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    lines = [b"POST /recordings/open?x=1 HTTP/1.1", b"Host: testserver", framing, *extra]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def refused(connection: Connection, caplog: pytest.LogCaptureFixture) -> bytes:
    """What the client was told: a 413 that says why, the connection to close after it."""
    answer = connection.transport.value()
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 413 Content Too Large", answer[:200]
    assert b"Connection: close" in rest and b"100 Continue" not in answer
    assert rest.endswith(middleware.body_too_large().encode() + b"\n")
    [line] = [r for r in caplog.records if r.name == "inspector.security"]
    assert line.exc_info is None and "Refused POST /recordings/open:" in line.getMessage()
    assert connection.application is None  # no application ever saw the request
    return answer


def test_a_body_declared_over_the_limit_is_refused_before_a_byte_of_it_is_read(
    connection: Connection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "inspector.security")
    connection.send(head(LIMIT + 1, b"Expect: 100-continue"))
    answer = refused(connection, caplog)
    assert "100001 bytes declared" in caplog.records[0].getMessage()
    # What the client sends anyway is read and dropped, not kept; the connection closes after a grace.
    connection.send(b"x" * (LIMIT + 1))
    assert connection.transport.value() == answer and connection.request.content.getvalue() == b""
    assert not connection.transport.disconnecting
    connection.clock.advance(daphne_http.LINGER)
    assert connection.transport.disconnecting


def test_a_chunked_body_is_refused_once_it_passes_the_limit_and_the_rest_is_dropped(
    connection: Connection, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "inspector.security")
    connection.send(head(None))
    piece = b"y" * 30_000
    for _ in range(3):
        connection.send(chunk(piece))
    assert connection.transport.value() == b""  # 90,000 bytes: within the limit
    connection.send(chunk(piece))
    refused(connection, caplog)
    kept = connection.request.content.tell()
    connection.send(chunk(piece) * 10 + b"0\r\n\r\n")  # the body ends: still no application
    assert connection.request.content.tell() == kept <= LIMIT
    assert connection.application is None
    connection.clock.advance(daphne_http.LINGER)
    assert connection.transport.disconnecting


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_big_body_within_the_limit_reaches_the_application_a_piece_at_a_time(
    connection: Connection, declared: bool
) -> None:
    body = bytes(range(256)) * 390  # 99,840 bytes: on disk while it arrives, as Twisted keeps it
    if declared:
        connection.send(head(len(body)) + body)
    else:
        connection.send(head(None) + b"".join(chunk(body[i : i + 7000]) for i in range(0, len(body), 7000)))
        connection.send(b"0\r\n\r\n")
    # Daphne queued only its empty last message; the body waits in its file until asked for.
    assert connection.request.application_queue.qsize() == 1
    await connection.application
    pieces = [m["body"] for m in connection.seen]
    assert b"".join(pieces) == body and max(map(len, pieces)) <= daphne_http.PIECE < len(body)
    assert connection.seen[-1] == {"type": "http.request", "body": b"", "more_body": False}
    assert connection.transport.value().startswith(b"HTTP/1.1 200 ")
