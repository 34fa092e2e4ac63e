"""Streamable HTTP (2025-03-26 on): every message a POST answered with JSON or an SSE stream, the
standalone GET stream, resumption with Last-Event-ID, Mcp-Session-Id and the DELETE that ends the
session, and the stateless revision's (2026-07-28) headers and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
from collections.abc import Sequence
from typing import Any

import httpx

from ._clock import sleep
from ._errors import ConnectionClosed, FallbackToLegacy, HttpStatusError, SessionExpired, TransportError
from ._frames import Frame
from ._http import JSON, SEND_FAILED, SSE, ClientFactory, HttpBase, content_type, default_client, why
from ._options import MODERN_VERSIONS
from ._oversize import too_large_error
from ._protocol import META_PROTOCOL_VERSION
from ._sse import SseDecoder
from ._targets import HttpTarget, mask_headers
from ._transport import FrameSink, request_ids_in
from ._xheaders import header_value

__all__ = ["StreamableHttpTransport"]

_SESSION_ID = re.compile(r"[\x21-\x7e]+")
_MAX_RECONNECT_DELAY = 30.0
LISTEN_WAIT = 5.0  # seconds the handshake waits for the server to answer the standalone stream's GET
_ANSWERED_REPLY_GRACE = 0.1  # seconds closing waits for answered reply streams to end
DELETE_WAIT = 5.0  # seconds a DELETE that ends the HTTP session may take; then it is recorded as failed
# Stateless revision (2026-07-28): every POST names its method (and, for these, its target) in headers.
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def stateless_version(message: Any) -> str | None:
    """The stateless protocol version a request's ``_meta`` names, if it names one."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str) or "id" not in message:
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _judge_head(
    head: Frame,
    response: httpx.Response,
    ctype: str,
    ids: list[int | str],
    *,
    initialize: bool,
    expired: bool,
) -> Frame:
    """Attach the Streamable HTTP rules' verdicts (and the expiry note) to a POST reply's head,
    before it is recorded: the recorder stores a frame as it is when it is recorded."""
    status = response.status_code
    session_id = response.headers.get("mcp-session-id")
    if initialize and status == 200 and session_id is not None and not _SESSION_ID.fullmatch(session_id):
        head.flag("session-id-chars", "error", "Mcp-Session-Id must be visible ASCII (0x21-0x7E)")
    if status == 202 and ids:
        head.flag(
            "accepted-request",
            "error",
            "a request was answered 202 Accepted; 202 is for notifications and responses",
        )
    if expired:
        if status == 400:
            head.flag("expiry-status", "warning", "an unknown session was answered 400; the spec says 404")
        head.note = "the server no longer knows this session"
    if status < 400 and status != 202 and not ids:
        head.flag(
            "expected-202", "warning", f"a notification or response was answered {status}; the spec says 202"
        )
    if status < 400 and status != 202 and ids and ctype not in (SSE, JSON):
        head.flag("content-type", "error", f"a request was answered with Content-Type {ctype or 'none'!r}")
    return head


