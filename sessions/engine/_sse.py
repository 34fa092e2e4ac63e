"""An incremental decoder for Server-Sent Events, fed raw bytes as they arrive.

It is linear in what it is fed (each chunk is scanned once; a line's pieces are joined once, when it
ends) and bounded: a line or an event's data beyond ``limit`` bytes is not kept. The decoder then
emits the event at once, with only the head of its data and ``oversized`` set, and skips the rest of
it up to the blank line that ends it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._frames import HEAD_BYTES, head_of

__all__ = ["SseDecoder", "SseEvent"]

DEFAULT_LIMIT = 16 * 1024 * 1024


@dataclass(slots=True)
class SseEvent:
    """One dispatched SSE event; ``data`` keeps the exact bytes of its data lines."""

    event: str
    data: bytes
    id: str | None
    retry: int | None
    oversized: bool = False
    """The event was larger than the decoder's limit: ``data`` is its head, the rest was skipped."""


class SseDecoder:
    """Turn a byte stream into SSE events, per the WHATWG event-stream rules."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self.last_event_id: str | None = None
        """The last ``id`` seen: what a reconnection sends as ``Last-Event-ID``."""
        self.retry: int | None = None
        """The last ``retry`` (milliseconds) seen: how long to wait before reconnecting."""
        self.restart()

    def restart(self) -> None:
        """Forget the partial line and event of a stream that ended; keep ``last_event_id`` and ``retry``."""
        self._pieces: list[bytes] = []  # the line being received, not yet terminated
        self._size = 0
        self._skipping = False  # the line went over the limit: drop it up to its end
        self._after_cr = False  # the last chunk ended in CR: a leading LF belongs to it
        self._data: list[bytes] = []
        self._data_size = 0
        self._oversized = False  # the event went over the limit (and was emitted): skip the rest
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._has_field = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        events: list[SseEvent] = []
        start, size = 0, len(chunk)
        if self._after_cr:
            self._after_cr = False
            start = 1 if chunk[:1] == b"\n" else 0
        # Lines end in CRLF, LF or CR. Each search runs once per terminator, never over the whole chunk again.
        lf, cr = chunk.find(b"\n", start), chunk.find(b"\r", start)
        while True:
            if 0 <= lf < start:
                lf = chunk.find(b"\n", start)
            if 0 <= cr < start:
                cr = chunk.find(b"\r", start)
            if lf < 0 and cr < 0:
                self._grow(chunk[start:] if start else chunk, events)
                return events
            if cr >= 0 and (lf < 0 or cr < lf):
                end = cr
                if cr + 1 == size:
                    self._after_cr, after = True, size
                else:
                    after = cr + 2 if chunk[cr + 1] == 0x0A else cr + 1
            else:
                end, after = lf, lf + 1
            event = self._end_line(chunk[start:end])
            if event is not None:
                events.append(event)
            start = after

    def _grow(self, piece: bytes, events: list[SseEvent]) -> None:
        """Keep a piece of an unterminated line, unless the line is already too long."""
        if self._skipping or not piece:
            return
        self._pieces.append(piece)
        self._size += len(piece)
        if self._size > self.limit:
            event = self._too_long(head_of(self._pieces, HEAD_BYTES + 8))  # room for "data: "
            if event is not None:
                events.append(event)
            self._pieces, self._size, self._skipping = [], 0, True

    def _end_line(self, last: bytes) -> SseEvent | None:
        if self._skipping:
            self._skipping = False
            return None
        line = b"".join((*self._pieces, last)) if self._pieces else last
        self._pieces, self._size = [], 0
        if len(line) > self.limit:
            return self._too_long(line[: HEAD_BYTES + 8])
        return self._line(line)

    def _too_long(self, head: bytes) -> SseEvent | None:
        """A line over the limit: the event it belongs to is emitted now, with what is kept of its data."""
        if head.startswith(b":"):
            return None  # a comment: ignored whatever its length
        name, _, value = head.partition(b":")
        return self._overflow(value.removeprefix(b" ") if name == b"data" else None)

    def _overflow(self, extra: bytes | None) -> SseEvent | None:
        if self._oversized:
            return None
        self._oversized = True
        parts = [*self._data, extra] if extra is not None else self._data
        data = b"\n".join(parts)[:HEAD_BYTES]
        self._data, self._data_size = [], 0
        return SseEvent(self._event or "message", data, self._id, self._retry, oversized=True)

    def _line(self, line: bytes) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(b":"):
            return None
        name, sep, value = line.partition(b":")
        if sep and value.startswith(b" "):
            value = value[1:]
        self._has_field = True
        if name == b"data":
            if self._oversized:
                return None
            self._data.append(value)
            self._data_size += len(value) + 1
            if self._data_size > self.limit:
                return self._overflow(None)
        elif name == b"event":
            self._event = value.decode("utf-8", errors="replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", errors="replace")
                self.last_event_id = self._id
        elif name == b"retry" and value.isdigit():
            self._retry = self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        event = None
        if self._has_field and not self._oversized:
            event = SseEvent(self._event or "message", b"\n".join(self._data), self._id, self._retry)
        self._data, self._data_size, self._oversized = [], 0, False
        self._event, self._id, self._retry, self._has_field = "", None, None, False
        return event
