"""HTTP transports: Streamable HTTP (2025-03-26 on) and the legacy HTTP+SSE transport (2024-11-05)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import ssl
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from ._clock import sleep
from ._errors import ConnectionClosed, FallbackToLegacy, HttpStatusError, SessionExpired, TransportError
from ._frames import Frame, head_of, too_large
from ._oauth import OAuthSession
from ._options import MODERN_VERSIONS
from ._protocol import META_PROTOCOL_VERSION
from ._sse import SseDecoder, SseEvent
from ._targets import HttpTarget, mask_headers
from ._tls import oauth_client, tls_context
from ._transport import FrameSink, request_ids_in
from ._xheaders import header_value

__all__ = [
    "ClientFactory",
    "FallbackToLegacy",
    "LegacySseTransport",
    "StreamableHttpTransport",
    "default_client",
]

_SESSION_ID = re.compile(r"[\x21-\x7e]+")
_JSON = "application/json"
_SSE = "text/event-stream"
_MAX_RECONNECT_DELAY = 30.0
LISTEN_WAIT = 5.0  # seconds the handshake waits for the server to answer the standalone stream's GET
_ANSWERED_REPLY_GRACE = 0.1  # seconds closing waits for answered reply streams to end
DELETE_WAIT = 5.0  # seconds a DELETE that ends the HTTP session may take; then it is recorded as failed
# Stateless revision (2026-07-28): every POST names its method (and, for these, its target) in headers.
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
# What sending may raise (a URL httpx cannot parse, ``0177.0.0.1``, is no HTTPError; uncaught, it hangs).
_SEND_FAILED = (httpx.HTTPError, httpx.InvalidURL)


def why(exc: BaseException) -> str:
    """An HTTP failure in words, with a hint where the usual cause is known."""
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text:
        text += (
            " (a self-signed certificate or a private CA? Trust its certificate with a CA file, "
            "or switch TLS verification off for this server)"
        )
    return text


def stateless_version(message: Any) -> str | None:
    """The stateless protocol version a request's ``_meta`` names, if it names one."""
    if not isinstance(message, dict) or not isinstance(message.get("method"), str) or "id" not in message:
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def _content_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.split(";")[0].strip().lower()


ClientFactory = Callable[[HttpTarget], httpx.AsyncClient]


def default_client(target: HttpTarget) -> httpx.AsyncClient:
    """The HTTP client a transport uses unless a test hands it another (one on ``httpx.MockTransport``)."""
    # No read timeout: SSE streams idle for minutes; request clocks live in the session.
    timeout = httpx.Timeout(connect=target.connect_timeout, read=None, write=60.0, pool=None)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
    # Loading the CA bundle costs ~20 ms and ~800 KB a client: build it once, and only for https
    # (plain http never uses it, and redirects are not followed).
    https = target.url.lower().startswith("https:")
    verify: bool | ssl.SSLContext = tls_context(target.ca_file) if https and target.verify_tls else False
    if target.egress is not None:
        from ._egress_net import confined_transport

        # No proxies from the environment either: a proxy would connect where the rules cannot see.
        transport = confined_transport(target.egress, verify=verify, limits=limits)
        return httpx.AsyncClient(
            timeout=timeout, transport=transport, trust_env=False, follow_redirects=False
        )
    return httpx.AsyncClient(timeout=timeout, limits=limits, verify=verify, follow_redirects=False)


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
    if status < 400 and status != 202 and ids and ctype not in (_SSE, _JSON):
        head.flag("content-type", "error", f"a request was answered with Content-Type {ctype or 'none'!r}")
    return head


