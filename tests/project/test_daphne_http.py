"""Daphne's requests leave their bodies to Django (inspector/daphne_http.py); each test fails if daphne
or Twisted change what that relies on (tests/test_recordings.py times a big upload through it)."""

from __future__ import annotations

import inspect
import sys
from typing import Any

import pytest
from daphne import http_protocol
from twisted.internet.testing import StringTransport
from twisted.web import http

from inspector import daphne_http


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
