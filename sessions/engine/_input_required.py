"""Stateless mode: follow ``input_required`` answers until a request gets its final result.

A tools/call, prompts/get or resources/read may be answered ``input_required`` with requests
embedded in the result. The driver answers them (as server→client requests are answered),
retries the request with the answers and the echoed ``requestState``, and repeats, up to
``ClientOptions.input_required_max_rounds`` rounds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ._clock import Clock, sleep
from ._errors import InputRequiredRoundsExceeded, McpError, RequestCancelled
from ._frames import Frame
from ._requests import Abandon, Outgoing, RequestHandle, RequestOptions, RequestTable

__all__ = ["InputRequiredDriver"]

# A requestState without requests: ask again after this pause, doubling up to the cap.
FIRST_POLL = 0.05
MAX_POLL = 0.25


class SendLeg(Protocol):
    """Send one leg of a request (the original, or a retry) and return its table entry."""

    def __call__(
        self, method: str, params: dict[str, Any] | None, options: RequestOptions, note: str | None = None
    ) -> Awaitable[Outgoing]: ...


class Resolve(Protocol):
    """Answer one server→client request (``ServerRequests.resolve``)."""

    def __call__(
        self, request_id: int | str, method: str, params: dict[str, Any], frame_seq: int, *, withdrawn: str
    ) -> Awaitable[dict[str, Any]]: ...


class InputRequiredDriver:
    """Drives the requests of one session that a stateless server may answer ``input_required``."""

    def __init__(
        self,
        *,
        send: SendLeg,
        resolve: Resolve,
        abandon: Abandon,
        record: Callable[[Frame], Frame],
        requests: RequestTable,
        clock: Clock,
        max_rounds: int,
    ) -> None:
        self._send = send
        self._resolve = resolve
        self._abandon = abandon
        self._record = record
        self._requests = requests
        self._clock = clock
        self._max_rounds = max_rounds

    async def drive(
        self, handle: RequestHandle, method: str, params: dict[str, Any] | None, options: RequestOptions
    ) -> None:
        """Fulfil the embedded requests and retry, until the final result resolves ``handle``."""
        try:
            result = await asyncio.shield(handle.leg.future)
            rounds, delay = 0, FIRST_POLL
            while isinstance(result, dict) and result.get("resultType") == "input_required":
                rounds += 1
                if rounds > self._max_rounds:
                    raise InputRequiredRoundsExceeded(
                        f"{method} still required input after {self._max_rounds} rounds"
                    )
                requests = result.get("inputRequests")
                state = result.get("requestState")
                retry = {
                    k: v for k, v in (params or {}).items() if k not in ("inputResponses", "requestState")
                }
                if isinstance(requests, dict) and requests:
                    delay = FIRST_POLL
                    responses = await self._fulfil(requests, handle.leg.reply_seq or 0)
                    retry["inputResponses"] = responses
                    what = f"{len(responses)} input response{'s' if len(responses) != 1 else ''}"
                else:
                    # Only requestState: the server is working; ask again after a short, growing pause.
                    await sleep(self._clock, delay)
                    delay = min(delay * 2, MAX_POLL)
                    what = "no input responses"
                if isinstance(state, str):
                    retry["requestState"] = state
                note = f"retry of request {handle.id!r} after input was required (round {rounds}, {what})"
                handle.leg = await self._send(method, retry, options, note)
                result = await asyncio.shield(handle.leg.future)
        except asyncio.CancelledError:
            reason = handle.cancel_reason or "cancelled"
            if handle.leg.id in self._requests.pending:
                await self._abandon(handle.leg, RequestCancelled(reason), reason)
            handle.fail(RequestCancelled(reason))
        except BaseException as exc:
            handle.fail(exc)
        else:
            handle.finish(result)

    async def _fulfil(self, requests: dict[str, Any], frame_seq: int) -> dict[str, Any]:
        """Answer the requests embedded in an input_required result, concurrently; the first refusal wins."""
        keys = list(requests)
        tasks = [asyncio.ensure_future(self._input_response(key, requests[key], frame_seq)) for key in keys]
        try:
            answers = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return dict(zip(keys, answers, strict=True))

    async def _input_response(self, key: str, request: Any, frame_seq: int) -> dict[str, Any]:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise McpError(-32602, f"input request {key!r} is not a request object with a method")
        params = request.get("params")
        try:
            return await self._resolve(
                key,
                request["method"],
                params if isinstance(params, dict) else {},
                frame_seq,
                withdrawn="the request that needed this input was cancelled or refused elsewhere",
            )
        except McpError as exc:
            self._record(
                Frame(
                    "state",
                    "local",
                    transport={"state": "input-refused"},
                    note=f"input request {key!r} ({request['method']}) refused: {exc.message}; not retrying",
                )
            )
            raise