class _HttpBase:
    name = "http"

    def __init__(self, target: HttpTarget, *, client_factory: ClientFactory = default_client) -> None:
        self.target = target
        self.client_factory = client_factory
        self._sink: FrameSink | None = None
        self._client: httpx.AsyncClient | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.protocol_version: str | None = None
        self.auth: OAuthSession | None = None
        self._oauth_http: httpx.AsyncClient | None = None

    @property
    def sink(self) -> FrameSink:
        assert self._sink is not None
        return self._sink

    @property
    def client(self) -> httpx.AsyncClient:
        assert self._client is not None
        return self._client

    def _base_headers(self, method: str = "POST", url: str | None = None) -> dict[str, str]:
        headers = dict(self.target.headers)
        if self.auth is not None and self.auth.token is not None:
            headers.update(self.auth.headers(method, url or self.target.url))
        elif self.target.bearer_token:
            headers["Authorization"] = f"Bearer {self.target.bearer_token}"
        return headers

    def _start_auth(self) -> None:
        """Set up OAuth for this connection when the target asks for it (once the sink is known)."""
        if self.target.oauth is None or self.auth is not None:
            return
        # A test's client (on a mock transport) serves the flow too; otherwise a client of its own.
        own = self.client_factory is default_client
        self._oauth_http = oauth_client(self.target) if own else None
        http = self._oauth_http or self.client
        self.auth = OAuthSession(self.target.oauth, self.target.url, http, self.sink.record)

    async def _authorized(self, headers: dict[str, str], method: str, url: str) -> dict[str, str]:
        """``headers`` with a current token (refreshed if it is about to expire) and a fresh proof."""
        if self.auth is None:
            return headers
        await self.auth.ready()
        fresh = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "dpop")}
        fresh.update(self.auth.headers(method, url))
        if "Authorization" not in fresh and self.target.bearer_token:
            fresh["Authorization"] = f"Bearer {self.target.bearer_token}"
        return fresh

    async def _refused(
        self, response: httpx.Response, request_seq: int, attempts: int, generation: int
    ) -> tuple[bool, bytes]:
        """A 401/403: record it (its challenge readable), let OAuth answer it; say whether to retry."""
        assert self.auth is not None
        head = self._head(response, request_seq)
        try:
            head.raw, _ = await self._body(response, head)
        except httpx.HTTPError:
            pass
        finally:
            await response.aclose()
        head.note = (
            "the server asks for authorization" if response.status_code == 401 else "the token is not enough"
        )
        self.sink.record(head)
        retry = await self.auth.challenged(response, attempts, generation)
        return retry, head.raw

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def set_protocol_version(self, version: str) -> None:
        self.protocol_version = version

    def _head(self, response: httpx.Response, request_seq: int) -> Frame:
        """A response head's frame, not yet recorded: a frame is stored as it is when it is recorded,
        so its body, verdicts and note are settled first, then ``self.sink.record(head)``."""
        details = {
            "status": response.status_code,
            "reason": response.reason_phrase,
            "headers": mask_headers(dict(response.headers)),
            "request_seq": request_seq,
        }
        return Frame("http", "in", transport={"http": details})

    def _record_request(self, method: str, url: str, headers: dict[str, str], note: str) -> Frame:
        details = {"method": method, "url": url, "headers": mask_headers(headers)}
        return self.sink.record(Frame("http", "out", transport={"http": details}, note=note))

    def _record_failure(self, what: str, exc: BaseException) -> None:
        self.sink.record(
            Frame(
                "state",
                "local",
                transport={"state": "http-error", "http": {"error": type(exc).__name__}},
                note=f"{what}: {why(exc)}",
            )
        )

    def _note_tls(self) -> None:
        if self.target.url.lower().startswith("https:") and not self.target.verify_tls:
            self.sink.record(
                Frame(
                    "state",
                    "local",
                    transport={"state": "tls-unverified"},
                    note="TLS certificate verification is off for this server: any certificate is accepted",
                )
            )

    def _deliver_event(self, event: SseEvent, stream: str, status: int) -> None:
        details = {"http": {"status": status, "stream": stream, "event": event.event, "event_id": event.id}}
        if event.retry is not None:
            details["http"]["retry"] = event.retry
        if event.oversized:
            self.sink.record(too_large(event.data, self.sink.options.max_message_bytes, **details))
            return
        if event.event != "message" or not event.data.strip():
            note = f"SSE event {event.event!r}" if event.event != "message" else "SSE event without data"
            self.sink.record(Frame("http", "in", event.data, transport=details, note=note))
            return
        self.sink.receive(Frame("message", "in", event.data, transport=details))

    def _message_in(self, body: bytes, whole: bool, details: dict[str, Any]) -> None:
        """Deliver a body that should be a JSON-RPC message, or record its head when it is too large."""
        if whole:
            self.sink.receive(Frame("message", "in", body, transport={"http": details}))
        else:
            self.sink.record(too_large(body, self.sink.options.max_message_bytes, http=details))

    async def _body(self, response: httpx.Response, head: Frame | None = None) -> tuple[bytes, bool]:
        """Read a body up to ``max_message_bytes``: ``(body, True)``, or ``(its first bytes, False)``.

        A larger body is not read further (closing the response drops the rest); ``head``, the
        response's frame, is flagged ``message-too-large`` then.
        """
        limit = self.sink.options.max_message_bytes
        parts: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                if head is not None:
                    head.flag("message-too-large", "error", f"the body is larger than the {limit}-byte limit")
                return head_of(parts), False
        return b"".join(parts), True

    def _decoder(self) -> SseDecoder:
        return SseDecoder(self.sink.options.max_message_bytes)

    async def _pump(self, response: httpx.Response, decoder: SseDecoder, stream: str) -> int:
        """Deliver the events of an SSE response as they arrive, until it ends or drops; count them."""
        count = 0
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    count += 1
                    self._deliver_event(event, stream, response.status_code)
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

    async def _close_client(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
        if self._oauth_http is not None:
            await self._oauth_http.aclose()


class StreamableHttpTransport(_HttpBase):
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
        self, *, initialize: bool = False, accept: str = f"{_JSON}, {_SSE}", method: str = "POST"
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
        headers["Accept"] = f"{_JSON}, {_SSE}"
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
        headers["Content-Type"] = _JSON
        details = {"method": "POST", "url": self.target.url, "headers": mask_headers(headers)}
        frame = self.sink.record(Frame("message", "out", raw, message=message, transport={"http": details}))
        if self._closing:
            raise ConnectionClosed("the transport is closed")
        # Never awaited, not even initialize: a reply stream may stay open long after its response. The
        # session id (and the fallback to the legacy transport) come from the reply's head, before its body.
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
        if method == "notifications/initialized" and self.target.open_get_stream:
            # A server may drop what it sends before the stream is open (the TypeScript SDK does): the
            # handshake ends once the server has answered the GET, so no request goes out before then.
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
            except _SEND_FAILED as exc:
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
        ctype = _content_type(response)
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
            elif ctype == _JSON and body.strip() and whole:
                # A JSON-RPC error in the body answers the request; let the session read it.
                self._message_in(body, whole, {"status": status, "request_seq": seq})
            self.sink.requests_failed(ids, HttpStatusError(status, body))
            return
        if not ids:
            body, whole = await self._body(response)
            if body.strip():
                self._message_in(body, whole, {"status": status, "request_seq": seq})
            return
        if ctype == _SSE:
            await self._read_stream(response, f"POST #{seq}", ids)
            return
        body, whole = await self._body(response)
        self._message_in(body, whole, {"status": status, "content_type": ctype, "request_seq": seq})
        limit = self.sink.options.max_message_bytes
        missing = "no response to this request" if whole else f"a reply larger than {limit} bytes"
        self.sink.requests_failed(ids, TransportError(f"the HTTP reply carried {missing}"))

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
                    if await self._pump(current, decoder, name):
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
        headers = self._headers(accept=_SSE, method="GET")
        headers["Last-Event-ID"] = last_event_id
        out = self._record_request(
            "GET", self.target.url, headers, f"resume {stream} after event {last_event_id}"
        )
        try:
            response = await self.client.send(
                self.client.build_request("GET", self.target.url, headers=headers), stream=True
            )
        except _SEND_FAILED as exc:
            self._record_failure("resuming failed", exc)
            return None
        head = self._head(response, out.seq)
        if response.status_code != 200 or _content_type(response) != _SSE:
            head.raw, _ = await self._body(response, head)
            self.sink.record(head)
            await response.aclose()
            return None
        self.sink.record(head)
        return response

    async def _listen(self, answered: asyncio.Event) -> None:
        """Hold the standalone GET stream open, reconnecting; ``answered`` is set at the first reply."""
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
            headers = self._headers(accept=_SSE, method="GET")
            if decoder.last_event_id is not None:
                headers["Last-Event-ID"] = decoder.last_event_id
            out = self._record_request("GET", self.target.url, headers, "open the standalone SSE stream")
            try:
                request = self.client.build_request("GET", self.target.url, headers=headers)
                response = await self.client.send(request, stream=True)
            except _SEND_FAILED as exc:
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
                if response.status_code != 200 or _content_type(response) != _SSE:
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
        # A POST whose requests are answered usually ends at once: let it end, briefly, rather than cut it,
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
            except (TimeoutError, *_SEND_FAILED) as exc:
                self._record_failure("DELETE failed", exc)
        await self._close_client()


class LegacySseTransport(_HttpBase):
    """The 2024-11-05 transport: a GET event stream names a POST endpoint in its first event."""

    name = "sse"

    def __init__(self, target: HttpTarget, *, client_factory: ClientFactory = default_client) -> None:
        super().__init__(target, client_factory=client_factory)
        self.endpoint: str | None = None
        self._endpoint_ready: asyncio.Future[str] | None = None
        self._response: httpx.Response | None = None

    async def open(self, sink: FrameSink) -> None:
        self._sink = sink
        self._client = self.client_factory(self.target)
        self._note_tls()
        self._start_auth()
        attempts = 0
        while True:
            generation = self.auth.generation if self.auth is not None else 0
            headers = self._base_headers("GET")
            headers["Accept"] = _SSE
            try:
                headers = await self._authorized(headers, "GET", self.target.url)
                out = self._record_request("GET", self.target.url, headers, "open the SSE stream")
                response = await self.client.send(
                    self.client.build_request("GET", self.target.url, headers=headers), stream=True
                )
            except _SEND_FAILED as exc:
                await self._close_client()
                raise TransportError(f"GET {self.target.url} failed: {why(exc)}") from exc
            if self.auth is None or response.status_code not in (401, 403):
                break
            retry, body = await self._refused(response, out.seq, attempts, generation)
            if not retry:
                await self._close_client()
                raise HttpStatusError(response.status_code, body)
            attempts += 1
        head = self._head(response, out.seq)
        if response.status_code != 200 or _content_type(response) != _SSE:
            head.raw, _ = await self._body(response, head)
            self.sink.record(head)
            await response.aclose()
            await self._close_client()
            raise HttpStatusError(response.status_code, head.raw)
        self.sink.record(head)
        self._response = response
        self._endpoint_ready = asyncio.get_running_loop().create_future()
        self._spawn(self._read(response))
        try:
            self.endpoint = await asyncio.wait_for(
                asyncio.shield(self._endpoint_ready), self.target.connect_timeout
            )
        except TimeoutError:
            await self._close_client()
            raise TransportError("the SSE stream sent no endpoint event") from None
        except TransportError:
            await self._close_client()
            raise

    async def _read(self, response: httpx.Response) -> None:
        assert self._endpoint_ready is not None
        decoder = self._decoder()
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    if event.event == "endpoint" and not self._endpoint_ready.done():
                        self._take_endpoint(event)
                    else:
                        self._deliver_event(event, "GET", 200)
        except httpx.HTTPError as exc:
            self._record_failure("SSE stream dropped", exc)
        finally:
            await response.aclose()
        if not self._endpoint_ready.done():
            self._endpoint_ready.set_exception(
                TransportError("the SSE stream ended before its endpoint event")
            )
        elif not self._closing:
            self.sink.connection_lost(ConnectionClosed("the server closed the SSE stream"))

    def _take_endpoint(self, event: SseEvent) -> None:
        assert self._endpoint_ready is not None
        details = {"http": {"stream": "GET", "event": "endpoint", "event_id": event.id}}
        frame = Frame("http", "in", event.data, transport=details, note="endpoint event")
        endpoint = urljoin(self.target.url, event.data.decode("utf-8", errors="replace").strip())
        base, given = urlsplit(self.target.url), urlsplit(endpoint)
        if (base.scheme, base.netloc) != (given.scheme, given.netloc):
            # Posting elsewhere would send our messages (and credentials) to another origin.
            frame.flag("endpoint-origin", "error", f"endpoint {endpoint!r} is on another origin; refused")
            self.sink.record(frame)
            self._endpoint_ready.set_exception(
                TransportError(f"the endpoint event names another origin: {endpoint}")
            )
            return
        frame.note = f"endpoint {endpoint}"
        self.sink.record(frame)
        self._endpoint_ready.set_result(endpoint)

    async def send(self, raw: bytes, message: Any) -> Frame:
        assert self.endpoint is not None
        headers = self._base_headers()
        headers["Content-Type"] = _JSON
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        details = {"method": "POST", "url": self.endpoint, "headers": mask_headers(headers)}
        frame = self.sink.record(Frame("message", "out", raw, message=message, transport={"http": details}))
        if self._closing:
            raise ConnectionClosed("the transport is closed")
        self._spawn(self._post(raw, headers, message, frame.seq))
        return frame

    async def _post(self, raw: bytes, headers: dict[str, str], message: Any, seq: int) -> None:
        assert self.endpoint is not None
        ids = request_ids_in(message)
        try:
            headers = await self._authorized(headers, "POST", self.endpoint)
            request = self.client.build_request("POST", self.endpoint, content=raw, headers=headers)
            response = await self.client.send(request, stream=True)
        except _SEND_FAILED as exc:
            self._record_failure("POST failed", exc)
            self.sink.requests_failed(ids, TransportError(f"POST {self.endpoint} failed: {why(exc)}"))
            return
        try:
            head = self._head(response, seq)
            head.raw, _ = await self._body(response, head)
        except httpx.HTTPError as exc:
            self._record_failure("reading the reply failed", exc)
        finally:
            self.sink.record(head)
            await response.aclose()
        if response.status_code >= 300:
            self.sink.requests_failed(ids, HttpStatusError(response.status_code, head.raw))

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        await self._close_client()
