"""A passive observer: the frames of a conversation the engine watches (a tap) but does not hold.

A tap sits between a host (the client) and its server and forwards both directions unchanged; it hands
what passed, a line at a time, to ``TapObserver``, which numbers it as the engine numbers its own frames
and judges the server's side by the engine's own rules (``_rules.check_frame``). The books those rules
keep (``PeerState``, ``RequestTable``) are filled here from what the client was seen to send: its
initialize, its requests (and their progress tokens), its cancellations, ``notifications/initialized``.
The client's own frames are judged in one place, ``judge_client_frame``.

An HTTP tap (``watch_http``) keeps one observer per host session (``book``: two hosts on one tap are
judged apart), numbered as one, and hands it each exchange in the engine's own HTTP shapes: a POST's message
(``client_line`` with its ``http`` details), a GET or DELETE (``client_request``), a response head
(``server_head``, judged by the Streamable HTTP rules the engine applies to its own replies), a JSON
body (``server_line``) and each SSE event (``server_event``; legacy SSE's endpoint: ``server_endpoint``,
which switches the client rules to the legacy transport).

Nothing here sends, waits or starts anything, and it needs no event loop: a tap calls it from a
thread of its own, after the bytes were forwarded.
"""

from __future__ import annotations

import itertools
import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard, cast
from urllib.parse import urljoin, urlsplit

from . import _rules
from ._client_conduct import ClientConduct, observe_server_frame
from ._client_rules import check_client_frame
from ._clock import LoopClock
from ._frames import HEAD_BYTES, Frame, too_large
from ._options import HANDSHAKE_VERSIONS, ClientOptions
from ._peer import PeerState
from ._requests import Outgoing, RequestTable
from ._targets import mask_headers
from ._transport import request_ids_in

if TYPE_CHECKING:
    from ._sse import SseEvent

__all__ = ["LineSplitter", "TapObserver"]


@dataclass(slots=True)
class _ServerAsked:
    """A server→client request the client has not answered yet: its frame and when it came."""

    seq: int
    mono: float
    method: str


