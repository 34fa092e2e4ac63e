"""Ask a model: one HTTP request, streamed when the server streams, read into a ``Reply``."""

from __future__ import annotations

import functools
import json
import math
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sessions.providers import _anthropic, _openai
from sessions.providers._sse import SseParser
from sessions.providers._types import ChatRequest, ModelConfig, ProviderError, Reply

if TYPE_CHECKING:
    import httpx

MAX_BODY = 4 * 1024 * 1024  # a chat answer bigger than this is not one
# A stream repeats its envelope (ids, model, a choice) around every token: a long answer is many MiB.
MAX_STREAM = 64 * 1024 * 1024


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every request: making one loads the CA bundle, which took ~50 ms a request."""
    import httpx

    return httpx.create_ssl_context()


def _redact(text: str, config: ModelConfig) -> str:
    """A server may echo what it was sent: the key never reaches a page or a log through its answer."""
    return text.replace(config.api_key, "[redacted]") if config.api_key else text


def _api(config: ModelConfig) -> Any:
    return _anthropic if config.api == "anthropic" else _openai


async def complete(
    config: ModelConfig,
    request: ChatRequest,
    *,
    stream: bool = True,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_text: Callable[[str], Awaitable[None]] | None = None,
    text_every: float = 0.25,
) -> Reply:
    """The model's answer to ``request``; ``ProviderError`` says why there is none (unreachable, too
    slow, an HTTP error, an answer that is not the API's). ``on_text`` hears a streamed answer's text
    so far when it has grown, at most every ``text_every`` seconds, and once it is whole."""
    import httpx  # here: a start of the app that chats with no model does not load it

    api = _api(config)
    url = api.endpoint(config)
    deadline = clock() + config.timeout
    timeout = httpx.Timeout(config.timeout, connect=min(config.timeout, 10.0))
    if transport is None and config.connect is not None:
        transport = config.connect()
    try:
        async with (
            httpx.AsyncClient(
                timeout=timeout, follow_redirects=False, transport=transport, verify=_tls()
            ) as client,
            client.stream(
                "POST", url, json=api.body(config, request, stream), headers=api.headers(config)
            ) as answer,
        ):
            if answer.status_code != 200:
                text = (await answer.aread())[:2000].decode("utf-8", "replace")
                raise ProviderError(_http_error(config, api, answer.status_code, text))
            kind = answer.headers.get("content-type", "")
            if "text/event-stream" in kind:
                heard = _Heard(on_text, text_every, clock)
                return await _streamed(config, api, answer, deadline, clock, heard)
            data = b""
            async for piece in answer.aiter_bytes():
                data += piece
                if len(data) > MAX_BODY:
                    raise ProviderError(f"{config.label} answered more than {MAX_BODY // 1024 // 1024} MiB")
    except httpx.TimeoutException:
        raise ProviderError(f"{config.label} did not answer within {config.timeout:g} s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ProviderError(f"cannot reach {config.label} at {url}: {type(exc).__name__}") from None
    try:
        parsed = json.loads(data)
    except ValueError:
        snippet = _redact(data[:120].decode("utf-8", "replace"), config)
        raise ProviderError(f"{config.label} answered something that is not JSON: {snippet!r}") from None
    return api.parse_response(parsed)  # type: ignore[no-any-return]


class _Heard:
    """Who hears a streamed answer's text, and when they last did: joining the text costs its length."""

    def __init__(
        self, on_text: Callable[[str], Awaitable[None]] | None, every: float, clock: Callable[[], float]
    ) -> None:
        self.on_text, self.every, self.clock = on_text, every, clock
        self.pieces, self.at = 0, -math.inf

    async def tell(self, assembler: Any, whole: bool = False) -> None:
        if self.on_text is None or assembler.pieces == self.pieces:
            return
        if whole or self.clock() - self.at >= self.every:
            self.pieces, self.at = assembler.pieces, self.clock()
            await self.on_text(assembler.text())


async def _streamed(
    config: ModelConfig,
    api: Any,
    answer: httpx.Response,
    deadline: float,
    clock: Callable[[], float],
    heard: _Heard,
) -> Reply:
    parser = SseParser()
    assembler = api.StreamAssembler()
    size = 0
    async for line in answer.aiter_lines():
        size += len(line)
        # httpx's read timeout is per read: a server that trickles bytes for ever is cut here.
        if clock() > deadline:
            raise ProviderError(f"{config.label} did not finish its answer within {config.timeout:g} s")
        if size > MAX_STREAM:
            raise ProviderError(f"{config.label} streamed more than {MAX_STREAM // 1024 // 1024} MiB")
        event = parser.feed(line)
        if event is not None:
            _feed(api, assembler, event.event, _redact(event.data, config))
            await heard.tell(assembler)
    last = parser.flush()
    if last is not None:
        _feed(api, assembler, last.event, _redact(last.data, config))
    await heard.tell(assembler, whole=True)
    return assembler.result()  # type: ignore[no-any-return]


def _feed(api: Any, assembler: Any, event: str, data: str) -> None:
    if api is _anthropic:
        assembler.feed(event, data)
    else:
        assembler.feed(data)


def _http_error(config: ModelConfig, api: Any, status: int, text: str) -> str:
    try:
        said = api.error_text(json.loads(text))
    except ValueError:
        said = ""
    said = _redact(said or text.strip()[:200], config)
    return f"{config.label} answered HTTP {status}" + (f": {said}" if said else "")
