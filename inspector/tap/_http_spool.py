"""The HTTP tap's frames: what the proxy forwarded, as the engine records its own HTTP exchanges.

The proxy (``_proxy``) queues each exchange's pieces as they pass: the request (whole), the response's
head, each chunk of its body, its end. This spool thread (the stdio tap's ``Spool``, which writes the
frames) turns them into frames in the shapes of ``sessions/engine/_streamable.py`` and
``_legacy_sse.py``: a POST's body is a ``message`` frame with ``transport["http"]`` (method, URL,
headers, masked), a GET or DELETE an ``http`` frame; a response head an ``http`` frame (with its body
when the body is no message), a JSON body a ``message`` frame, each SSE event a frame of its own. Only
requests to the MCP endpoint (the URL's path, or legacy SSE's endpoint) are judged as MCP; the rest
(OAuth metadata, tokens) are recorded as they passed.

Each host session (an ``Mcp-Session-Id`` as the server gave it, or a run of requests without one, from
an ``initialize`` to the next) is a session of its own in the inspector: the first is the tap's own
spool, each next one a ``_Part`` with its own observer (its own numbering and verdicts), its own spool
``<run>-<n>.jsonl`` and ``--record`` file, named NAME #n, so two hosts' timelines never mix.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import zlib
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from inspector.tap._spool import MAX_MESSAGE_BYTES, Spool, open_private

if TYPE_CHECKING:
    from inspector.tap._gate import Change
    from sessions.engine import Frame, LineSplitter, TapObserver
    from sessions.engine._sse import SseDecoder

__all__ = ["HttpSpool"]

_SSE = "text/event-stream"
_JSON = "application/json"
_STREAMS_KEPT = 10_000
_HELD_KEPT = 1_000
_LEGACY = "legacy "
"""Books by a legacy SSE endpoint's path and query, beside those by ``Mcp-Session-Id``."""


