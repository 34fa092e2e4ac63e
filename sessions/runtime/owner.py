"""A session's owner: the one long-lived task that holds its connection, takes commands, publishes events.

The owner keeps the connection's life (connect, watch, disconnect), the command loop and its
``on_<command>`` handlers, and the dispatch of what the engine reports. The rest is its
collaborators': ``SessionOAuth`` (``oauth.py``: authorizations, tokens, the OAuth debugger),
``SessionLimits`` (``limits.py``: counting, ending at a limit), ``Viewers`` (``viewers.py``: the
viewer count and the idle timer), ``Journal`` (``journal.py``: phases, reviews, activity rows, the
outbox), and the ``Recorder`` (``recorder.py``: the frames).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from channels.layers import BaseChannelLayer
from django.conf import settings
from django.utils import timezone

from sessions.engine import (
    ClientSession,
    EngineError,
    Event,
    Frame,
    HttpTarget,
    McpError,
    PendingRequest,
    PendingResolved,
    Progress,
    RequestHandle,
    Sandbox,
    StdioTarget,
    WarmStarts,
    app_frames,
    make_transport,
)
from sessions.env import secret_variables
from sessions.frames import frame_row
from sessions.runtime import messages as m
from sessions.runtime import store
from sessions.runtime.journal import Journal, cancelling, facts
from sessions.runtime.limits import SessionLimits
from sessions.runtime.oauth import SessionOAuth
from sessions.runtime.recorder import Recorder
from sessions.runtime.replaying import CannotReplay, SessionReplay
from sessions.runtime.viewers import Viewers
from sessions.servers import SANDBOX_ADVICE, Confinement, build_options, build_target

__all__ = ["SessionOwner", "confinement"]

log = logging.getLogger(__name__)


def confinement() -> Confinement:
    """What the servers this process starts may get and reach, from the settings."""
    hosted = settings.INSPECTOR_HOSTED
    sandboxed = hosted and settings.INSPECTOR_SANDBOX
    return Confinement(
        hosted=hosted,
        withheld_env=secret_variables(),
        egress_allow=tuple(settings.INSPECTOR_EGRESS_ALLOW),
        sandbox=Sandbox(tuple(settings.INSPECTOR_SANDBOX_READ), advice=SANDBOX_ADVICE) if sandboxed else None,
    )


class SessionOwner:
    """The long-lived task that owns one connection: it enters and leaves the engine's context."""

    # Each command's handler, by name: one table for every owner (thousands may be live), not a
    # dictionary of bound methods each.
    _HANDLERS: ClassVar[dict[type[m.Command], str]] = {
        m.Notify: "on_notify",
        m.AppMessages: "on_app_messages",
        m.Cancel: "on_cancel",
        m.Respond: "on_respond",
        m.Reject: "on_reject",
        m.SetRoots: "on_set_roots",
        m.Feature: "on_feature",
        m.Reinitialize: "on_reinitialize",
        m.Disconnect: "on_disconnect",
        m.Flush: "on_flush",
        m.Viewer: "on_viewer",
        m.OAuthReturned: "on_oauth_returned",
        m.CancelAuthorization: "on_cancel_authorization",
        m.ForgetTokens: "on_forget_tokens",
        m.OAuthStep: "on_oauth_step",
    }

    def __init__(
        self, layer: BaseChannelLayer, session_pk: int, *, worker: str = "", warm: WarmStarts | None = None
    ) -> None:
        self.layer = layer
        self.warm = warm
        """Servers started ahead of their connect (the embedded runtime's), one of which may be this one's."""
        self.pk = session_pk
        self.worker = worker
        """The hosted engine worker that runs it (empty when embedded)."""
        self.channel = ""
        self.group = ""
        self.client: ClientSession | None = None
        self.base = 0
        self.engine_seq = 0
        self.calls: dict[int, RequestHandle] = {}  # requests in flight, for Cancel
        # Where each recent response sits on the timeline, for the call card of the request that
        # asked (``on_request`` takes its own). A response may arrive before its handle is known
        # (over HTTP, inside the POST), so they are all noted; only the newest few are kept.
        self._stop = asyncio.Event()
        self._stop_reason = ""
        self._connect_failed = False
        self._lost = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.recorder: Recorder | None = None
        self.journal = Journal(session_pk, layer, self._spawn)
        stop = self.stop  # one bound method for both (thousands of owners may be live)
        self.limits = SessionLimits(session_pk, self._record_own, stop)
        self.viewers = Viewers(stop)
        self.oauth = SessionOAuth(session_pk, self.journal.publish)

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        # The default prefix: channels-redis serves every process-local channel from one list per prefix.
        self.channel = self.journal.owner_channel = await self.layer.new_channel()
        loaded = await store.load_session(self.pk)
        self.group = loaded["group"]
        self.config: dict[str, Any] = loaded["config"]
        self.roots: list[Any] = loaded["roots"]
        if self.config.get("oauth_debug"):
            self.oauth.expect_debugger()
        self.base = loaded["last_seq"]
        self.next_request_id = loaded["next_request_id"]
        self.limits.start(frames=self.base, size=loaded["stored_bytes"])
        # It stores only while the session is this owner's: not once declared lost (the process resumed).
        disowned = functools.partial(self.stop, "declared lost meanwhile: no longer recorded here")
        self.recorder = Recorder(
            self.pk, self.group, self.layer, owner_channel=self.channel, disowned=disowned
        )
        self.recorder.start()
        await store.update_session(
            self.pk, worker_channel=self.channel, worker=self.worker, status="connecting", ended=None
        )
        workers = [
            asyncio.create_task(self._serve_commands(), name=f"owner-commands-{self.pk}"),
            asyncio.create_task(self.journal.serve(self.group), name=f"owner-outbox-{self.pk}"),
        ]
        self.viewers.arm()
        try:
            if not self.limits.end_if_full():  # a reconnect of a full session ends at once
                if self.config.get("oauth_debug"):
                    await self._start_debugger()
                else:
                    await self._connect()
            await self._stop.wait()
        finally:
            self.viewers.disarm()
            await self._disconnect()
            await self._end_commands(workers[0])
            for task in (*workers, *self._tasks):
                task.cancel()
            await asyncio.gather(*workers, *self._tasks, return_exceptions=True)
            await self.recorder.close()
            status = self.final_status
            ended = await self.journal.end(
                status=status,
                status_note=self.recorder.ending_note(self._stop_reason),
                ended=timezone.now(),
                worker_channel="",
                server_process={},
            )
            if ended:  # else the session is no longer this owner's (declared lost meanwhile): it stays so
                with contextlib.suppress(Exception):
                    await self.layer.group_send(self.group, m.encode_event(m.StateChanged(status)))

    @property
    def final_status(self) -> str:
        if self._lost:
            return "lost"
        state = self.client.state if self.client is not None else "failed"
        return "failed" if state == "failed" or self._connect_failed else "closed"

    async def _connect(self) -> None:
        options = build_options(
            self.config,
            first_request_id=self.next_request_id,
            roots=self.roots,
            max_message_bytes=settings.INSPECTOR_MAX_MESSAGE_BYTES,
        )
        options.max_message_bytes_name = "INSPECTOR_MAX_MESSAGE_BYTES"
        try:
            replay = await SessionReplay.load(self.pk)
        except CannotReplay as exc:
            self._connect_failed = True
            self.stop(f"cannot replay: {exc}")
            return
        if replay is not None:
            replay.adjust(options)
        try:
            target = await self._target()
            warm = await self.warm.take(target) if self.warm and isinstance(target, StdioTarget) else None
            client = ClientSession(warm or make_transport(target), options)
        except Exception as exc:  # a config the engine cannot use
            self._stop_reason = f"cannot connect: {exc}"
            self._stop.set()
            return
        if replay is not None:
            replay.install(client)
        self.client = client
        client.subscribe(self._on_event)
        try:
            await client.open()
            await self._unless_stopped(client.initialize())
        except Exception as exc:
            if not self.stopping:  # else the reason it stopped for stands (a limit, a disconnect)
                # Failed, even though closing the half-open client leaves it "closed".
                self._connect_failed = True
                self.stop(f"connecting failed: {exc}")
            return
        if self.stopping:  # during the handshake: a limit reached (a flood), a disconnect
            return
        await store.update_session(self.pk, owner_channel=self.channel, **facts(client))
        self.journal.publish(m.StateChanged("ready"))
        self._spawn(self._watch(client))
        if replay is not None:
            self._spawn(self._replay(replay, client))

    async def _replay(self, replay: SessionReplay, client: ClientSession) -> None:
        """Send the recorded conversation, then end the session: the replay is what it was started for."""
        try:
            note = await replay.run(client)
        except EngineError as exc:  # the connection went while a request was being sent
            note = f"replay stopped: {exc}"
        if not self.stopping:
            self.stop(note)

    async def _target(self) -> Any:
        """The engine target of the config; an HTTP one with OAuth gets the browser and the team's tokens."""
        target = build_target(self.config, confinement())
        await self.oauth.prepare(target, self.config)
        return target

    async def _start_debugger(self) -> None:
        """An OAuth debugger's session: no connection until its steps ask for one."""
        from sessions.runtime.oauth_debug import OAuthDebugger

        try:
            target = await self._target()
            if not isinstance(target, HttpTarget) or target.oauth is None:
                raise ValueError("the OAuth debugger needs an HTTP server with OAuth turned on")
        except Exception as exc:
            self._connect_failed = True
            self.stop(f"cannot debug: {exc}")
            self.oauth.debugging(None)
            return
        self.oauth.debugging(OAuthDebugger(self, target))
        note = "OAuth debugger: waiting for a step"
        await store.update_session(self.pk, owner_channel=self.channel, status="ready", status_note=note)
        self.journal.publish(m.StateChanged("ready"))

    async def _unless_stopped(self, work: Awaitable[Any]) -> None:
        """Await ``work`` (in a task of its own), or cancel it when the session is stopped first.

        A server that floods before it answers ``initialize`` reaches a limit while the handshake
        waits; the session ends then, not when the request times out.
        """
        task = asyncio.ensure_future(work)
        stopped = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not task.done():
                task.cancel()
            # Not suppress(): a cancellation of this task itself must go on up.
            await asyncio.gather(task, stopped, return_exceptions=True)
        if task.cancelled():
            if not self.stopping:
                raise EngineError("the handshake was cancelled")
            return
        if (error := task.exception()) is not None:
            raise error

    async def _watch(self, client: ClientSession) -> None:
        await client.wait_closed()
        if client is self.client and not self._stop.is_set():
            self.stop(f"the connection ended: {client.state}")

    async def _disconnect(self) -> None:
        await self.oauth.aclose()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.aclose()

    def stop(self, reason: str) -> None:
        self._stop_reason = reason
        self._stop.set()

    def lose(self, reason: str) -> None:
        """End as lost: its engine worker could not take commands for too long (runtime/workers.py)."""
        self._lost = True
        self.stop(reason)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- what the engine reports -----------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        assert self.recorder is not None
        if self.limits.limited:
            return  # the session is ending at its limit: what the engine receives now is not recorded
        if isinstance(event, Frame):
            self.engine_seq = event.seq
            row = frame_row(event, self.base)
            self.recorder.add(row)
            if event.kind == "state":
                # A step of the lifecycle; while the process stops, written with the session's end.
                self.journal.phase_seen(event, self.base + event.seq, self.client, held=self.recorder.held)
                server = event.transport.get("stdio", {}).get("process")
                if server:  # who to kill if this process dies before it closes the session
                    self.journal.update({"server_process": server})
            elif event.kind == "exit":
                code = event.transport.get("stdio", {}).get("returncode")
                self.journal.update({"exit_code": code}, held=self.recorder.held)
            self.limits.count(row["size"])
        elif isinstance(event, Progress):
            self.journal.publish(m.CallProgress(event.request_id, event.progress, event.total, event.message))
        elif isinstance(event, PendingRequest):
            self.journal.review_opened(event, self.base)
        elif isinstance(event, PendingResolved):
            self.journal.review_closed(event)

    def _record_own(self, make: Callable[[int], Frame]) -> None:
        """Record a frame of the owner's own (a limit's), made with the number the engine's next would get."""
        assert self.recorder is not None
        self.engine_seq += 1  # that next frame of the engine's, if any, is not recorded
        self.recorder.add(frame_row(make(self.engine_seq), self.base))

    # --- commands --------------------------------------------------------------------------

    async def _serve_commands(self) -> None:
        while not cancelling():
            message = await self.layer.receive(self.channel)
            if message.get("type") == END_COMMANDS:
                return
            try:
                command, reply = m.decode_command(message)
            except (ValueError, TypeError) as exc:
                await self._reply(str(message.get("reply") or ""), m.Failed(str(exc)))
                continue
            self._spawn(self._run_command(command, reply))

    async def _end_commands(self, commands: asyncio.Task[None]) -> None:
        """End the command loop with a message to itself, rather than by cancelling its receive:
        channels-redis can swallow that cancellation and go on waiting for a message that never
        comes, which held an engine worker's stop for ever. Cancelling stays the fallback."""
        with contextlib.suppress(Exception):
            await self.layer.send(self.channel, {"type": END_COMMANDS})
            await asyncio.wait({commands}, timeout=END_COMMANDS_WAIT)

    async def _run_command(self, command: m.Command, reply: str) -> None:
        try:
            if isinstance(command, m.Request):
                await self.on_request(command, reply)
                return
            handler: Callable[[Any], Awaitable[m.Reply | None]] = getattr(self, self._HANDLERS[type(command)])
            answer = await handler(command)
        except Exception as exc:
            log.warning("command %s failed: %s", command.NAME, exc)
            await self._reply(reply, m.Failed(str(exc)))
            return
        await self._reply(reply, answer or m.Done())

    async def _reply(self, reply: str, answer: m.Reply) -> None:
        if reply:
            with contextlib.suppress(Exception):  # the asker gave up; the outcome is in the timeline
                await self.layer.send(reply, m.encode_reply(answer))

    def _live_client(self) -> ClientSession:
        if self.client is None or self.client.state not in ("ready", "expired"):
            state = self.client.state if self.client is not None else "not connected"
            raise EngineError(f"the session is {state}")
        return self.client

    def _answered_by(self, leg: Any) -> dict[str, Any]:
        """Where a request's frames sit and what the engine made of its answer, from the frames the
        engine made (the recorder stores the same): a card drawn from it reads no frame."""
        found: dict[str, Any] = {}
        if leg.frame_seq is not None:
            found["request_seq"] = self.base + leg.frame_seq
        reply = leg.reply
        if reply is not None:
            found |= {
                "response_seq": self.base + reply.seq,
                "latency_ms": reply.latency_ms,
                "size": reply.size,  # a card shows only the head of a big answer
                "verdicts": [v.to_dict() for v in reply.verdicts],
                "note": reply.note,
            }
        return found

    async def _until_stored(self) -> None:
        """Wait until every frame seen so far is stored: the asker reads the timeline next."""
        assert self.recorder is not None
        await self.recorder.wait_stored(self.base + self.engine_seq)

    async def on_request(self, command: m.Request, reply: str) -> None:
        client = self._live_client()
        options: dict[str, Any] = {} if command.timeout is None else {"timeout": command.timeout}
        started = time.monotonic()
        handle = await client.start_request(command.method, command.params, **options)
        self.calls[handle.id] = handle
        await self._reply(reply, m.Started(handle.id))
        if command.user_id is not None:
            seq = handle.leg.frame_seq
            self.journal.activity(
                command.user_id, "sent", command.method, None if seq is None else self.base + seq
            )
        outcome: dict[str, Any] = {"rpc_id": handle.id, "method": command.method}
        try:
            outcome["result"] = await handle
        except McpError as exc:
            outcome["error"] = {"code": exc.code, "message": exc.message, "data": exc.data}
        except EngineError as exc:
            outcome["error"] = {"code": None, "message": str(exc), "kind": type(exc).__name__}
        finally:
            self.calls.pop(handle.id, None)
        outcome.update(self._answered_by(handle.leg))
        if command.stored:
            await self._until_stored()
        await self._reply(reply, m.Done(outcome))
        if command.wait is None or time.monotonic() - started >= command.wait * 0.8:
            # The asker may have shown a running card: viewers finish it from this event.
            self.journal.publish(m.CallDone(outcome))

    async def on_notify(self, command: m.Notify) -> m.Done:
        """Send a notification exactly as typed; it is on the timeline when the asker hears back."""
        client = self._live_client()
        frame = await client.send_notification(command.method, command.params)
        seq = self.base + frame.seq
        if command.user_id is not None:
            self.journal.activity(command.user_id, "sent", command.method, seq)
        await self._until_stored()
        return m.Done({"method": command.method, "seq": seq})

    async def on_cancel(self, command: m.Cancel) -> None:
        handle = self.calls.get(int(command.rpc_id))
        if handle is not None:
            await handle.cancel(command.reason or "cancelled in the inspector")

    async def on_respond(self, command: m.Respond) -> None:
        client = self._live_client()
        self.journal.answered(
            command.key,
            {"answer": command.result, "edited": command.edited, "answered_by_id": command.user_id},
        )
        if command.note:
            note: str | None = command.note
        elif command.by:
            note = f"{'edited and answered' if command.edited else 'answered'} by {command.by}"
        else:
            note = "edited by a person" if command.edited else None
        client.respond(command.key, command.result, note=note)

    async def on_reject(self, command: m.Reject) -> None:
        client = self._live_client()
        self.journal.answered(command.key, {"answered_by_id": command.user_id})
        message = command.message or "User rejected the request"
        client.reject(
            command.key, command.code, message, note=f"rejected by {command.by}" if command.by else None
        )

    async def on_set_roots(self, command: m.SetRoots) -> None:
        self.roots = list(command.roots)
        await store.update_session(self.pk, owner_channel=self.channel, roots=self.roots)
        if self.client is not None and self.client.state == "ready":
            if command.notify:
                await self.client.set_roots(self.roots)
            else:  # the server just got them in an answer to roots/list: no need to tell it again
                self.client.roots = list(self.roots)

    async def on_feature(self, command: m.Feature) -> m.Done | None:
        """A panel action whose wire form depends on the revision, done by the engine's own method.

        In the handshake revisions they are plain requests (ping, logging/setLevel,
        resources/subscribe and unsubscribe); 2026-07-28 has none of them and says the same with
        server/discover, a ``_meta`` log level and subscriptions/listen streams. The raw request
        form still sends exactly what a person typed.
        """
        client = self._live_client()
        action, value = command.action, command.value
        if command.user_id is not None and action != "listen":
            self.journal.activity(command.user_id, action, value)
        try:
            if action == "ping":
                await client.ping()
            elif action == "set_level":
                await client.set_logging_level(value)
            elif action == "subscribe":
                await client.subscribe_resource(value)
            elif action == "unsubscribe":
                await client.unsubscribe_resource(value)
            elif action == "listen":
                await client.listen()
            elif action == "check_skill":  # value: a skills/list entry; answer: its SKILL.md, verified
                return m.Done({"read": await client.skills.check(value)})
            else:
                raise EngineError(f"unknown panel action {action!r}")
        finally:
            await self._until_stored()
        return None

    async def on_app_messages(self, command: m.AppMessages) -> None:
        """Record what passed between a view and its host as local frames of their own, in order."""
        client = self._live_client()
        for frame in app_frames(command.view, command.messages, command.dropped):
            client.record(frame)
        await self._until_stored()

    async def on_reinitialize(self, command: m.Reinitialize) -> None:
        client = self._live_client()
        await client.reinitialize()
        await store.update_session(
            self.pk, owner_channel=self.channel, protocol_version=client.protocol_version or ""
        )

    async def on_disconnect(self, command: m.Disconnect) -> None:
        self.stop("disconnected by the user")

    async def on_flush(self, command: m.Flush) -> None:
        await self._until_stored()

    async def on_oauth_returned(self, command: m.OAuthReturned) -> None:
        """The person came back from the authorization server: the waiting flow goes on."""
        self.oauth.returned(command.state_sha256, command.url)

    async def on_cancel_authorization(self, command: m.CancelAuthorization) -> None:
        """The person gave up on authorizing: the waiting flow fails, saying so."""
        self.oauth.cancel(command.state_sha256, command.by)

    async def on_forget_tokens(self, command: m.ForgetTokens) -> None:
        """Drop the token in use (the asker deletes the stored ones once this is done)."""
        await self.oauth.forget(self.client)

    async def on_oauth_step(self, command: m.OAuthStep) -> m.Done:
        return await self.oauth.step(command.run_all)

    async def on_viewer(self, command: m.Viewer) -> None:
        self.viewers.changed(int(command.delta))


END_COMMANDS = "owner.end"  # the message that ends an owner's command loop (``_end_commands``)
END_COMMANDS_WAIT = 2.0  # seconds it may take to arrive before the loop is cancelled instead
