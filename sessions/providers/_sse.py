"""Server-sent events, as both APIs stream them: ``event:`` and ``data:`` lines, a blank line ends one."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Event:
    event: str
    data: str


class SseParser:
    """Feed lines (without their line ends); each blank line gives the event it ends, if any."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> Event | None:
        if not line:
            return self.flush()
        if line.startswith(":"):  # a comment: servers send them to keep the connection open
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None

    def flush(self) -> Event | None:
        """The event being read, if it has data (a stream that ends without its blank line)."""
        event = Event(self._event or "message", "\n".join(self._data)) if self._data else None
        self._event, self._data = "", []
        return event


def parse(text: str) -> list[Event]:
    """Every event of a whole stream's text."""
    parser = SseParser()
    events = [e for line in text.splitlines() if (e := parser.feed(line)) is not None]
    last = parser.flush()
    return [*events, last] if last is not None else events
