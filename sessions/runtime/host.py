"""The runtime: take session starts and run one owner task per live session; the embedded set-up.

In the embedded default it runs inside the web process, on daphne's event loop; in the hosted set-up
``manage.py run_engine_worker`` runs the same loop in a worker process behind Redis.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import sys
import threading
from typing import Any

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings

from sessions.engine import ServerProcess, StdioTarget, WarmStarts, kill_tree, warm_up
from sessions.runtime import store
from sessions.runtime.messages import RUNTIME_CHANNEL, StartSession, WarmStart
from sessions.runtime.owner import SessionOwner, confinement
from sessions.runtime.taps import TapIngester
from sessions.servers import build_target

__all__ = ["Runtime", "ensure_embedded_runtime", "stop_embedded_runtime", "warm_up_in_background"]


class Runtime:
    """Receive session starts and run one owner task per live session."""

    def __init__(self, layer: BaseChannelLayer | None = None, *, worker: str = "") -> None:
        self.layer = layer or get_channel_layer()
        self.worker = worker
        """The hosted engine worker's name (heartbeats in runtime/workers.py); empty when embedded."""
        self.owners: dict[int, SessionOwner] = {}
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.warm = WarmStarts()
        self._warming: set[asyncio.Task[bool]] = set()

    async def serve(self) -> None:
        while True:
            message = await self.layer.receive(RUNTIME_CHANNEL)
            if message.get("type") == StartSession.NAME:
                self.warm.connecting(str(message.get("intent", "")))
                self.start(int(message["session_id"]))
            elif message.get("type") == WarmStart.NAME:
                self.warm_start(message["config"], str(message.get("intent", "")))

    def warm_start(self, config: dict[str, Any], intent: str = "") -> None:
        """Start the config's stdio server for a connect that is about to come (see engine/_warm.py)."""
        try:
            target = build_target(config, confinement())
        except (KeyError, TypeError, ValueError):
            return  # the connect itself will say what is wrong with it
        if isinstance(target, StdioTarget) and target.sandbox is None:
            task = asyncio.create_task(self.warm.offer(target, intent), name="warm-start")
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    def start(self, session_pk: int) -> None:
        existing = self.owners.get(session_pk)
        if existing is not None:
            if existing.stopping:
                # Reconnect right after Disconnect: the old owner is still writing how it ended
                # (the page already shows "closed"). Start the new one when the old one is done.
                self.tasks[session_pk].add_done_callback(lambda _: self.start(session_pk))
            return
        owner = SessionOwner(self.layer, session_pk, worker=self.worker, warm=self.warm)
        self.owners[session_pk] = owner
        task = asyncio.create_task(owner.run(), name=f"owner-{session_pk}")
        self.tasks[session_pk] = task

        def forget(_: asyncio.Task[None]) -> None:
            self.owners.pop(session_pk, None)
            self.tasks.pop(session_pk, None)

        task.add_done_callback(forget)

    async def shutdown(self, reason: str = "the inspector stopped") -> None:
        """Close every live session properly, recording how each ended.

        The cyclic garbage collector waits meanwhile: closing a thousand sessions allocated enough to
        run it some 350 times, three of them over the whole heap, 40% of the stop (more the more
        sessions: each full pass is longer), and not one of those found a cycle to free. What the stop
        frees goes by reference counting as before; a cycle, if any, waits for the next collection.
        """
        await self.warm.close()
        for owner in list(self.owners.values()):
            if owner.recorder is not None:
                owner.recorder.hold()  # nobody watches a stopping process: its last frames in one write
            owner.stop(reason)
        collecting = gc.isenabled()
        gc.disable()
        try:
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        finally:
            if collecting:
                gc.enable()

    def lose_all(self, reason: str) -> None:
        """End every live session as lost (its recorded frames kept): this worker cannot take their
        commands, and the reapers are about to say so."""
        for owner in self.owners.values():
            owner.lose(reason)

    def kill_processes(self) -> None:
        """Last resort at exit: no stdio server, nor anything it started, may outlive the inspector."""
        self.warm.kill_all()
        for owner in self.owners.values():
            server = getattr(getattr(owner.client, "transport", None), "server_process", None)
            if isinstance(server, ServerProcess):
                kill_tree(server)


_warming: threading.Thread | None = None


def warm_up_in_background() -> None:
    """Load the engine's schema checks on a thread now (once a process), not in the first handshake.

    For a process that runs sessions: the web process of the embedded set-up, an engine worker.
    """
    global _warming
    if _warming is None:
        _warming = threading.Thread(target=warm_up, name="mcp-schema-warm-up", daemon=True)
        _warming.start()


_embedded: tuple[asyncio.AbstractEventLoop, Runtime, asyncio.Task[None]] | None = None
_hooks_installed = False


def ensure_embedded_runtime() -> Runtime | None:
    """Start the in-process runtime once per event loop, unless a separate worker runs it."""
    global _embedded
    if not settings.INSPECTOR_EMBEDDED_RUNTIME:
        return None
    loop = asyncio.get_running_loop()
    if _embedded is not None and _embedded[0] is loop and not _embedded[2].done():
        return _embedded[1]
    runtime = Runtime()
    _embedded = (loop, runtime, loop.create_task(runtime.serve(), name="mcp-runtime"))
    _start_taps(runtime)
    _stop_with_the_server()
    return runtime


_taps: asyncio.Task[None] | None = None


def _start_taps(runtime: Runtime) -> None:
    """Take the frames of local taps (``mcp-inspector tap``) as sessions: the local mode's alone."""
    global _taps
    if settings.INSPECTOR_HOSTED:
        return
    _taps = asyncio.get_running_loop().create_task(TapIngester(runtime.layer).serve(), name="mcp-taps")


def _kill_embedded_processes() -> None:
    if _embedded is not None:
        _embedded[1].kill_processes()


def _stop_with_the_server() -> None:
    """End every session when the server stops: gracefully under daphne, by force at exit.

    Installed once per process; the hooks act on whichever embedded runtime runs then.
    """
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_kill_embedded_processes)
    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import defer, reactor

    def shutdown() -> defer.Deferred[None]:
        return defer.Deferred.fromFuture(asyncio.ensure_future(stop_embedded_runtime()))

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)  # type: ignore[attr-defined,arg-type]


async def stop_embedded_runtime(reason: str = "the inspector stopped") -> None:
    """Stop taking sessions and close every live one (tests, and servers that stop)."""
    global _embedded, _taps
    if _embedded is None:
        return
    _, runtime, serving = _embedded
    _embedded = None
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    if _taps is not None:
        taps, _taps = _taps, None
        taps.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await taps
    await runtime.shutdown(reason)
    await store.close_connections()
