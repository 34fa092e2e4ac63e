"""Daphne's HTTP server as the app runs it: request bodies go to Django untouched, whatever their size.

Twisted's HTTP request parses a multipart or form POST body itself, into ``request.args`` (which
daphne never reads), reading the whole body into memory and parsing it on the event loop; Twisted's
``Request`` has a switch for that (``parsePOSTFormSubmission``), which daphne does not set. Django's
own parser streams the body to a temporary file instead, so here every request daphne makes is
made with Twisted's parsing off. The one thing patched is daphne's factory class, where its server
looks it up (``daphne.server.HTTPFactory``); tests/project/test_daphne_http.py fails if daphne or Twisted
change what this relies on.
"""

from __future__ import annotations

import sys
from typing import Any

from daphne import http_protocol

__all__ = ["HTTPFactory", "WebRequest", "leave_bodies_to_django"]


class WebRequest(http_protocol.WebRequest):  # type: ignore[misc]
    """Daphne's request, made with Twisted's form parsing off."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, parsePOSTFormSubmission=False, **kwargs)


class HTTPFactory(http_protocol.HTTPFactory):  # type: ignore[misc]
    """Daphne's HTTP factory, its connections making ``WebRequest``s."""

    def buildProtocol(self, addr: Any) -> Any:
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = WebRequest
        return protocol


def leave_bodies_to_django() -> None:
    """Make daphne's server use ``HTTPFactory``, where it serves the app (``mcp-inspector``, ``daphne
    inspector.asgi:application``, ``runserver``: each imports ``daphne.server`` before the app)."""
    # Not imported here: importing it installs Twisted's reactor, which another server has no use for.
    server: Any = sys.modules.get("daphne.server")
    if server is not None:
        server.HTTPFactory = HTTPFactory