class TapObserver:
    """Turn the lines a tap forwarded into numbered, judged frames, in the order they passed."""

    def __init__(self, *, validate: bool = True, max_message_bytes: int = 16 * 1024 * 1024) -> None:
        self.peer = PeerState(validate=validate)
        self.max_message_bytes = max_message_bytes
        # The observer never times a request out (the host does), so the table's clock is never armed.
        self.requests = RequestTable(LoopClock(), _never_times_out, defaults=ClientOptions())
        self._seq = itertools.count(1)
        self._tokens: dict[int | str, int | str] = {}  # request id → its progress token
        self._asked: dict[int | str, _ServerAsked] = {}
        self.validate = validate
        self.conduct = ClientConduct(transport="stdio", validate=validate)
        """What the client rules remember of the host."""

    # --- what the tap saw -----------------------------------------------------------------------

    def spawned(self, pid: int, command: str, args: list[str], **details: Any) -> Frame:
        """The server process started (``details``: its cwd, its process record, the tap's own)."""
        stdio = {"pid": pid, "command": command, "args": args, **details}
        frame = Frame("state", "local", transport={"state": "spawned", "stdio": stdio})
        frame.note = f"started process {pid}"
        return self._numbered(frame)

    def failed(self, note: str) -> Frame:
        """The server could not be started."""
        return self._numbered(Frame("state", "local", transport={"state": "failed"}, note=note))

    def client_line(
        self,
        raw: bytes,
        wall: float | None = None,
        mono: float | None = None,
        *,
        http: dict[str, Any] | None = None,
    ) -> list[Frame]:
        """A line (or an HTTP POST's body, ``http``: its details) the host sent the server; what it
        changes in the books, then its verdicts."""
        frame = self._stamped(Frame("message", "out", raw), wall, mono)
        if http is not None:
            frame.transport["http"] = http
        if len(raw) > self.max_message_bytes:
            return [self._oversized(frame, "out")]
        try:
            frame.message = _rules.loads(raw.decode("utf-8").removeprefix("\ufeff"))
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            frame.parse_error = f"not JSON: {exc}"[:500]
            frame.rpc_kind = "invalid"
        if frame.message is not None:
            _rules.describe_outgoing(frame)
        self._numbered(frame)
        made = [frame]
        self.judge_client_frame(frame)
        if isinstance(frame.message, dict):
            made.extend(self._client_message(frame, frame.message))
        return made

    def server_line(
        self,
        raw: bytes,
        wall: float | None = None,
        mono: float | None = None,
        *,
        http: dict[str, Any] | None = None,
    ) -> list[Frame]:
        """A line (or an HTTP body or SSE event, ``http``: its details) the server sent the host,
        judged by the engine's server rules."""
        frame = self._stamped(Frame("message", "in", raw), wall, mono)
        if http is not None:
            frame.transport["http"] = http
        if len(raw) > self.max_message_bytes:
            return [self._oversized(frame, "in")]
        outcomes = _rules.check_frame(frame, self.peer, self.requests)
        observe_server_frame(frame, self.conduct)
        self._numbered(frame)
        self.peer.tasks.drain(frame.seq)  # the observer keeps the books, it publishes no task events
        for outcome in outcomes:
            if isinstance(outcome, _rules.Answered):
                self._answered(outcome, frame)
            elif isinstance(outcome, _rules.ServerRequest):
                self._asked[outcome.request_id] = _ServerAsked(frame.seq, frame.mono, outcome.method)
        return [frame]

    def server_end(self, raw: bytes, wall: float | None = None, mono: float | None = None) -> list[Frame]:
        """What the server wrote last, without a newline before its stdout ended."""
        frames = self.server_line(raw, wall, mono)
        frames[0].flag("unterminated-line", "warning", "stdout ended without a newline after this message")
        return frames

    def stderr_line(self, raw: bytes, wall: float | None = None, mono: float | None = None) -> Frame:
        return self._numbered(self._stamped(Frame("stderr", "in", raw), wall, mono))

    def aside(
        self, raw: bytes, direction: str, note: str, wall: float | None = None, mono: float | None = None
    ) -> Frame:
        """A message the tap kept from its receiver (dropped, answered itself, or an edit's original):
        recorded as read, neither judged nor entered in the books, since the other side never saw it."""
        frame = Frame("message", "out" if direction == "out" else "in", raw, note=note)
        self._stamped(frame, wall, mono)
        try:
            frame.message = _rules.loads(raw.decode("utf-8").removeprefix("\ufeff"))
        except (ValueError, RecursionError) as exc:
            frame.parse_error = f"not JSON: {exc}"[:500]
            frame.rpc_kind = "invalid"
        if frame.message is not None:
            _rules.describe_outgoing(frame)
        return self._numbered(frame)

    def local(
        self,
        state: str,
        note: str,
        detail: dict[str, Any],
        wall: float | None = None,
        mono: float | None = None,
    ) -> Frame:
        """Something the tap itself did to the traffic (a fault), as a frame of its own."""
        frame = Frame("state", "local", transport={"state": state, **detail}, note=note)
        return self._numbered(self._stamped(frame, wall, mono))

    def exited(self, returncode: int, wall: float | None = None, mono: float | None = None) -> list[Frame]:
        """The server process ended: its exit, then the session's end."""
        detail: dict[str, Any] = {"returncode": returncode}
        if returncode < 0:
            try:
                detail["signal"] = signal.Signals(-returncode).name
            except ValueError:
                detail["signal"] = str(-returncode)
            note = f"process exited by signal {detail['signal']}"
        else:
            note = f"process exited with code {returncode}"
        frame = self._stamped(Frame("exit", "local", transport={"stdio": detail}, note=note), wall, mono)
        self._numbered(frame)
        return [frame, self._state("closed", f"the server {note}", frame)]

    # --- HTTP -----------------------------------------------------------------------------------

    def watch_http(self, listen_url: str, upstream: str) -> Frame:
        """An HTTP tap starts: judge the host as a Streamable HTTP client until a legacy endpoint shows."""
        self.conduct = ClientConduct(transport="http", validate=self.validate)
        details = {"listen": listen_url, "url": upstream}
        frame = Frame("state", "local", transport={"state": "connecting", "http": details})
        frame.note = f"the tap listens on {listen_url} for {upstream}"
        return self._numbered(frame)

    def client_request(
        self,
        details: dict[str, Any],
        body: bytes = b"",
        wall: float | None = None,
        mono: float | None = None,
        *,
        judge: bool = True,
        note: str | None = None,
    ) -> Frame:
        """An HTTP request of the host that carries no message (a GET, a DELETE, an OAuth step);
        ``judge``: it went to the MCP endpoint, so the client rules read its headers."""
        frame = self._stamped(Frame("http", "out", body, transport={"http": details}, note=note), wall, mono)
        if judge:
            self.judge_client_frame(frame)
        return self._numbered(frame)

    def server_head(
        self,
        details: dict[str, Any],
        body: bytes = b"",
        wall: float | None = None,
        mono: float | None = None,
        *,
        post: Frame | None = None,
        get_stream: bool = False,
    ) -> Frame:
        """A response head (with its body, when the body is no message): for the message frame ``post``
        of a Streamable HTTP POST, judged by the rules the engine holds its own replies to; for a
        standalone GET (``get_stream``), whether it opened a stream."""
        frame = self._stamped(Frame("http", "in", body, transport={"http": details}), wall, mono)
        status = details.get("status")
        if status == 401:
            frame.note = "the server asks for authorization"
        elif status == 403:
            frame.note = "the token is not enough"
        if post is not None and self.conduct.transport == "http" and isinstance(status, int):
            self._judge_post_head(frame, details, status, post)
        elif get_stream and status not in (200, 405):
            frame.flag(
                "get-stream",
                "warning",
                "GET did not open an SSE stream (expected 200 text/event-stream or 405)",
            )
        observe_server_frame(frame, self.conduct)
        return self._numbered(frame)

    def _judge_post_head(self, frame: Frame, details: dict[str, Any], status: int, post: Frame) -> None:
        import httpx  # the HTTP transport's rules read a response; only an HTTP tap gets here

        from ._streamable import _judge_head

        headers = {str(k): str(v) for k, v in (details.get("headers") or {}).items()}
        ctype = str(details.get("content_type") or "")
        initialize = post.method == "initialize" and post.rpc_kind == "request"
        expired = (
            self.conduct.session_id is not None
            and not initialize
            and (status == 404 or (status == 400 and b"session" in frame.raw.lower()))
        )
        response = httpx.Response(status, headers=headers)
        _judge_head(
            frame, response, ctype, request_ids_in(post.message), initialize=initialize, expired=expired
        )

    def server_event(
        self, event: SseEvent, details: dict[str, Any], wall: float | None = None, mono: float | None = None
    ) -> list[Frame]:
        """One SSE event the server sent: a message, or (another event, no data) an ``http`` frame."""
        http = {**details, "event": event.event, "event_id": event.id}
        if event.retry is not None:
            http["retry"] = event.retry
        if event.oversized:
            kept = too_large(event.data, self.max_message_bytes, http=http)
            return [self._numbered(self._stamped(kept, wall, mono))]
        if event.event != "message" or not event.data.strip():
            note = f"SSE event {event.event!r}" if event.event != "message" else "SSE event without data"
            frame = Frame("http", "in", event.data, transport={"http": http}, note=note)
            return [self._numbered(self._stamped(frame, wall, mono))]
        return self.server_line(event.data, wall, mono, http=http)

    def server_endpoint(
        self,
        event: SseEvent,
        details: dict[str, Any],
        upstream: str,
        wall: float | None = None,
        mono: float | None = None,
        *,
        given: str | None = None,
    ) -> tuple[Frame, str | None]:
        """Legacy SSE's endpoint event: the client rules now go by the legacy transport. Return its frame
        and the endpoint (``None`` when it names another origin, which a client must refuse);
        ``given``: what the tap handed the host instead, when it rewrote it."""
        self.conduct = ClientConduct(transport="sse", validate=self.validate)
        http = {**details, "event": "endpoint", "event_id": event.id}
        frame = self._stamped(Frame("http", "in", event.data, transport={"http": http}), wall, mono)
        named = urljoin(upstream, event.data.decode("utf-8", errors="replace").strip())
        frame.note = f"endpoint {named}"
        base, parts = urlsplit(upstream), urlsplit(named)
        endpoint: str | None = named
        if (base.scheme, base.netloc) != (parts.scheme, parts.netloc):
            frame.flag("endpoint-origin", "error", f"endpoint {named!r} is on another origin")
            endpoint = None
        if given is not None:
            frame.note += f" (the tap gave the host {given})"
        return self._numbered(frame), endpoint

    def http_failed(self, note: str, wall: float | None = None, mono: float | None = None) -> Frame:
        """The tap could not reach the server, or a stream broke off."""
        frame = Frame("state", "local", transport={"state": "http-error"}, note=note)
        return self._numbered(self._stamped(frame, wall, mono))

    def host_left(self, note: str, wall: float | None = None, mono: float | None = None) -> Frame:
        """The host closed a response stream before it ended (a GET stream it no longer wants)."""
        frame = Frame("state", "local", transport={"state": "http-closed"}, note=note)
        return self._numbered(self._stamped(frame, wall, mono))

    def stopped(self, note: str, wall: float | None = None, mono: float | None = None) -> Frame:
        """The HTTP tap stopped: the session ends."""
        self.peer.state = "closed"
        frame = Frame("state", "local", transport={"state": "closed"}, note=note)
        return self._numbered(self._stamped(frame, wall, mono))

    @staticmethod
    def http_details(method: str, url: str, headers: dict[str, str]) -> dict[str, Any]:
        """A request's ``transport["http"]``, as the engine records its own (credentials masked)."""
        return {"method": method, "url": url, "headers": mask_headers(headers)}

    # --- the client's side ----------------------------------------------------------------------

    def judge_client_frame(self, frame: Frame) -> None:
        """The client rules attach their verdicts to ``frame``, before the books below change for it."""
        check_client_frame(frame, self.conduct)

    def _client_message(self, frame: Frame, message: dict[str, Any]) -> list[Frame]:
        """Keep the books the server rules read, from one message of the client."""
        peer, requests = self.peer, self.requests
        method, request_id = frame.method, frame.rpc_id
        given = message.get("params")
        params: dict[str, Any] = given if isinstance(given, dict) else {}
        if frame.rpc_kind == "request" and isinstance(method, str) and _is_id(request_id):
            # The observer never settles a request (the host awaits its own): no future to resolve.
            outgoing = Outgoing(cast(int, request_id), method, cast(Any, None))
            outgoing.frame_seq, outgoing.sent_mono = frame.seq, frame.mono
            if method == "tools/call" and "task" not in params and isinstance(params.get("name"), str):
                outgoing.tool = params["name"]
            requests.pending[request_id] = outgoing
            if isinstance(request_id, int):
                requests.next_id = max(requests.next_id, request_id + 1)
            meta = params.get("_meta")
            token = meta.get("progressToken") if isinstance(meta, dict) else None
            if _is_id(token):
                requests.progress[token] = outgoing
                self._tokens[request_id] = token
            peer.tasks.sent(frame, peer.server_capabilities)
            if method == "initialize":
                peer.forget_agreement()
                caps, info = params.get("capabilities"), params.get("clientInfo")
                peer.client_capabilities = caps if isinstance(caps, dict) else {}
                peer.client_info = info if isinstance(info, dict) else {}
                peer.initialized_sent = False
                offered = params.get("protocolVersion")
                return [self._state("initializing", f"the host offers protocol {offered}", frame)]
        elif frame.rpc_kind == "notification" and method == "notifications/initialized":
            peer.initialized_sent = True
            if peer.state != "ready":
                version = peer.protocol_version or "?"
                return [self._state("ready", f"protocol {version}", frame)]
        elif frame.rpc_kind == "notification" and method == "notifications/cancelled":
            cancelled = params.get("requestId")
            if _is_id(cancelled) and requests.pending.pop(cancelled, None) is not None:
                requests.abandoned[cancelled] = "cancelled"
                self._forget_token(cancelled)
        elif frame.rpc_kind in ("result", "error") and _is_id(request_id):
            asked = self._asked.pop(request_id, None)
            if asked is not None:
                frame.pair_seq, frame.method = asked.seq, asked.method
                frame.latency_ms = round((frame.mono - asked.mono) * 1000, 3)
        return []

    # --- the server's side ----------------------------------------------------------------------

    def _answered(self, outcome: _rules.Answered, frame: Frame) -> None:
        """A response to one of the client's requests: its progress ends, initialize's agreement holds."""
        outgoing, peer = outcome.outgoing, self.peer
        self._forget_token(outgoing.id)
        if outgoing.method != "initialize" or outcome.result is None:
            return
        result = outcome.result
        version = result.get("protocolVersion")
        if version in HANDSHAKE_VERSIONS:
            peer.protocol_version, peer.mode = str(version), "handshake"
        caps, info = result.get("capabilities"), result.get("serverInfo")
        peer.server_capabilities = caps if isinstance(caps, dict) else {}
        peer.server_info = info if isinstance(info, dict) else {}
        instructions = result.get("instructions")
        peer.instructions = instructions if isinstance(instructions, str) else None

    def _forget_token(self, request_id: int | str) -> None:
        token = self._tokens.pop(request_id, None)
        if token is not None:
            self.requests.progress.pop(token, None)

    # --- numbering ------------------------------------------------------------------------------

    def _oversized(self, frame: Frame, direction: str) -> Frame:
        kept = too_large(frame.raw[:HEAD_BYTES], self.max_message_bytes, **frame.transport)
        kept.direction = "out" if direction == "out" else "in"
        kept.wall, kept.mono = frame.wall, frame.mono
        return self._numbered(kept)

    def _state(self, state: str, note: str, after: Frame) -> Frame:
        """A lifecycle step the frame ``after`` made, at its time."""
        self.peer.state = state
        frame = Frame(
            "state", "local", transport={"state": state}, note=note, wall=after.wall, mono=after.mono
        )
        return self._numbered(frame)

    def _numbered(self, frame: Frame) -> Frame:
        frame.seq = next(self._seq)
        return frame

    @staticmethod
    def _stamped(frame: Frame, wall: float | None, mono: float | None) -> Frame:
        """When the tap read it (not when it was judged), if the tap says."""
        if wall is not None:
            frame.wall = wall
        if mono is not None:
            frame.mono = mono
        return frame