class StreamableHttpTransport(HttpBase):
    """One endpoint: every message is a POST; replies come as JSON or as an SSE stream."""

    name = "streamable-http"

    def __init__(
        self, target: HttpTarget, *, auto: bool = False, client_factory: ClientFactory = default_client
    ) -> None:
        super().__init__(target, client_factory=client_factory)
        self.auto = auto
        self.session_id: str | None = None
        self.stateless = False
        # Each request's POST: a cancellation (stateless mode) closes its reply stream, and close()
        # lets those whose requests are answered end.
        self._posts: dict[int | str, asyncio.Task[None]] = {}
        self._replies: set[asyncio.Task[None]] = set()  # every POST still reading its reply

    async def open(self, sink: FrameSink) -> None:
        self._sink = sink
        self._client = self.client_factory(self.target)
        self._note_tls()
        self._start_auth()

    def reset(self) -> None:
        """Forget the HTTP session, so the next initialize starts a new one."""
        self.session_id = None
        self.protocol_version = None
        self.stateless = False

    def set_protocol_version(self, version: str) -> None:
        self.protocol_version = version
        self.stateless = version in MODERN_VERSIONS
        if self.stateless:
            self.session_id = None  # the stateless revision has no sessions

    def _headers(
        self, *, initialize: bool = False, accept: str = f"{JSON}, {SSE}", method: str = "POST"
    ) -> dict[str, str]:
        headers = self._base_headers(method)
        headers["Accept"] = accept
        if self.session_id and not initialize and not self.stateless:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_version and not initialize:
            headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    def _stateless_headers(self, message: Any, version: str) -> dict[str, str]:
        """MCP-Protocol-Version (equal to the ``_meta`` version), Mcp-Method, Mcp-Name if it applies."""
        headers = self._base_headers()
        headers["Accept"] = f"{JSON}, {SSE}"
        headers["MCP-Protocol-Version"] = version
        method = message["method"]
        headers["Mcp-Method"] = method
        params = message.get("params")
        key = NAME_BEARING.get(method)
        name = params.get(key) if key is not None and isinstance(params, dict) else None
        if isinstance(name, str):
            headers["Mcp-Name"] = header_value(name)
        if method == "tools/call":
            headers.update(self.sink.param_headers(message))
        return headers

    def _forget_post(self, request_id: int | str, _: object) -> None:
        self._posts.pop(request_id, None)

    def _close_reply_stream(self, message: dict[str, Any]) -> Frame:
        """Stateless HTTP has no client notifications: a cancellation closes the request's reply stream."""
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        task = self._posts.get(request_id) if isinstance(request_id, int | str) else None
        if task is not None:
            task.cancel()
        note = (
            f"notifications/cancelled is not POSTed in the stateless revision: closed the reply stream of "
            f"request {request_id!r}"
            if task is not None
            else f"request {request_id!r} has no open reply stream to close"
        )
        return self.sink.record(
            Frame(
                "state",
                "local",
                transport={"state": "http-cancel", "http": {"request_id": request_id}},
                note=note,
            )
        )

    async def send(self, raw: bytes, message: Any) -> Frame:
        method = message.get("method") if isinstance(message, dict) else None
        if self.stateless and method == "notifications/cancelled":
            return self._close_reply_stream(message)
        initialize = method == "initialize"
        version = stateless_version(message)
        if version is not None and (self.stateless or version in MODERN_VERSIONS):
            headers = self._stateless_headers(message, version)
        else:
            headers = self._headers(initialize=initialize)
        headers["Content-Type"] = JSON
        details = {"method": "POST", "url": self.target.url, "headers": mask_headers(headers)}
        frame = self.sink.record(Frame("message", "out", raw, message=message, transport={"http": details}))
        if self._closing:
            raise ConnectionClosed("the transport is closed")
        # Never awaited, not even initialize: a reply stream may stay open long after its response, and
        # each message is delivered as it arrives. The session id (and the fallback to the legacy
        # transport) come from the reply's head, which is handled before its body.
        task: asyncio.Task[None] = asyncio.ensure_future(
            self._post(raw, headers, message, frame.seq, initialize=initialize)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)
        for request_id in request_ids_in(message):
            self._posts[request_id] = task
            task.add_done_callback(functools.partial(self._forget_post, request_id))
        if method == "notifications/initialized":
            # Its POST may race the next one on another connection: the server must have it first.
            await asyncio.wait({task}, timeout=LISTEN_WAIT)
        if method == "notifications/initialized" and self.target.open_get_stream:
            # What a server sends before the stream is open, it may drop (the TypeScript SDK does, for
            # a request it relates to no other): the handshake ends once the server has answered the
            # GET, with the stream or a refusal, so no request of ours goes out before then.
            answered = asyncio.Event()
            self._spawn(self._listen(answered))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(answered.wait(), LISTEN_WAIT)
        return frame

    async def _post(
        self, raw: bytes, headers: dict[str, str], message: Any, seq: int, *, initialize: bool = False
    ) -> None:
        ids = request_ids_in(message)
        attempts = 0
        while True:
            generation = self.auth.generation if self.auth is not None else 0
            try:
                headers = await self._authorized(headers, "POST", self.target.url)
                if attempts:  # the message's frame has the first try's headers: record the retry's
                    note = f"send message #{seq} again, authorized"
                    self._record_request("POST", self.target.url, headers, note)
                request = self.client.build_request("POST", self.target.url, content=raw, headers=headers)
                response = await self.client.send(request, stream=True)
            except SEND_FAILED as exc:
                self._record_failure("POST failed", exc)
                self.sink.requests_failed(ids, TransportError(f"POST {self.target.url} failed: {why(exc)}"))
                return
            if self.auth is None or response.status_code not in (401, 403):
                break
            retry, body = await self._refused(response, seq, attempts, generation)
            if not retry or self._closing:
                self.sink.requests_failed(ids, HttpStatusError(response.status_code, body))
                return
            attempts += 1
        try:
            await self._handle(response, ids, seq, initialize=initialize)
        except httpx.HTTPError as exc:
            self._record_failure("reading the reply failed", exc)
            self.sink.requests_failed(ids, TransportError(f"reading the reply failed: {exc}"))
        finally:
            await response.aclose()

    async def _handle(
        self, response: httpx.Response, ids: list[int | str], seq: int, *, initialize: bool
    ) -> None:
        status = response.status_code
        ctype = content_type(response)
        head = self._head(response, seq)
        # An error's (or a 202's) body belongs to its head: read it, bounded, before the head is
        # recorded (a frame is stored as it is when it is recorded).
        whole = True
        if status >= 400 or status == 202:
            try:
                head.raw, whole = await self._body(response, head)
            except httpx.HTTPError:
                self.sink.record(head)  # the status line came, the body did not
                raise
        body = head.raw
        expired = (
            self.session_id is not None
            and not initialize
            and (status == 404 or (status == 400 and b"session" in body.lower()))
        )
        self.sink.record(_judge_head(head, response, ctype, ids, initialize=initialize, expired=expired))
        if initialize and self.auto and 400 <= status < 500 and status not in (401, 403):
            from ._legacy_sse import LegacySseTransport  # only a server that needs the fallback pays for it

            legacy = LegacySseTransport(self.target, client_factory=self.client_factory)
            self.sink.requests_failed(ids, FallbackToLegacy(status, legacy))
            return
        if initialize and status == 200 and "mcp-session-id" in response.headers:
            self.session_id = response.headers["mcp-session-id"]
        if status == 202:
            return
        if status >= 400:
            if expired:
                self.sink.connection_lost(
                    SessionExpired(
                        f"the server ended the HTTP session (HTTP {status}); re-initialize to continue"
                    )
                )
                return
            if status in (401, 403):
                head_note = "the server asks for authorization (connect with OAuth to authorize)"
                self.sink.record(Frame("state", "local", transport={"state": "unauthorized"}, note=head_note))
            elif ctype == JSON and body.strip() and whole:
                # A JSON-RPC error in the body answers the request; let the session read it.
                self._message_in(body, whole, {"status": status, "request_seq": seq})
            self.sink.requests_failed(ids, HttpStatusError(status, body))
            return
        if not ids:
            body, whole = await self._body(response)
            if body.strip():
                self._message_in(body, whole, {"status": status, "request_seq": seq})
            return
        if ctype == SSE:
            await self._read_stream(response, f"POST #{seq}", ids)
            return
        body, whole = await self._body(response)
        frame = self._message_in(body, whole, {"status": status, "content_type": ctype, "request_seq": seq})
        if frame is not None:  # too large: the requests it carried fail, whatever the head shows
            self.sink.requests_failed(ids, too_large_error(self.sink, frame))
        else:
            self.sink.requests_failed(
                ids, TransportError("the HTTP reply carried no response to this request")
            )

    async def _pump(
        self, response: httpx.Response, decoder: SseDecoder, stream: str, among: Sequence[int | str] = ()
    ) -> int:
        """Deliver the events of an SSE response as they arrive, until it ends or drops; count them.
        ``among``: the requests of the POST whose reply stream it is."""
        count = 0
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    count += 1
                    self._deliver_event(event, stream, response.status_code, among)
        except httpx.HTTPError as exc:
            self._record_failure(f"{stream} stream dropped", exc)
        decoder.restart()
        return count

    async def _wait_to_reconnect(self, decoder: SseDecoder, attempt: int) -> None:
        """Wait the stream's ``retry:`` or, without one, a doubling delay (on the session's clock)."""
        if decoder.retry is not None:
            delay = decoder.retry / 1000
        else:
            delay = min(self.sink.options.reconnect_delay * 2 ** (attempt - 1), _MAX_RECONNECT_DELAY)
        await sleep(self.sink.clock, delay)

    async def _read_stream(self, response: httpx.Response, stream: str, ids: list[int | str]) -> None:
        """Read a POST's SSE reply, each message delivered as it arrives, to its end (however late).

        If it ends (cleanly or not) before every response came, resume it as SEP-1699 says: GET with
        ``Last-Event-ID`` after the stream's ``retry:``, at most ``max_reconnects`` times in a row.
        """
        decoder = self._decoder()
        attempts = 0
        current: httpx.Response | None = response
        name = stream
        while True:
            if current is not None:
                try:
                    if await self._pump(current, decoder, name, ids):
                        attempts = 0  # the stream moved on: a new run of reconnections
                finally:
                    await current.aclose()
            waiting = [i for i in ids if self.sink.is_pending(i)]
            if not waiting or self._closing:
                return
            last_id = decoder.last_event_id
            if last_id is None or attempts >= self.sink.options.max_reconnects:
                cause = "with no event id to resume from" if last_id is None else "too often"
                self.sink.requests_failed(
                    waiting, TransportError(f"the reply stream ended {cause} before the response")
                )
                return
            attempts += 1
            await self._wait_to_reconnect(decoder, attempts)
            current = await self._resume(last_id, stream)
            name = f"{stream} (resumed)"

    async def _resume(self, last_event_id: str, stream: str) -> httpx.Response | None:
        headers = self._headers(accept=SSE, method="GET")
        headers["Last-Event-ID"] = last_event_id
        out = self._record_request(
            "GET", self.target.url, headers, f"resume {stream} after event {last_event_id}"
        )
        try:
            response = await self.client.send(
                self.client.build_request("GET", self.target.url, headers=headers), stream=True
            )
        except SEND_FAILED as exc:
            self._record_failure("resuming failed", exc)
            return None
        head = self._head(response, out.seq)
        if response.status_code != 200 or content_type(response) != SSE:
            head.raw, _ = await self._body(response, head)
            self.sink.record(head)
            await response.aclose()
            return None
        self.sink.record(head)
        return response

    async def _listen(self, answered: asyncio.Event) -> None:
        """Hold the standalone GET stream open for server-initiated messages, reconnecting when it drops;
        ``answered`` is set once the server has answered the first GET (or it failed, or closing began)."""
        try:
            await self._listen_until_closed(answered)
        finally:
            answered.set()

    async def _listen_until_closed(self, answered: asyncio.Event) -> None:
        decoder = self._decoder()
        limit = self.sink.options.max_reconnects
        attempts = -1  # reconnections in a row that brought no event (-1: not connected yet)
        while not self._closing:
            attempts += 1
            if attempts > limit:
                note = f"gave up on the standalone SSE stream after {limit} reconnections in a row"
                self.sink.record(Frame("state", "local", transport={"state": "get-stream-ended"}, note=note))
                return
            if attempts:
                await self._wait_to_reconnect(decoder, attempts)
            headers = self._headers(accept=SSE, method="GET")
            if decoder.last_event_id is not None:
                headers["Last-Event-ID"] = decoder.last_event_id
            out = self._record_request("GET", self.target.url, headers, "open the standalone SSE stream")
            try:
                request = self.client.build_request("GET", self.target.url, headers=headers)
                response = await self.client.send(request, stream=True)
            except SEND_FAILED as exc:
                self._record_failure("standalone stream failed", exc)
                continue
            finally:
                answered.set()
            try:
                head = self._head(response, out.seq)
                if response.status_code == 405:
                    head.note = "the server offers no standalone stream"
                    self.sink.record(head)
                    return
                if response.status_code != 200 or content_type(response) != SSE:
                    head.raw, _ = await self._body(response, head)
                    head.flag(
                        "get-stream",
                        "warning",
                        "GET did not open an SSE stream (expected 200 text/event-stream or 405)",
                    )
                    self.sink.record(head)
                    return
                self.sink.record(head)
                if await self._pump(response, decoder, "GET"):
                    attempts = 0
            finally:
                await response.aclose()

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        # A POST whose requests are all answered usually ends at once (a server closes the reply
        # stream after the response; a 202 is all there is): let it end, briefly, rather than cut it,
        # so what it still carries is recorded and its connection goes back to the pool for the DELETE.
        waiting = {task for request_id, task in self._posts.items() if self.sink.is_pending(request_id)}
        if answered := self._replies - waiting:
            await asyncio.wait(answered, timeout=_ANSWERED_REPLY_GRACE)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.session_id and self._client is not None:
            headers = self._headers(method="DELETE")
            out = self._record_request("DELETE", self.target.url, headers, "end the HTTP session")
            try:
                delete = self.client.delete(self.target.url, headers=headers)
                response = await asyncio.wait_for(delete, DELETE_WAIT)
                head = self._head(response, out.seq)
                if response.status_code == 405:
                    head.note = "the server does not let clients end sessions (405 is allowed)"
                self.sink.record(head)
            except (TimeoutError, *SEND_FAILED) as exc:
                self._record_failure("DELETE failed", exc)
        await self._close_client()
