"""What both HTTP transports share: the client, headers and OAuth, response heads, bounded bodies.

The transports themselves: ``_streamable`` (Streamable HTTP, 2025-03-26 on) and ``_legacy_sse``
(HTTP+SSE, 2024-11-05).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from ._frames import Frame, head_of, too_large
from ._oversize import fail_reply
from ._sse import SseDecoder, SseEvent
from ._targets import HttpTarget, mask_headers
from ._tls import oauth_client, tls_context
from ._transport import FrameSink

if TYPE_CHECKING:  # the OAuth flow loads only for a target that asks for it
    from ._oauth import OAuthSession

__all__ = ["JSON", "SEND_FAILED", "SSE", "ClientFactory", "HttpBase", "content_type", "default_client", "why"]

JSON = "application/json"
SSE = "text/event-stream"
# What sending may raise: a URL httpx cannot parse (``0177.0.0.1``) is no HTTPError, and uncaught it would
# end the sending task and leave the request waiting for its timeout.
SEND_FAILED = (httpx.HTTPError, httpx.InvalidURL)


def why(exc: BaseException) -> str:
    """An HTTP failure in words, with a hint where the usual cause is known."""
    text = str(exc) or type(exc).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text:
        text += (
            " (a self-signed certificate or a private CA? Trust its certificate with a CA file, "
            "or switch TLS verification off for this server)"
        )
    return text


def content_type(response: httpx.Response) -> str:
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


class HttpBase:
    """The client, OAuth and recording both HTTP transports build on; each adds its own messages."""

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
        from ._oauth import OAuthSession

        own = self.client_factory is default_client
        self._oauth_http = oauth_client(self.target) if own else None
        http = self._oauth_http or self.client
        self.auth = OAuthSession(
            self.target.oauth, self.target.url, http, self.sink.record, hold=self.sink.clocks_held
        )

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

    def _deliver_event(
        self, event: SseEvent, stream: str, status: int, among: Sequence[int | str] = ()
    ) -> None:
        """Deliver one event of a stream; ``among``: the requests of the POST whose reply stream it is."""
        details = {"http": {"status": status, "stream": stream, "event": event.event, "event_id": event.id}}
        if event.retry is not None:
            details["http"]["retry"] = event.retry
        if event.oversized:
            frame = self.sink.record(too_large(event.data, self.sink.options.max_message_bytes, **details))
            fail_reply(self.sink, frame, event.data, among)
            return
        if event.event != "message" or not event.data.strip():
            note = f"SSE event {event.event!r}" if event.event != "message" else "SSE event without data"
            self.sink.record(Frame("http", "in", event.data, transport=details, note=note))
            return
        self.sink.receive(Frame("message", "in", event.data, transport=details))

    def _message_in(self, body: bytes, whole: bool, details: dict[str, Any]) -> Frame | None:
        """Deliver a body that should be a JSON-RPC message, or record its head when it is too large
        (and fail the request it answers, if the head says which): return that head's frame."""
        if whole:
            self.sink.receive(Frame("message", "in", body, transport={"http": details}))
            return None
        frame = self.sink.record(too_large(body, self.sink.options.max_message_bytes, http=details))
        fail_reply(self.sink, frame, body)
        return frame

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

    async def _close_client(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
        if self._oauth_http is not None:
            await self._oauth_http.aclose()