class LineSplitter:
    """Cut a byte stream into lines as the stdio transport does: ``\\n`` ends one, a ``\\r`` before it
    is dropped, empty lines are no messages. A line past ``limit`` keeps only its head."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        while chunk:
            end = chunk.find(b"\n")
            piece, chunk = (chunk, b"") if end < 0 else (chunk[:end], chunk[end + 1 :])
            if not self._skipping:
                self._parts.append(piece)
                self._size += len(piece)
                if self._size > self.limit:  # keep a head that still tells it is too large
                    head = b"".join(self._parts)[: self.limit + 1]
                    self._parts, self._size, self._skipping = [head], len(head), True
            if end >= 0:
                line = self._take()
                if line:
                    lines.append(line)
        return lines

    def rest(self) -> bytes:
        """What is left after the stream ended: a last line without its newline."""
        return self._take()

    def _take(self) -> bytes:
        line = b"".join(self._parts).removesuffix(b"\r")
        self._parts, self._size, self._skipping = [], 0, False
        return line


def _is_id(value: Any) -> TypeGuard[int | str]:
    return isinstance(value, int | str) and not isinstance(value, bool)


def _never_times_out(outgoing: Outgoing, error: Exception, reason: str) -> None:
    """The host times its own requests out; the observer only watches."""
