"""A reply too large to take in: which request it answers, read from the bytes kept of it.

A message over ``max_message_bytes`` is recorded as its head and the rest skipped, unparsed. When
the head shows a response (a ``result`` or ``error`` member at the top level), the request it answers
fails at once, rather than waiting for its time-out. Its ``id`` is in the head when the server writes
it first (``{"jsonrpc", "id", "result"}``, as the Python SDK does), or at the very end when it writes
it last (``{"result", "jsonrpc", "id"}``, as the TypeScript SDK does); a stdio line is skipped to its
end anyway, so its last bytes are kept for that.

Only the kept bytes are read, at most a few KiB each, with the standard library's JSON scanner: a
value cut off by the head ends the reading, and anything that is not plainly a response is left alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ._errors import MessageTooLarge
from ._frames import HEAD_BYTES, Frame
from ._transport import FrameSink

__all__ = ["OversizedLine", "fail_reply", "reply_id_at_end", "reply_in_head", "tail_of", "too_large_error"]

TAIL_BYTES = HEAD_BYTES
"""How much of the end of an over-size line is kept, to find an ``id`` written last."""

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\r\n"
_ANSWERS = ("result", "error")
_TRIES = 8
"""How many ``"id"`` candidates, from the end, ``reply_id_at_end`` tries."""


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def _request_id(value: object) -> int | str | None:
    """A JSON-RPC id the client could have sent (a number without a fraction, or a string)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def reply_in_head(head: bytes) -> tuple[bool, int | str | None]:
    """Whether ``head``, the first bytes of a message, shows a response, and its id if the head holds it."""
    text = head.decode("utf-8", errors="replace")
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        return False, None  # a batch, or not JSON: left alone
    answered, asks, found = False, False, None
    at += 1
    try:
        while True:
            at = _skip(text, at)
            if text[at : at + 1] != '"':
                break
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            if text[at : at + 1] != ":":
                break
            answered = answered or key in _ANSWERS
            asks = asks or key == "method"
            value, at = _DECODER.raw_decode(text, _skip(text, at + 1))
            if key == "id":
                found = _request_id(value)
            at = _skip(text, at)
            if text[at : at + 1] != ",":
                break
            at += 1
    except (ValueError, RecursionError):
        pass  # a value the head cuts off (the big one): what came before it is all there is
    if not answered or asks:
        return False, None
    return True, found


def reply_id_at_end(tail: bytes) -> int | str | None:
    """The ``id`` among the last top-level members of a JSON object whose last bytes are ``tail``."""
    text = tail.decode("utf-8", errors="replace").rstrip(_WHITESPACE)
    if not text.endswith("}"):
        return None
    end = len(text)
    for _ in range(_TRIES):
        end = text.rfind('"id"', 0, end)
        if end < 0:
            return None
        before = text[:end].rstrip(_WHITESPACE)
        if before.endswith((",", "{")):
            found = _id_member(text, end)
            if found is not None:
                return found
    return None


def _id_member(text: str, at: int) -> int | str | None:
    """The id whose member starts at ``at``, if the members from there on end the object and the text."""
    try:
        at = _skip(text, at + len('"id"'))
        if text[at : at + 1] != ":":
            return None
        value, at = _DECODER.raw_decode(text, _skip(text, at + 1))
        while True:
            at = _skip(text, at)
            if text[at : at + 1] == "}":
                return _request_id(value) if at == len(text) - 1 else None
            if text[at : at + 1] != ",":
                return None
            at = _skip(text, at + 1)
            if text[at : at + 1] != '"':
                return None
            _, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            if text[at : at + 1] != ":":
                return None
            _, at = _DECODER.raw_decode(text, _skip(text, at + 1))
    except (ValueError, RecursionError):
        return None


def _size(count: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            return f"{count / (1 << shift):.4g} {unit}"
    return f"{count} bytes"


def too_large_error(sink: FrameSink, frame: Frame | None) -> MessageTooLarge:
    """The error a request fails with when its reply is over the limit, naming it and how to raise it."""
    limit = sink.options.max_message_bytes
    return MessageTooLarge(
        f"the reply is larger than {limit} bytes ({_size(limit)}), the largest message this client "
        f"takes in; raise the limit with {sink.options.max_message_bytes_name}",
        frame=frame,
    )


def fail_reply(sink: FrameSink, frame: Frame, head: bytes, among: Sequence[int | str] = ()) -> bool:
    """Fail the request an over-size message answers, if its head shows a reply; say whether it does
    and its id was not in the head (the caller may find it at the end).

    ``among``: the requests a POST carried; a reply on that POST's stream whose id the head does not
    show answers the one among them still waiting, if only one is.
    """
    answered, request_id = reply_in_head(head)
    if not answered:
        return False
    if request_id is None:
        waiting = [i for i in among if sink.is_pending(i)]
        if len(waiting) != 1:
            return True
        request_id = waiting[0]
    if sink.is_pending(request_id):
        sink.requests_failed([request_id], too_large_error(sink, frame))
    return False


def tail_of(parts: Sequence[bytes]) -> bytes:
    """The last ``TAIL_BYTES`` of the concatenated ``parts``, without joining them all."""
    kept: list[bytes] = []
    size = 0
    for part in reversed(parts):
        kept.append(part[-(TAIL_BYTES - size) :])
        size += len(kept[-1])
        if size >= TAIL_BYTES:
            break
    return b"".join(reversed(kept))


class OversizedLine:
    """A stdio line over the limit, being skipped: the end of it is kept while its id is still sought."""

    def __init__(self, sink: FrameSink, frame: Frame, head: bytes, last: bytes) -> None:
        self.sink = sink
        self.frame = frame
        self.seeking = fail_reply(sink, frame, head)
        self.tail = last[-TAIL_BYTES:] if self.seeking else b""
        """The line's last bytes so far (``last``: what came of it before it was found too long)."""

    def more(self, data: bytes) -> None:
        """The next bytes of the line (not its newline)."""
        if self.seeking:
            self.tail = (self.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]

    def end(self) -> None:
        """The line ended: fail the request whose id its last bytes hold."""
        if not self.seeking:
            return
        self.seeking = False
        request_id = reply_id_at_end(self.tail)
        if request_id is not None and self.sink.is_pending(request_id):
            self.sink.requests_failed([request_id], too_large_error(self.sink, self.frame))
