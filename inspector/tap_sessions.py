"""Hosted tap sessions: each host connection through a tap endpoint, recorded as a live session.

The tap route (``inspector/tap_route.py``) hands each exchange's pieces to a ``HostedTap`` as the local
HTTP tap's proxy hands them to its spool: the same items (``http-request``, ``http-response``,
``http-chunk``, ``http-end``...), turned into frames by the same code (``inspector.tap._http_spool``'s
shapes, judged by ``TapObserver`` on both sides) and stored by a ``Recorder``, which publishes each
stored batch to the session's group: the team's tabs follow it as any live session.

A host connection is an MCP session id (``Mcp-Session-Id``), or a run of requests without one (from an
``initialize`` to the next). ``TapHub`` knows the connections this web process serves: it is this
process's own, like the runtime's owners; with several web processes, a connection whose requests
land in another one is still one session: that process hands their items to this one
(``inspector/tap_shared.py``).

A web process that records tap sessions beats as an engine worker does (an ``EngineWorker`` row of role
``web``, named in each session's ``worker``), and owns them as one does (``worker_channel``: its own
channel, where the other processes' items and the pages' breakpoint commands arrive, and which its
recorder's writes must still find): when it dies, the reaper of another process marks them lost,
saying so, and if it was only paused it finds them taken from it and records nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from channels.layers import BaseChannelLayer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from inspector import tap_shared
from inspector.tap._http_spool import HttpSpool
from inspector.tap._options import TapOptions
from inspector.tap_gates import Controls
from sessions.engine import Frame, TapObserver
from sessions.frames import frame_row, storable
from sessions.models import EngineWorker, McpSession
from sessions.runtime import messages as m
from sessions.runtime import store, tap_control, workers
from sessions.runtime.recorder import Recorder
from sessions.runtime.taps import STATUS_OF, TAP_TRANSPORT, _Facts

__all__ = ["IDLE", "Endpoint", "HostedTap", "TapHub"]

log = logging.getLogger(__name__)

IDLE = 600.0
"""Seconds a host connection with nothing in flight stays live; then its session ends."""
SWEEP = 15.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """What the tap route read of a ``teams.TapEndpoint`` row for one request."""

    pk: int
    name: str
    url: str
    team_id: int
    owner_id: int | None
    revoked: bool
    egress_allow: tuple[str, ...] = ()


class _Frames(HttpSpool):
    """The HTTP tap spool's item → frames step alone: no thread, no file."""

    def made(self, observer: TapObserver, what: str, payload: Any, wall: float, mono: float) -> list[Frame]:
        return self._frames(observer, {}, what, payload, wall, mono)


@dataclass
class _Pending:
    items: list[tuple[str, tuple[Any, ...], float, float]] = field(default_factory=list)
    ending: str | None = None


