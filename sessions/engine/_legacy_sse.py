"""The legacy HTTP+SSE transport (2024-11-05): a GET event stream names, in its first event, the
endpoint every message is POSTed to."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from ._errors import ConnectionClosed, HttpStatusError, TransportError
from ._frames import Frame
from ._http import JSON, SEND_FAILED, SSE, ClientFactory, HttpBase, content_type, default_client, why
from ._sse import SseEvent
from ._targets import HttpTarget, mask_headers
from ._transport import FrameSink, request_ids_in

__all__ = ["LegacySseTransport"]


class LegacySseTransport(HttpBase):
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
            headers["Accept"] = SSE
            try:
                headers = await self._authorized(headers, "GET", self.target.url)
                out = self._record_request("GET", self.target.url, headers, "open the SSE stream")
                response = await self.client.send(
                    self.client.build_request("GET", self.target.url, headers=headers), stream=True
                )
            except SEND_FAILED as exc:
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
        if response.status_code != 200 or content_type(response) != SSE:
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
        headers["Content-Type"] = JSON
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
        except SEND_FAILED as exc:
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