def joined(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Headers as one dict (a repeated name's values joined by ``, ``), their names as sent."""
    out: dict[str, str] = {}
    lower: dict[str, str] = {}
    for raw_name, raw_value in headers:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        key = name.lower()
        if key in lower:
            out[lower[key]] += ", " + value
        else:
            lower[key] = name
            out[name] = value
    return out


def _header(headers: dict[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name), "")


@dataclass
class _Exchange:
    """One request and its response, as far as they have passed."""

    method: str
    url: str
    mcp: bool
    request: Frame | None = None
    resumed: str = ""
    """The ``Last-Event-ID`` a GET resumes a stream after."""
    details: dict[str, Any] = field(default_factory=dict)
    head_time: tuple[float, float] = (0.0, 0.0)
    decoder: SseDecoder | None = None
    stream: str = ""
    parts: list[bytes] = field(default_factory=list)
    size: int = 0
    inflate: Any = None
    encoded: str = ""
    given_endpoint: str | None = None
    gave: list[str] = field(default_factory=list)
    """What the tap gave the host in place of what the server sent (``--rewrite-resource``)."""
    book: Any = None
    """The observer of the host session the exchange belongs to."""
    initialize: bool = False


@dataclass
class _Part:
    """A host session after the tap's first: a session of its own, with its own files."""

    number: int
    book: TapObserver
    spool_fd: int | None = None
    record_fd: int | None = None


class HttpSpool(Spool):
    """The stdio tap's spool, taught the HTTP tap's items (``http-*``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.upstream = self.options.url or ""
        self.mcp_paths = {urlsplit(self.upstream).path or "/"}
        self.exchanges: dict[int, _Exchange] = {}
        self.streams: dict[str, str] = {}  # an SSE event id → the stream it came on, to name a resumption
        self.tapped: dict[int, tuple[Change, dict[str, int], Frame | None]] = {}
        """A message the tap changed, by exchange, until its frame as sent is made (from the exchange's
        own items, with its HTTP details); frames wait to be written meanwhile, so both are linked."""
        self.waiting: list[Frame] = []
        self.books: dict[str, TapObserver] = {}  # by Mcp-Session-Id
        self.run_book: TapObserver | None = None
        """The books of requests without a session id, from an initialize to the next."""
        self.used: set[int] = set()
        self.begun: set[int] = set()  # books that saw an initialize
        self.listen_url = ""
        self.newest: TapObserver | None = None
        self.legacy = False  # the server spoke legacy SSE: each stream of its URL is a session
        self.sse_path = urlsplit(self.upstream).path or "/"
        self.now = (0.0, 0.0)
        """When the item being turned into frames passed the proxy."""
        self.parts: dict[int, _Part] = {}  # by its book's id; the first book is the tap's own spool's
        self.part_of: dict[int, int] = {}  # a frame's id → its book's, until the frame is written
        self.opened: list[Frame] = []  # the first frames of parts opened while making an item's frames
        self.held_books: dict[int, TapObserver] = {}
        """The book of a request the tap changed before it went upstream, by exchange."""

    def _frames(
        self,
        observer: TapObserver,
        splitters: dict[str, LineSplitter],
        what: str,
        payload: Any,
        wall: float,
        mono: float,
    ) -> list[Frame]:
        if not what.startswith("http-"):
            return super()._frames(observer, splitters, what, payload, wall, mono)
        if what == "http-start":
            self.listen_url = str(payload)
            return [self._started(observer, payload, wall, mono)]
        if what == "http-stop":
            return self._stopped(observer, str(payload), wall, mono)
        xid, rest = payload[0], payload[1:]
        self.now = (wall, mono)
        if what == "http-tap":
            book = self._held_book(observer, xid, rest)
            frames = self._tagged(book, self._tapped(book, xid, rest[0], wall, mono))
        else:
            frames = self._exchanged(observer, what, xid, rest, wall, mono)
            pending = self.tapped.get(xid)
            if pending is not None:
                self._link(xid, pending, frames, ended=what in ("http-end", "http-failed"))
        opened, self.opened = self.opened, []
        return opened + frames

    def _tagged(self, book: TapObserver, frames: list[Frame]) -> list[Frame]:
        """Note the host session ``frames`` go to (the tap's own spool's frames need no note)."""
        if id(book) in self.parts:
            for frame in frames:
                self.part_of[id(frame)] = id(book)
        return frames

    def _held_book(self, observer: TapObserver, xid: int, rest: tuple[Any, ...]) -> TapObserver:
        """The book of a message the tap changed: its exchange's, or (a request held before it went
        upstream) its session id's, kept for the request's own frames."""
        exchange = self.exchanges.get(xid)
        if exchange is not None:
            return exchange.book  # type: ignore[no-any-return]
        sid, body = (str(rest[1]), bytes(rest[2])) if len(rest) > 2 else ("", b"")
        target = str(rest[3]) if len(rest) > 3 else ""
        book = self.held_books[xid] = self._book(observer, sid, "POST", body, target)
        if len(self.held_books) > _HELD_KEPT:  # dropped or answered by the tap: no request follows
            del self.held_books[next(iter(self.held_books))]
        return book

    def _exchanged(
        self, observer: TapObserver, what: str, xid: int, rest: tuple[Any, ...], wall: float, mono: float
    ) -> list[Frame]:
        if what == "http-request":
            frames = self._request(observer, xid, *rest, wall=wall, mono=mono)
            return self._tagged(self.exchanges[xid].book, frames)
        exchange = self.exchanges.get(xid)
        if exchange is None:
            return []
        return self._tagged(exchange.book, self._of_exchange(exchange, what, xid, rest, wall, mono))

    def _of_exchange(
        self, exchange: _Exchange, what: str, xid: int, rest: tuple[Any, ...], wall: float, mono: float
    ) -> list[Frame]:
        observer = exchange.book
        if what == "http-rewrote":
            exchange.given_endpoint = rest[0]
            return []
        if what == "http-gave":
            exchange.gave.append(str(rest[0]))
            return []
        if what == "http-response":
            return self._head(observer, exchange, *rest, wall=wall, mono=mono)
        if what == "http-chunk":
            return self._chunk(observer, exchange, rest[0], wall, mono)
        if what == "http-end":
            del self.exchanges[xid]
            return self._end(observer, exchange, *rest, wall=wall, mono=mono)
        if what == "http-failed":
            del self.exchanges[xid]
            return [observer.http_failed(str(rest[0]), wall, mono)]
        return []

    def _book(
        self,
        observer: TapObserver,
        sid: str,
        method: str,
        body: bytes,
        target: str = "",
        resumed: bool = False,
    ) -> TapObserver:
        """Whose books an exchange is in: its ``Mcp-Session-Id``'s, or the run of requests without
        one (a new run from an ``initialize`` once the current run has had one). A request without
        one between runs (OAuth's metadata, say) is the newest host session's: only an ``initialize``
        starts another. Under legacy SSE a session is its stream's endpoint (its POSTs go there), and
        each new stream (a GET of the server's URL) starts one."""
        legacy = self.books.get(_LEGACY + target) if target else None
        if legacy is not None:
            return legacy
        stream = method == "GET" and not sid and not resumed and target.split("?")[0] == self.sse_path
        if self.legacy and stream:
            self.run_book = self._fresh(observer)
            return self.run_book
        if sid:
            book = self.books.get(sid)
            if book is None:
                book = self.books[sid] = self._fresh(observer)
            return book
        initialize = method == "POST" and _is_initialize(body)
        if self.run_book is None and not initialize and self.newest is not None:
            return self.newest
        if self.run_book is None or (initialize and id(self.run_book) in self.begun):
            self.run_book = self._fresh(observer)
        if initialize:
            self.begun.add(id(self.run_book))
        return self.run_book

    def _legacy_session(self, book: TapObserver, endpoint: str) -> None:
        """A legacy stream named its endpoint: the POSTs there are its host session's."""
        parts = urlsplit(endpoint)
        self.books[_LEGACY + (parts.path or "/") + (f"?{parts.query}" if parts.query else "")] = book
        self.legacy = True
        if self.run_book is book:
            self.run_book = None  # the next stream starts a session of its own

    def _fresh(self, observer: TapObserver) -> TapObserver:
        """Books for a new host session: the tap's own observer for the first, then a part's."""
        if id(observer) not in self.used:
            self.used.add(id(observer))
            self.newest = observer
            return observer
        from sessions.engine import TapObserver

        book = TapObserver(validate=observer.validate, max_message_bytes=observer.max_message_bytes)
        self.used.add(id(book))
        part = self.parts[id(book)] = _Part(len(self.parts) + 2, book)
        self._open_part(part)
        first = book.watch_http(self.listen_url, self.upstream)
        first.wall, first.mono = self.now  # its session starts with the request that opened it
        first.transport["tap"] = self._tap_details(part.number)
        self.opened.extend(self._tagged(book, [first]))
        self.newest = book
        return book

    def _open_part(self, part: _Part) -> None:
        """The part's spool next to the tap's (``<run>-<n>.jsonl``), and ``--record``'s ``FILE-<n>``."""
        if self.spool_fd is not None:
            path = f"{self.path.removesuffix('.jsonl')}-{part.number}.jsonl"
            try:
                part.spool_fd = open_private(path, os.O_EXCL | os.O_APPEND)
            except OSError as exc:
                self._warn(f"cannot keep frames for the inspector in {path}: {exc}")
        if self.options.record is not None:
            root, ext = os.path.splitext(self.options.record)
            try:
                part.record_fd = os.open(
                    f"{root}-{part.number}{ext}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600
                )
            except OSError as exc:
                self._warn(f"cannot write --record file {root}-{part.number}{ext}: {exc.strerror or exc}")

    def _tap_details(self, number: int) -> dict[str, Any]:
        """What a host session's first frame says of the tap: its name, its run, the tap's process."""
        from sessions.engine import ServerProcess

        run = os.path.basename(self.path).removesuffix(".jsonl")
        tap = ServerProcess.of(os.getpid(), "")
        details = {
            "name": self.options.name,
            "run": run,
            "pid": tap.pid,
            "started": tap.started,
            "host": tap.host,
        }
        if number > 1:
            # Its own run (the spool it is taken from), the tap's control socket (named after the tap's).
            details.update(
                name=f"{self.options.name} #{number}", run=f"{run}-{number}", control=run, part=number
            )
        return details

    def _stopped(self, observer: TapObserver, note: str, wall: float, mono: float) -> list[Frame]:
        """The tap stopped: every host session ends, and frames held for a changed message's are let go."""
        for xid, pending in list(self.tapped.items()):
            self._link(xid, pending, [], ended=True)
        frames = [observer.stopped(note, wall, mono)]
        for part in self.parts.values():
            frames.extend(self._tagged(part.book, [part.book.stopped(note, wall, mono)]))
        return frames

    def _tapped(
        self, observer: TapObserver, xid: int, change: Change, wall: float, mono: float
    ) -> list[Frame]:
        """What the tap did to one message of an exchange: the fault, the original, the tap's answer;
        the message as sent is made from the exchange's next items."""
        numbered: queue.SimpleQueue[dict[str, int]] = queue.SimpleQueue()
        frames = self._changed(observer, replace(change, sent=None, seqs=numbered), wall, mono)
        seqs = numbered.get_nowait()
        if change.sent is None:
            if change.seqs is not None:
                change.seqs.put(seqs)
        else:
            original = next((f for f in frames if f.seq == seqs.get("original")), None)
            self.tapped[xid] = (change, seqs, original)
        return frames

    def _link(
        self,
        xid: int,
        pending: tuple[Change, dict[str, int], Frame | None],
        frames: list[Frame],
        *,
        ended: bool,
    ) -> None:
        change, seqs, original = pending
        sent = next((f for f in frames if f.kind == "message" and f.direction == change.direction), None)
        if sent is None and not ended:
            return
        del self.tapped[xid]
        if sent is not None:
            sent.note = change.sent_note or sent.note
            seqs["sent"] = sent.seq
            if original is not None:
                sent.transport["tap"] = {"original": original.seq}
                original.transport["tap"] = {"forwarded_as": sent.seq}
        if change.seqs is not None:
            change.seqs.put(seqs)

    def _write(self, frames: list[Frame]) -> None:
        self.waiting.extend(frames)
        if self.tapped:
            return
        frames, self.waiting = self.waiting, []
        by_book: dict[int, list[Frame]] = {}
        for frame in frames:
            by_book.setdefault(self.part_of.pop(id(frame), 0), []).append(frame)
        for book, some in by_book.items():
            part = self.parts.get(book)
            self._append(self if part is None else part, some)

    def _close_files(self) -> None:
        super()._close_files()
        for part in self.parts.values():
            for fd in (part.spool_fd, part.record_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _started(self, observer: TapObserver, listen_url: str, wall: float, mono: float) -> Frame:
        """The tap listens: its frame names the tap, as the stdio tap's ``spawned`` frame does."""
        frame = observer.watch_http(listen_url, self.upstream)
        frame.wall, frame.mono = wall, mono
        frame.transport["tap"] = self._tap_details(1)
        return frame

    def _request(
        self,
        observer: TapObserver,
        xid: int,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        wall: float,
        mono: float,
    ) -> list[Frame]:
        url = _origin(self.upstream) + target
        path = urlsplit(url).path or "/"
        exchange = _Exchange(
            method, url, path in self.mcp_paths, initialize=method == "POST" and _is_initialize(body)
        )
        self.exchanges[xid] = exchange
        sent = joined(headers)
        book = self.held_books.pop(xid, None)
        if book is None:
            resumed = bool(_header(sent, "last-event-id"))
            book = self._book(observer, _header(sent, "mcp-session-id"), method, body, target, resumed)
        observer = exchange.book = book
        details = observer.http_details(method, url, sent)
        if exchange.mcp and method == "POST":
            frames = observer.client_line(body, wall, mono, http=details)
            exchange.request = frames[0]
            return frames
        last_id = _header(sent, "last-event-id")
        exchange.resumed = last_id if method == "GET" else ""
        note = None
        if exchange.resumed:
            note = f"resume the stream after event {last_id}"
        elif exchange.mcp and method == "GET":
            note = "open the SSE stream"
        elif exchange.mcp and method == "DELETE":
            note = "end the HTTP session"
        frame = observer.client_request(details, body, wall, mono, judge=exchange.mcp, note=note)
        exchange.request = frame
        return [frame]

    def _head(
        self,
        observer: TapObserver,
        exchange: _Exchange,
        status: int,
        reason: str,
        headers: list[tuple[bytes, bytes]],
        *,
        wall: float,
        mono: float,
    ) -> list[Frame]:
        got = joined(headers)
        sid = _header(got, "mcp-session-id")
        book: TapObserver = exchange.book
        if sid and sid not in self.books:
            self.books[sid] = book  # the run's next requests carry it
            if book is self.run_book:
                self.run_book = None
        elif exchange.initialize and status >= 400 and book is self.run_book:
            self.begun.discard(id(book))  # refused (a 401 before OAuth, say): the next try is the same run
        ctype = _header(got, "content-type").split(";")[0].strip().lower()
        details: dict[str, Any] = {"status": status, "reason": reason, "headers": got}
        if exchange.request is not None:
            details["request_seq"] = exchange.request.seq
        if ctype:
            details["content_type"] = ctype
        exchange.details, exchange.head_time = details, (wall, mono)
        encoding = _header(got, "content-encoding").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            exchange.inflate = zlib.decompressobj(47 if "gzip" in encoding else 15)
        elif encoding not in ("", "identity"):
            exchange.encoded = encoding
        if ctype == _SSE and status == 200 and not exchange.encoded:
            from sessions.engine._sse import SseDecoder

            exchange.decoder = SseDecoder(MAX_MESSAGE_BYTES)
            seq = exchange.request.seq if exchange.request is not None else 0
            exchange.stream = f"POST #{seq}" if exchange.method == "POST" else "GET"
            if exchange.resumed:
                exchange.stream = f"{self.streams.get(exchange.resumed, f'GET #{seq}')} (resumed)"
            return [self._judged_head(observer, exchange, b"")]
        return []  # the head waits for its body: a frame is written once, as it is

    def _judged_head(self, observer: TapObserver, exchange: _Exchange, body: bytes) -> Frame:
        post = exchange.request if exchange.mcp and exchange.method == "POST" else None
        standalone = exchange.mcp and exchange.method == "GET" and not exchange.resumed
        details = {**exchange.details, "headers": _masked(exchange.details["headers"])}
        frame = observer.server_head(
            details,
            body,
            *exchange.head_time,
            post=post,
            get_stream=standalone and observer.conduct.transport == "http",
        )
        if exchange.encoded:
            frame.note = f"the body is {exchange.encoded}-encoded: recorded as it passed, not decoded"
        if exchange.gave:
            frame.note = "; ".join([*filter(None, [frame.note]), *exchange.gave])
        return frame

    def _chunk(
        self, observer: TapObserver, exchange: _Exchange, chunk: bytes, wall: float, mono: float
    ) -> list[Frame]:
        if exchange.inflate is not None:
            try:
                chunk = exchange.inflate.decompress(chunk)
            except zlib.error:
                exchange.inflate, exchange.encoded = None, "undecodable"
        if exchange.decoder is None:
            if exchange.size <= MAX_MESSAGE_BYTES:  # past that, the head is all a frame keeps
                exchange.parts.append(chunk)
                exchange.size += len(chunk)
            return []
        frames: list[Frame] = []
        status = exchange.details["status"]
        for event in exchange.decoder.feed(chunk):
            details = {"status": status, "stream": exchange.stream}
            if event.id:
                self.streams[event.id] = exchange.stream.removesuffix(" (resumed)")
                if len(self.streams) > _STREAMS_KEPT:
                    del self.streams[next(iter(self.streams))]
            if (
                event.event == "endpoint"
                and exchange.method == "GET"
                and observer.conduct.transport == "http"
            ):
                frame, endpoint = observer.server_endpoint(
                    event, details, self.upstream, wall, mono, given=exchange.given_endpoint
                )
                if endpoint is not None:
                    self.mcp_paths.add(urlsplit(endpoint).path or "/")
                    self._legacy_session(observer, endpoint)
                frames.append(frame)
            else:
                frames.extend(observer.server_event(event, details, wall, mono))
        return frames

    def _end(
        self,
        observer: TapObserver,
        exchange: _Exchange,
        error: str | None,
        host_left: bool,
        *,
        wall: float,
        mono: float,
    ) -> list[Frame]:
        """The response ended: a held head goes out with its body; a break or the host leaving is said."""
        frames: list[Frame] = []
        if exchange.decoder is None and exchange.details:
            body = b"".join(exchange.parts)
            status, ctype = exchange.details["status"], exchange.details.get("content_type", "")
            message = (
                exchange.mcp
                and exchange.method == "POST"
                and not exchange.encoded
                and status != 202
                and status not in (401, 403)
                and body.strip()
                and (status < 400 or ctype == _JSON)
            )
            head_body = body if not message or status >= 400 else b""
            frames.append(self._judged_head(observer, exchange, head_body[:MAX_MESSAGE_BYTES]))
            if message:
                http = {"status": status, "request_seq": exchange.details.get("request_seq")}
                if ctype:
                    http["content_type"] = ctype
                frames.extend(observer.server_line(body, wall, mono, http=http))
        if error is not None:
            frames.append(observer.http_failed(f"{exchange.method} {exchange.url}: {error}", wall, mono))
        elif host_left:
            frames.append(
                observer.host_left(
                    f"the host closed the {exchange.stream or exchange.method} stream", wall, mono
                )
            )
        return frames


def _is_initialize(body: bytes) -> bool:
    if b'"initialize"' not in body:
        return False
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(message, dict) and message.get("method") == "initialize"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _masked(headers: dict[str, str]) -> dict[str, str]:
    from sessions.engine import mask_headers

    return mask_headers(headers)