class HostedTap:
    """One host connection: its frames made in order and recorded into its session."""

    def __init__(self, hub: TapHub, endpoint: Endpoint, listen_url: str, sid: str | None) -> None:
        self.hub = hub
        self.endpoint = endpoint
        self.listen_url = listen_url
        self.sid = sid
        self.ids: Iterator[int | str] = itertools.count(1)
        self.in_flight = 0
        self.last = time.monotonic()
        self.pending = _Pending()
        self.wake = asyncio.Event()
        self.public_id = ""
        self.pk: int | None = None
        self.shared = False  # its session id and session are in a ``TapConnection`` row
        self.ended = asyncio.Event()
        options = TapOptions(command="", args=[], name=endpoint.name, url=endpoint.url)
        self.frames = _Frames(options, queue.SimpleQueue())
        self.observer = TapObserver(max_message_bytes=settings.INSPECTOR_MAX_MESSAGE_BYTES)
        # Made now, not when the task runs: the session starts before the request that opened it.
        self.first = self.observer.watch_http(self.listen_url, self.endpoint.url)
        self.controls = Controls(self.put_at, f"{endpoint.name} {endpoint.url}")
        self.task = asyncio.create_task(self._run(), name=f"hosted-tap-{endpoint.pk}")

    def put(self, what: str, *payload: Any) -> None:
        """An item of an exchange, as ``inspector.tap._proxy.Proxy`` queues them (after it was forwarded)."""
        self.put_at(what, payload, time.time(), time.monotonic())

    def put_at(self, what: str, payload: tuple[Any, ...], wall: float, mono: float) -> None:
        """An item, timed when it passed (in another web process, for a connection shared with one)."""
        self.last = time.monotonic()
        self.pending.items.append((what, payload, wall, mono))
        self.wake.set()

    def share(self) -> None:
        """Once the connection has both its session and its id, the other web processes can find it."""
        if self.pk is None or self.sid is None or self.shared:
            return
        self.shared = True
        task = asyncio.ensure_future(tap_shared.save(self.endpoint.pk, self.sid, self.pk))
        task.add_done_callback(lambda t: t.exception())

    def take(self, items: list[Any]) -> None:
        """Another web process's items of this connection, timed on this process's clock."""
        now_wall, now_mono = time.time(), time.monotonic()
        for what, payload, wall in items:
            if what == "end":
                self.end(str(payload[0]))
                continue
            self.put_at(str(what), tuple(payload), float(wall), now_mono - max(0.0, now_wall - float(wall)))

    def end(self, note: str) -> None:
        """The connection is over: what is queued is recorded, then the session ends with ``note``."""
        if self.pending.ending is None:
            self.pending.ending = note
            self.wake.set()

    async def _run(self) -> None:
        recorder: Recorder | None = None
        try:
            first = self.first
            first.transport["tap"] = {"endpoint": self.endpoint.pk, "name": self.endpoint.name}
            owner = await self.hub.listening()
            pk, group, self.public_id = await _new_session(self.endpoint, self.sid, self.hub.name, owner)
            self.pk = pk
            self.hub.by_pk[pk] = self
            self.share()
            recorder = Recorder(
                pk, group, self.hub.layer, owner_channel=owner, disowned=lambda: self.end("disowned")
            )
            recorder.start()
            self.controls.watch(self.hub.layer, group)
            facts, written = _Facts(), _Written(owner)
            made: list[Frame] = [first]
            waiting: list[Frame] = []
            while True:
                waiting.extend(made)
                # A message the tap changed waits for its frame as sent, so both name each other.
                if not self.frames.tapped or self.pending.ending is not None:
                    for frame in waiting:
                        facts.see(frame)
                        recorder.add(frame_row(frame, 0))
                    waiting = []
                await written.write(pk, facts, group, self.hub.layer)
                if facts.ended:
                    break
                await self.wake.wait()
                self.wake.clear()
                items, self.pending.items = self.pending.items, []
                made = []
                for what, payload, wall, mono in items:
                    made.extend(self.frames.made(self.observer, what, payload, wall, mono))
                if self.pending.ending is not None and not self.pending.items:
                    made.append(self.observer.stopped(self.pending.ending))
            await recorder.close()
            await self.controls.close(self.hub.layer, group)
            if recorder.disowned:
                return  # declared lost while this process was away: it is no longer ours to end
            note = str(facts.fields.get("status_note") or self.pending.ending or "")
            await _finish(pk, note, owner)
            with contextlib.suppress(Exception):
                await self.hub.layer.group_send(group, m.encode_event(m.StateChanged("closed", note)))
        except Exception:
            log.exception("recording a hosted tap session of endpoint %s failed", self.endpoint.pk)
            if recorder is not None:
                with contextlib.suppress(Exception):
                    await recorder.close()
        finally:
            self.ended.set()
            self.hub.forget(self)


@dataclass
class _Written:
    """The session row's fields and phases as last written, so only what changed is written."""

    owner: str
    fields: dict[str, Any] = field(default_factory=dict)
    phases: int = 0

    async def write(self, pk: int, facts: _Facts, group: str, layer: BaseChannelLayer) -> None:
        fields = {k: v for k, v in facts.fields.items() if self.fields.get(k) != v}
        if fields.get("status") not in (None, *McpSession.LIVE):
            fields.pop("status")  # the end is written once every frame is stored (``_finish``)
        phases = facts.phases[self.phases :]
        if not fields and not phases:
            return
        if not await store.append_phases(pk, storable(phases), owner_channel=self.owner, **storable(fields)):
            return  # no longer this process's (declared lost): nothing of it is written
        self.fields.update(fields)
        self.phases = len(facts.phases)
        event = m.StateChanged(str(fields.get("status", "")), str(fields.get("status_note", "")))
        with contextlib.suppress(Exception):
            await layer.group_send(group, m.encode_event(event))


@store.in_db_thread
def _new_session(endpoint: Endpoint, sid: str | None, worker: str, owner: str) -> tuple[int, str, str]:
    tap = {"endpoint": endpoint.pk, "name": endpoint.name, "url": endpoint.url, "mcp_session_id": sid or ""}
    workers.beat(worker, EngineWorker.Role.WEB)  # the row the reaper reads, before a session names it
    with transaction.atomic():
        session = McpSession.objects.create(
            team_id=endpoint.team_id,
            owner_id=endpoint.owner_id,
            name=storable(endpoint.name)[:200],
            config=storable({"tap": tap}),
            transport_name=TAP_TRANSPORT,
            status=McpSession.Status.CONNECTING,
            status_note="a host connected through the tap endpoint",
            worker=worker,
            worker_channel=owner,
        )
    return session.pk, session.group_name, str(session.public_id)


