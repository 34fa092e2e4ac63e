"""The OAuth debugger's runner: the flow a session uses, one step at a time, on a session of its own.

A debugger is a ``McpSession`` whose config says ``oauth_debug``: its owner runs no connection at
first but this, on ``OAuthStep`` commands. Its frames go through the owner's recorder like any
session's (the timeline, exports and share links work on it); its progress is kept in the session's
phases (``{"state": "oauth-step", "step", "outcome", "first", "last", "note"}``), which the page
reads. Steps: ``discovery`` (an unauthenticated request, for the 401 and its challenge), then the
engine's ``OAUTH_STEPS`` (``OAuthFlow.step``), then ``request``: the session connects with the
token, its first authenticated request (``initialize``, or ``server/discover`` when stateless).

The HTTP goes through the engine's OAuth client for the target (``oauth_client``), held to the
same egress rules as the session, never the web process's own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from sessions.engine import (
    OAUTH_STEPS,
    EngineError,
    Frame,
    HttpTarget,
    OAuthFailed,
    OAuthFlow,
    oauth_client,
)
from sessions.runtime import messages as m
from sessions.runtime import store
from sessions.servers import CLIENT_INFO, DEFAULT_PROTOCOL_VERSION

__all__ = ["DEBUG_STEPS", "OAuthDebugger", "busy", "progress"]

DEBUG_STEPS = ("discovery", *OAUTH_STEPS, "request")


class OAuthDebugger:
    """Runs the steps a person asks for, one task at a time."""

    def __init__(self, owner: Any, target: HttpTarget) -> None:
        # The session's ``SessionOwner`` (not imported: it imports this module): its recorder,
        # frame numbering, outbox and connection are the debugger's too.
        self.owner = owner
        self.target = target
        assert target.oauth is not None
        self.http = oauth_client(target)
        self.flow = OAuthFlow(target.oauth, target.url, self.http, self.record, state={})
        self.done: list[str] = []
        self.failed = False
        self.running: asyncio.Task[None] | None = None

    @property
    def next_step(self) -> str | None:
        if self.failed:
            return None
        return next((s for s in DEBUG_STEPS if s not in self.done), None)

    def record(self, frame: Frame) -> Frame:
        frame.seq = self.owner.engine_seq + 1
        self.owner._on_event(frame)
        return frame

    async def start(self, run_all: bool) -> m.Done:
        """Start the next step (or all that are left) in a task; say which.

        The page hears it is busy before the answer (a phase), so it follows the steps until done.
        """
        if self.running is not None and not self.running.done():
            raise EngineError("a step is running: wait for it to end")
        step = self.next_step
        if step is None:
            raise EngineError("the flow is over: start the debugger again to walk it once more")
        await self._busy(True)
        self.running = asyncio.ensure_future(self._run(run_all))
        return m.Done({"step": step})

    async def _run(self, run_all: bool) -> None:
        try:
            while (step := self.next_step) is not None:
                await self._one(step)
                if not run_all:
                    return
        finally:
            await self._busy(False)

    async def _busy(self, busy: bool) -> None:
        await store.append_phases(self.owner.pk, [{"state": "oauth-run", "busy": busy, "wall": time.time()}])

    async def _one(self, step: str) -> None:
        owner = self.owner
        first = owner.base + owner.engine_seq + 1
        await self._phase(step, "running", first, first - 1)
        note = ""
        try:
            if step == "discovery":
                await self._discover()
            elif step == "request":
                await self._request()
                if owner.client is None or owner.client.state != "ready":
                    raise OAuthFailed(owner._stop_reason or "the authenticated request failed")
            else:
                await self.flow.step()
        except (OAuthFailed, EngineError, httpx.HTTPError) as exc:
            self.failed = True
            note = str(exc) or type(exc).__name__
        self.done.append(step)
        await owner._until_stored()
        last = owner.base + owner.engine_seq
        await self._phase(step, "failed" if self.failed else "done", first, last, note)

    async def _phase(self, step: str, outcome: str, first: int, last: int, note: str = "") -> None:
        phase = {
            "state": "oauth-step",
            "step": step,
            "outcome": outcome,
            "first": first,
            "last": last,
            "note": note,
            "wall": time.time(),
            "seq": last,
        }
        await store.append_phases(self.owner.pk, [phase])
        self.owner.journal.publish(m.StateChanged("", f"oauth {step}: {outcome}"))

    async def _discover(self) -> None:
        """An unauthenticated initialize, as a client's first request: the 401 and its challenge."""
        message = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": self.owner.config.get("protocol_version") or DEFAULT_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": CLIENT_INFO,
            },
        }
        await self.flow.discover(message, dict(self.target.headers))

    async def _request(self) -> None:
        """Keep the token as a session's would be kept, then connect with it: the first request."""
        owner = self.owner
        assert self.target.oauth is not None and self.target.oauth.store is not None
        keep = ("clients", "issuer", "token", "granted_scope", "resource")
        state = self.flow.state
        if state.get("client") and state["client"].get("how") != "pre-registered":
            clients = {**state.get("clients", {}), state["client"]["issuer"]: state["client"]}
            state = {**state, "clients": clients}
        key = self.target.oauth.store_key or ""
        self.target.oauth.store.save(key, {k: state[k] for k in keep if k in state})
        owner.base += owner.engine_seq  # the connection numbers its frames from 1 again
        owner.engine_seq = 0
        await owner._connect()

    async def aclose(self) -> None:
        if self.running is not None:
            self.running.cancel()
            await asyncio.gather(self.running, return_exceptions=True)
        await self.http.aclose()


def busy(phases: list[Any]) -> bool:
    """Whether the debugger is running steps, from a session's phases."""
    runs = [p for p in phases if isinstance(p, dict) and p.get("state") == "oauth-run"]
    return bool(runs and runs[-1].get("busy"))


def progress(phases: list[Any]) -> dict[str, dict[str, Any]]:
    """Each debugger step's latest phase (outcome, frames, note), from a session's phases."""
    steps: dict[str, dict[str, Any]] = {}
    for phase in phases:
        if not isinstance(phase, dict) or phase.get("state") != "oauth-step":
            continue
        if phase.get("step") in DEBUG_STEPS:
            steps[str(phase["step"])] = phase
    return steps
