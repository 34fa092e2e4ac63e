"""An incremental decoder for Server-Sent Events, fed raw bytes as they arrive."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SseDecoder", "SseEvent"]


@dataclass(slots=True)
class SseEvent:
    """One dispatched SSE event; ``data`` keeps the exact bytes of its data lines."""

    event: str
    data: bytes
    id: str | None
    retry: int | None


class SseDecoder:
    """Turn a byte stream into SSE events, per the WHATWG event-stream rules."""

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._has_field = False
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        self._buffer += chunk
        events: list[SseEvent] = []
        while True:
            # Lines end in CRLF, LF or CR; find the earliest terminator.
            lf = self._buffer.find(b"\n")
            cr = self._buffer.find(b"\r")
            if lf < 0 and cr < 0:
                break
            if cr >= 0 and (lf < 0 or cr < lf):
                if cr + 1 == len(self._buffer):
                    break  # a CR at the end may be the first half of CRLF
                end, skip = cr, 2 if self._buffer[cr + 1 : cr + 2] == b"\n" else 1
            else:
                end, skip = lf, 1
            line = self._buffer[:end]
            self._buffer = self._buffer[end + skip :]
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

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
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", errors="replace")
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", errors="replace")
                self.last_event_id = self._id
        elif name == b"retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        if not self._has_field:
            return None
        event = SseEvent(self._event or "message", b"\n".join(self._data), self._id, self._retry)
        self._data, self._event, self._id, self._retry, self._has_field = [], "", None, None, False
        return event