@store.in_db_thread
def _finish(pk: int, note: str, owner: str) -> None:
    """The session ends, unless it already did (its endpoint revoked, or declared lost, meanwhile)."""
    McpSession.objects.filter(pk=pk, status__in=McpSession.LIVE, worker_channel=owner).update(
        status=STATUS_OF["closed"], status_note=note or "the host connection ended", ended=timezone.now()
    )


class TapHub:
    """This web process's host connections through tap endpoints, and an upstream client per endpoint."""

    def __init__(self, layer: BaseChannelLayer) -> None:
        self.layer = layer
        self.name = f"{workers.new_name()}:web"
        """This process's name among the heartbeats, and its tap sessions' owner."""
        self._beater: asyncio.Task[None] | None = None
        self.channel: asyncio.Future[str] | None = None
        """This process's channel, its tap sessions' ``worker_channel``: where the others send their items."""
        self.by_pk: dict[int, HostedTap] = {}
        self.remotes: dict[tuple[int, str], tap_shared.RemoteTap] = {}
        self.by_sid: dict[tuple[int, str], HostedTap] = {}
        self.runs: dict[int, HostedTap] = {}  # an endpoint's connection that has no session id (yet)
        self.clients: dict[int, tuple[tuple[str, ...], httpx.AsyncClient]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    async def find(
        self, endpoint: Endpoint, listen_url: str, sid: str | None, initialize: bool
    ) -> HostedTap | tap_shared.RemoteTap:
        """``tap_for``, or the connection another web process records (looked up again each beat)."""
        if sid and (endpoint.pk, sid) not in self.by_sid:
            key = (endpoint.pk, sid)
            remote = self.remotes.get(key)
            if remote is not None and time.monotonic() - remote.found < settings.INSPECTOR_WORKER_HEARTBEAT:
                return remote
            self.remotes.pop(key, None)
            mine = await self.listening()
            owner = await tap_shared.owner_of(endpoint.pk, sid)
            if remote is not None and (owner is None or (remote.pk, remote.channel) != owner):
                remote.close()
                remote = None
            if owner is not None and owner[1] != mine:
                if remote is None:
                    remote = tap_shared.RemoteTap(self.layer, owner[1], owner[0], sid, self.name)
                remote.found = time.monotonic()
                self.remotes[key] = remote
                return remote
        return self.tap_for(endpoint, listen_url, sid, initialize)

    async def listening(self) -> str:
        """This process's channel, made (and listened on) at its first tap session."""
        if self.channel is None:
            self.channel = asyncio.get_running_loop().create_future()
            try:
                name = await self.layer.new_channel()
            except BaseException as exc:
                self.channel.set_exception(exc)
                self.channel.exception()  # retrieved: the next caller sees it
                self.channel = None
                raise
            self.channel.set_result(name)
            task = asyncio.create_task(self._listen(name), name="hosted-tap-channel")
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return await asyncio.shield(self.channel)

    async def _listen(self, channel: str) -> None:
        """Take the items other web processes send of this process's connections."""
        while True:
            try:
                message = await self.layer.receive(channel)
            except Exception as exc:  # the channel layer heals; until then the others' items wait
                log.warning("receiving tap items failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            tap = self.by_pk.get(message.get("session"))
            if message.get("type") == tap_control.HOSTED_COMMAND and isinstance(message.get("reply"), str):
                task = asyncio.create_task(self._command(tap, message))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())
            elif tap is not None and message.get("type") == tap_shared.ITEMS and message.get("items"):
                tap.take(list(message["items"]))

    async def _command(self, tap: HostedTap | None, message: dict[str, Any]) -> None:
        """A breakpoint or fault command from the session's page; answered on its reply channel."""
        command = message.get("command")
        if tap is None or tap.pending.ending is not None:
            answer = {"ok": False, "error": "the host connection has ended"}
        elif not isinstance(command, dict):
            answer = {"ok": False, "error": "a command is a JSON object"}
        else:
            answer = await tap.controls.command(command)
        await self.layer.send(message["reply"], {"type": "tap.answer", **answer})

    def tap_for(self, endpoint: Endpoint, listen_url: str, sid: str | None, initialize: bool) -> HostedTap:
        """The connection a request belongs to: its session id's, or the run without one (a new one
        from an ``initialize``)."""
        self._sweep_soon()
        self._beat_soon()
        if sid:
            tap = self.by_sid.get((endpoint.pk, sid))
            if tap is None or tap.pending.ending is not None:
                tap = self.by_sid[(endpoint.pk, sid)] = HostedTap(self, endpoint, listen_url, sid)
            return tap
        tap = self.runs.get(endpoint.pk)
        if tap is None or initialize or tap.pending.ending is not None:
            if tap is not None and tap.in_flight == 0 and tap.sid is None:
                tap.end("the host started a new connection")
            tap = self.runs[endpoint.pk] = HostedTap(self, endpoint, listen_url, None)
        return tap

    def bind(self, tap: HostedTap, sid: str) -> None:
        """The server gave the connection a session id: the host's next requests carry it."""
        if tap.sid is None:
            tap.sid = sid
            self.by_sid[(tap.endpoint.pk, sid)] = tap
            if self.runs.get(tap.endpoint.pk) is tap:
                del self.runs[tap.endpoint.pk]
            tap.share()

    def forget(self, tap: HostedTap) -> None:
        if tap.pk is not None and self.by_pk.get(tap.pk) is tap:
            del self.by_pk[tap.pk]
        if tap.sid is not None and self.by_sid.get((tap.endpoint.pk, tap.sid)) is tap:
            del self.by_sid[(tap.endpoint.pk, tap.sid)]
        if self.runs.get(tap.endpoint.pk) is tap:
            del self.runs[tap.endpoint.pk]

    def taps_of(self, endpoint_pk: int) -> list[HostedTap]:
        every = {*self.by_sid.values(), *self.runs.values()}
        return [t for t in every if t.endpoint.pk == endpoint_pk]

    def revoked(self, endpoint_pk: int) -> None:
        """The endpoint was revoked: its connections here end, and its upstream client closes."""
        for tap in self.taps_of(endpoint_pk):
            tap.end("the tap endpoint was revoked")
        kept = self.clients.pop(endpoint_pk, None)
        if kept is not None:
            task = asyncio.create_task(kept[1].aclose())
            task.add_done_callback(lambda t: t.exception())

    def client(self, endpoint: Endpoint) -> httpx.AsyncClient:
        """The endpoint's upstream client: every connection it opens is held to the team's egress rules."""
        kept = self.clients.get(endpoint.pk)
        if kept is not None and kept[0] == endpoint.egress_allow:
            return kept[1]
        from sessions.engine._egress_net import confined_transport
        from sessions.teams.tap_endpoints import egress_policy

        if kept is not None:  # the team's allow-list changed: connections made under the old one go
            task = asyncio.create_task(kept[1].aclose())
            task.add_done_callback(lambda t: t.exception())
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
        transport = confined_transport(egress_policy(list(endpoint.egress_allow)), verify=True, limits=limits)
        # No read timeout: SSE streams idle for minutes, and the host times its own requests.
        timeout = httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
        client = httpx.AsyncClient(
            transport=transport, timeout=timeout, follow_redirects=False, trust_env=False
        )
        client.headers.clear()  # no Accept, User-Agent, Accept-Encoding of httpx's own
        self.clients[endpoint.pk] = (endpoint.egress_allow, client)
        return client

    def _beat_soon(self) -> None:
        if self._beater is None or self._beater.done():
            self._beater = asyncio.create_task(self._beat(), name="hosted-tap-heartbeat")

    async def _beat(self) -> None:
        """Beat for as long as this process lives, once it has recorded a tap session: a row kept fresh
        costs one write a beat, and one retired while a session starts would leave it unwatched."""
        beat = store.in_db_thread(workers.beat)
        while True:
            try:
                await beat(self.name, EngineWorker.Role.WEB)
            except Exception as exc:  # a database hiccup: the next beat tries again
                log.warning("the tap sessions' heartbeat failed: %s", exc)
            await asyncio.sleep(settings.INSPECTOR_WORKER_HEARTBEAT)

    def _sweep_soon(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="hosted-tap-sweeper")

    async def _sweep(self) -> None:
        """End connections quiet for ``IDLE`` with nothing in flight; stop once there are none."""
        while self.by_sid or self.runs:
            await asyncio.sleep(SWEEP)
            now = time.monotonic()
            for tap in {*self.by_sid.values(), *self.runs.values()}:
                if tap.in_flight == 0 and now - tap.last > IDLE:
                    tap.end(f"the host sent nothing for {IDLE:.0f} s")
