"""Request bodies under daphne go to Django whole and untouched, whatever their size.

Twisted's HTTP request parses a multipart or form POST body itself, into ``request.args``, which
daphne never reads: it reads the whole body into memory and parses it on the event loop. A 200 MB
recording took 2 GB and stalled every page for 15 s before Django saw a byte. Django's own parser
streams the body to a temporary file instead, so Twisted's is switched off.
"""

from __future__ import annotations

from typing import Any

__all__ = ["leave_bodies_to_django"]


def leave_bodies_to_django() -> None:
    """Make daphne's requests skip Twisted's form parsing (once per process)."""
    from daphne.http_protocol import WebRequest

    if getattr(WebRequest, "leaves_bodies_to_django", False):
        return
    received = WebRequest.requestReceived

    def request_received(self: Any, command: bytes, path: bytes, version: bytes) -> None:
        # Twisted reads this flag (``parsePOSTFormSubmission``, default on) when the body is in.
        self._parsePOSTFormSubmission = False
        received(self, command, path, version)

    WebRequest.requestReceived = request_received
    WebRequest.leaves_bodies_to_django = True
