"""The session runtime: the only place that holds live MCP connections, one owner task each.

Its boundary is a message interface over the channel layer:
- ``RUNTIME_CHANNEL`` takes ``{"type": "session.start", "session_id": pk}``;
- each owner listens on its own channel (recorded as ``McpSession.worker_channel``) for commands;
- each owner publishes what happens to its session's group (``McpSession.group_name``).
In the embedded default it runs inside the web process; ``manage.py run_engine_worker`` runs the
same loop in a worker process behind Redis.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from sessions.engine import (
    ClientCapabilities,
    ClientOptions,
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
    StdioTarget,
    Target,
    make_transport,
)
from sessions.models import McpSession, PendingReview, TimelineFrame

__all__ = [
    "RUNTIME_CHANNEL",
    "Runtime",
    "SessionOwner",
    "build_options",
    "build_target",
    "ensure_embedded_runtime",
]

log = logging.getLogger(__name__)

# The runtime's database work runs on a thread of its own: not the thread that Django shares
# between thread-sensitive calls, which a request in a sync middleware may hold for as long as
# its view runs. One thread also keeps the runtime's writes from contending with each other.
_db_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-runtime-db")

_P = ParamSpec("_P")
_R = TypeVar("_R")


def in_db_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """Run a blocking database function on the runtime's database thread."""

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    @functools.wraps(fn)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        return await asyncio.get_running_loop().run_in_executor(
            _db_executor, functools.partial(call, *args, **kwargs)
        )

    return run


RUNTIME_CHANNEL = "mcp-runtime"
TAIL = 200  # rows a live batch carries at most: viewers in follow mode never show more
MAX_BATCH = 2000
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
FINAL_STATES = {"closed", "failed"}


def build_target(config: dict[str, Any]) -> Target:
    """Turn a saved config snapshot into an engine target."""
    if config.get("transport", "stdio") == "stdio":
        return StdioTarget(
            config["command"],
            list(config.get("args", [])),
            env=dict(config.get("env", {})),
            cwd=config.get("cwd") or None,
        )
    return HttpTarget(
        config["url"],
        transport=config.get("transport", "auto"),
        headers=dict(config.get("headers", {})),
        bearer_token=config.get("bearer_token") or None,
        verify_tls=config.get("verify_tls", True),
        ca_file=config.get("ca_file") or None,
    )


def build_options(
    config: dict[str, Any], *, first_request_id: int = 0, roots: list[Any] | None = None
) -> ClientOptions:
    """Turn a saved config snapshot into engine options."""
    caps = config.get("capabilities", {})
    return ClientOptions(
        protocol_version=config.get("protocol_version") or "2025-11-25",
        mode=config.get("mode") or "handshake",
        capabilities=ClientCapabilities(
            roots=caps.get("roots", True),
            roots_list_changed=caps.get("roots_list_changed", True),
            sampling=caps.get("sampling", True),
            elicitation_form=caps.get("elicitation_form", True),
            elicitation_url=caps.get("elicitation_url", True),
            experimental=caps.get("experimental") or None,
        ),
        client_info={"name": "mcp-inspector", "title": "MCP Inspector", "version": "0.1.0"},
        timeout=config.get("timeout") or None,
        max_total_timeout=config.get("max_total_timeout") or None,
        roots=list(roots or []),
        review_roots=caps.get("review_roots", False),
        first_request_id=first_request_id,
        listen=True,  # stateless: a subscriptions/listen stream, so list changes reach the timeline
    )


def frame_row(frame: Frame, base: int) -> dict[str, Any]:
    """Flatten an engine frame into the fields of a TimelineFrame, numbered within the session."""
    verdicts = [v.to_dict() for v in frame.verdicts]
    worst = min((v["severity"] for v in verdicts), key=SEVERITY_ORDER.__getitem__, default="")
    preview = frame.raw[:300].decode("utf-8", errors="replace").replace("\n", " ")
    if not preview and frame.note:
        preview = frame.note[:300]
    return {
        "seq": base + frame.seq,
        "kind": frame.kind,
        "direction": frame.direction,
        "wall": frame.wall,
        "mono": frame.mono,
        "method": frame.method or "",
        "rpc_id": json.dumps(frame.rpc_id) if frame.rpc_id is not None else "",
        "rpc_kind": frame.rpc_kind or "",
        "pair_seq": base + frame.pair_seq if frame.pair_seq is not None else None,
        "latency_ms": frame.latency_ms,
        "size": frame.size,
        "raw": frame.raw,
        "preview": preview,
        "parse_error": frame.parse_error or "",
        "transport": frame.transport,
        "verdicts": verdicts,
        "worst": worst,
        "note": frame.note or "",
    }


def summary(row: dict[str, Any]) -> dict[str, Any]:
    """Return a row without its raw bytes: what a live message carries to viewers."""
    return {k: v for k, v in row.items() if k != "raw"}


_ROW_FIELDS = (
    "seq", "kind", "direction", "wall", "mono", "method", "rpc_id", "rpc_kind", "pair_seq", "latency_ms",
    "size", "raw", "preview", "parse_error", "transport", "verdicts", "worst", "note",
)  # fmt: skip
_JSON_FIELDS = frozenset({"transport", "verdicts"})


def _column_value(name: str, value: Any) -> Any:
    return json.dumps(value) if name in _JSON_FIELDS else value


@functools.cache
def _insert_sql() -> str:
    """INSERT for a TimelineFrame row: the session, then the fields frame_row() produces."""
    meta, quote = TimelineFrame._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in ("session", *_ROW_FIELDS)]
    columns = [str(getattr(field, "column", "")) for field in fields]
    marks = ", ".join(["%s"] * len(columns))
    return f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(c) for c in columns)}) VALUES ({marks})"


class Recorder:
    """Write frames to the database in batches, off the traffic's path, then tell the viewers.

    Frames are published only after they are stored, so a viewer that catches up from the
    database and then follows the group never misses one.
    """

    def __init__(self, session_pk: int, group: str, layer: BaseChannelLayer) -> None:
        self.session_pk = session_pk
        self.group = group
        self.layer = layer
        self.rows: list[dict[str, Any]] = []
        self.stored_seq = 0
        self._wake = asyncio.Event()
        self._stored = asyncio.Condition()
        self._closing = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"recorder-{self.session_pk}")

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._drain()
            if self._closing:
                return

    async def _drain(self) -> None:
        while self.rows:
            batch, self.rows = self.rows[:MAX_BATCH], self.rows[MAX_BATCH:]
            try:
                await self._store(batch)
            except Exception:
                log.exception("storing %d frames of session %s failed", len(batch), self.session_pk)
                continue
            self.stored_seq = batch[-1]["seq"]
            async with self._stored:
                self._stored.notify_all()
            message = {
                "type": "frames.batch",
                "first": batch[0]["seq"],
                "last": batch[-1]["seq"],
                "rows": [summary(r) for r in batch[-TAIL:]],
            }
            with contextlib.suppress(Exception):
                await self.layer.group_send(self.group, message)

    async def wait_stored(self, seq: int, timeout: float = 2.0) -> None:
        """Wait (a bounded time) until frame ``seq`` is in the database."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout), self._stored:
                await self._stored.wait_for(lambda: self.stored_seq >= seq)

    @in_db_thread
    def _store(self, batch: list[dict[str, Any]]) -> None:
        # One executemany, not bulk_create: building model instances costs 8x the insert itself
        # (about 12,000 against 98,000 frames a second on SQLite here).
        values = [
            (self.session_pk, *[_column_value(name, row[name]) for name in _ROW_FIELDS]) for row in batch
        ]
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(_insert_sql(), values)
            McpSession.objects.filter(pk=self.session_pk).update(last_seq=batch[-1]["seq"])

    async def close(self) -> None:
        """Store everything still buffered, then stop (never cancelled mid-write: that would lose a batch)."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._drain()


@in_db_thread
def _load_session(pk: int) -> dict[str, Any]:
    row = McpSession.objects.get(pk=pk)
    return {
        "config": row.config,
        "group": row.group_name,
        "last_seq": row.last_seq,
        "roots": row.roots,
        "next_request_id": _next_request_id(row),
    }


def _next_request_id(row: McpSession) -> int:
    """Continue request numbering after a reconnect, so ids stay unique within a recorded session."""
    ids = TimelineFrame.objects.filter(session=row, direction="out", rpc_kind="request").values_list(
        "rpc_id", flat=True
    )
    numbers = [int(i) for i in ids if i.isdigit()]
    return max(numbers, default=-1) + 1


@in_db_thread
def _update_session(pk: int, **fields: Any) -> None:
    McpSession.objects.filter(pk=pk).update(**fields)


@in_db_thread
def _append_phase(pk: int, phase: dict[str, Any], **fields: Any) -> None:
    row = McpSession.objects.get(pk=pk)
    row.phases = [*row.phases, phase]
    for name, value in fields.items():
        setattr(row, name, value)
    row.save(update_fields=["phases", *fields])


@in_db_thread
def _save_review(pk: int, pending: PendingRequest, base: int) -> None:
    PendingReview.objects.update_or_create(
        session_id=pk,
        key=pending.key,
        defaults={
            "method": pending.method,
            "rpc_id": json.dumps(pending.request_id),
            "params": pending.params,
            "frame_seq": base + pending.frame_seq,
            "status": PendingReview.Status.WAITING,
        },
    )


@in_db_thread
def _resolve_review(pk: int, resolved: PendingResolved, answer: dict[str, Any] | None) -> None:
    fields: dict[str, Any] = {
        "status": resolved.outcome,
        "detail": resolved.detail,
        "resolved": timezone.now(),
    }
    if answer is not None:
        fields.update(answer)
    PendingReview.objects.filter(session_id=pk, key=resolved.key).update(**fields)


class SessionOwner:
    """The long-lived task that owns one connection: it enters and leaves the engine's context."""

    def __init__(self, runtime: Runtime, session_pk: int) -> None:
        self.runtime = runtime
        self.pk = session_pk
        self.layer = runtime.layer
        self.channel = ""
        self.group = ""
        self.client: ClientSession | None = None
        self.base = 0
        self.engine_seq = 0
        self.calls: dict[int, RequestHandle] = {}  # requests in flight, for Cancel
        self.responses: dict[int | str, dict[str, Any]] = {}
        self.viewers = 0
        self._stop = asyncio.Event()
        self._stop_reason = ""
        self._idle: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._answers: dict[str, dict[str, Any]] = {}
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.recorder: Recorder | None = None

    # --- running --------------------------------------------------------------------------

    async def run(self) -> None:
        # The default prefix: channels-redis serves every process-local channel from one list per prefix.
        self.channel = await self.layer.new_channel()
        loaded = await _load_session(self.pk)
        self.group = loaded["group"]
        self.config: dict[str, Any] = loaded["config"]
        self.roots: list[Any] = loaded["roots"]
        self.base = loaded["last_seq"]
        self.next_request_id = loaded["next_request_id"]
        self.recorder = Recorder(self.pk, self.group, self.layer)
        self.recorder.start()
        await _update_session(
            self.pk, worker_channel=self.channel, worker=self.runtime.worker, status="connecting", ended=None
        )
        workers = [
            asyncio.create_task(self._serve_commands(), name=f"owner-commands-{self.pk}"),
            asyncio.create_task(self._publish_outbox(), name=f"owner-outbox-{self.pk}"),
        ]
        self._arm_idle()
        try:
            await self._connect()
            await self._stop.wait()
        finally:
            await self._disconnect()
            for task in (*workers, *self._tasks):
                task.cancel()
            await asyncio.gather(*workers, *self._tasks, return_exceptions=True)
            await self.recorder.close()
            status = self.final_status
            await _update_session(
                self.pk, status=status, status_note=self._stop_reason, ended=timezone.now(), worker_channel=""
            )
            with contextlib.suppress(Exception):
                await self.layer.group_send(self.group, {"type": "session.state", "status": status})

    @property
    def final_status(self) -> str:
        state = self.client.state if self.client is not None else "failed"
        return "failed" if state == "failed" else "closed"

    async def _connect(self) -> None:
        options = build_options(self.config, first_request_id=self.next_request_id, roots=self.roots)
        try:
            client = ClientSession(make_transport(build_target(self.config)), options)
        except Exception as exc:  # a config the engine cannot use
            self._stop_reason = f"cannot connect: {exc}"
            self._stop.set()
            return
        self.client = client
        client.subscribe(self._on_event)
        try:
            await client.open()
            await client.initialize()
        except Exception as exc:
            self._stop_reason = f"connecting failed: {exc}"
            self._stop.set()
            return
        await _update_session(
            self.pk,
            protocol_version=client.protocol_version or "",
            mode=client.mode or "",
            transport_name=client.transport.name,
            server_info=client.server_info,
            server_capabilities=client.server_capabilities,
            client_capabilities=client.client_capabilities,
            instructions=client.instructions or "",
        )
        self._outbox.put_nowait({"type": "session.state", "status": "ready"})
        self._spawn(self._watch(client))

    async def _watch(self, client: ClientSession) -> None:
        await client.wait_closed()
        if client is self.client and not self._stop.is_set():
            self.stop(f"the connection ended: {client.state}")

    async def _disconnect(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.aclose()

    def stop(self, reason: str) -> None:
        self._stop_reason = reason
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- idle ----------------------------------------------------------------------------

    def _arm_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        timeout = settings.INSPECTOR_IDLE_TIMEOUT
        if self.viewers <= 0 and timeout > 0:
            self._idle = asyncio.get_running_loop().call_later(
                timeout, self.stop, f"no viewer for {timeout:g} s (INSPECTOR_IDLE_TIMEOUT)"
            )

    # --- what the engine reports -----------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        assert self.recorder is not None
        if isinstance(event, Frame):
            self.engine_seq = event.seq
            self.recorder.add(frame_row(event, self.base))
            if event.direction == "in" and event.rpc_kind in ("result", "error") and event.rpc_id is not None:
                self.responses[event.rpc_id] = {
                    "response_seq": self.base + event.seq,
                    "request_seq": self.base + event.pair_seq if event.pair_seq is not None else None,
                    "latency_ms": event.latency_ms,
                }
            if event.kind == "state":
                self._spawn(self._record_phase(event))
            elif event.kind == "exit":
                self._spawn(
                    _update_session(self.pk, exit_code=event.transport.get("stdio", {}).get("returncode"))
                )
        elif isinstance(event, Progress):
            self._outbox.put_nowait(
                {
                    "type": "call.progress",
                    "rpc_id": event.request_id,
                    "progress": event.progress,
                    "total": event.total,
                    "message": event.message,
                }
            )
        elif isinstance(event, PendingRequest):
            self._spawn(self._review_opened(event))
        elif isinstance(event, PendingResolved):
            self._spawn(self._review_closed(event))

    async def _record_phase(self, frame: Frame) -> None:
        state = frame.transport.get("state", "")
        if state not in McpSession.PHASES:
            return  # a note on the timeline, not a step of the lifecycle
        phase = {"state": state, "note": frame.note or "", "wall": frame.wall, "seq": self.base + frame.seq}
        fields: dict[str, Any] = {"status_note": frame.note or ""}
        if state in McpSession.Status.values and state not in FINAL_STATES:
            fields["status"] = state
        await _append_phase(self.pk, phase, **fields)
        self._outbox.put_nowait(
            {"type": "session.state", "status": fields.get("status", ""), "note": frame.note}
        )

    async def _review_opened(self, pending: PendingRequest) -> None:
        await _save_review(self.pk, pending, self.base)
        self._outbox.put_nowait({"type": "review.changed", "key": pending.key})

    async def _review_closed(self, resolved: PendingResolved) -> None:
        await _resolve_review(self.pk, resolved, self._answers.pop(resolved.key, None))
        self._outbox.put_nowait({"type": "review.changed", "key": resolved.key})

    async def _publish_outbox(self) -> None:
        while True:
            message = await self._outbox.get()
            with contextlib.suppress(Exception):
                await self.layer.group_send(self.group, message)

    # --- commands --------------------------------------------------------------------------

    async def _serve_commands(self) -> None:
        while True:
            message = await self.layer.receive(self.channel)
            handler = getattr(self, f"cmd_{message.get('command', '')}", None)
            if handler is None:
                await self._reply(
                    message, {"event": "error", "error": f"unknown command {message.get('command')!r}"}
                )
                continue
            self._spawn(self._run_command(handler, message))

    async def _run_command(self, handler: Any, message: dict[str, Any]) -> None:
        try:
            await handler(message)
        except Exception as exc:
            log.warning("command %s failed: %s", message.get("command"), exc)
            await self._reply(message, {"event": "error", "error": str(exc)})

    async def _reply(self, message: dict[str, Any], body: dict[str, Any]) -> None:
        reply = message.get("reply")
        if reply:
            with contextlib.suppress(Exception):  # the asker gave up; the outcome is in the timeline
                await self.layer.send(reply, {"type": "owner.reply", **body})

    def _live_client(self) -> ClientSession:
        if self.client is None or self.client.state not in ("ready", "expired"):
            state = self.client.state if self.client is not None else "not connected"
            raise EngineError(f"the session is {state}")
        return self.client

    async def cmd_request(self, message: dict[str, Any]) -> None:
        client = self._live_client()
        method, params = message["method"], message.get("params")
        options: dict[str, Any] = {}
        if message.get("timeout") is not None:
            options["timeout"] = message["timeout"]
        started = time.monotonic()
        handle = await client.start_request(method, params, **options)
        self.calls[handle.id] = handle
        await self._reply(message, {"event": "started", "rpc_id": handle.id})
        outcome: dict[str, Any] = {"rpc_id": handle.id, "method": method}
        try:
            outcome["result"] = await handle
        except McpError as exc:
            outcome["error"] = {"code": exc.code, "message": exc.message, "data": exc.data}
        except EngineError as exc:
            outcome["error"] = {"code": None, "message": str(exc), "kind": type(exc).__name__}
        finally:
            self.calls.pop(handle.id, None)
        response = self.responses.pop(handle.current_id, None)
        if response is not None:
            outcome.update(response)
        if message.get("stored", True):
            # The asker reads the timeline next (a panel listing): answer once the frames are stored.
            assert self.recorder is not None
            await self.recorder.wait_stored(self.base + self.engine_seq)
        await self._reply(message, {"event": "done", **outcome})
        waited = message.get("wait")
        if waited is None or time.monotonic() - started >= waited * 0.8:
            # The asker may have shown a running card: viewers finish it from this message.
            self._outbox.put_nowait({"type": "call.done", **outcome})

    async def cmd_cancel(self, message: dict[str, Any]) -> None:
        handle = self.calls.get(int(message["rpc_id"]))
        if handle is not None:
            await handle.cancel(message.get("reason") or "cancelled in the inspector")
        await self._reply(message, {"event": "done"})

    async def cmd_respond(self, message: dict[str, Any]) -> None:
        client = self._live_client()
        key = message["key"]
        self._answers[key] = {
            "answer": message["result"],
            "edited": bool(message.get("edited")),
            "answered_by_id": message.get("user_id"),
        }
        note = message.get("note") or ("edited by a person" if message.get("edited") else None)
        client.respond(key, message["result"], note=note)
        await self._reply(message, {"event": "done"})

    async def cmd_reject(self, message: dict[str, Any]) -> None:
        client = self._live_client()
        key = message["key"]
        self._answers[key] = {"answered_by_id": message.get("user_id")}
        client.reject(key, message.get("code", -1), message.get("message") or "User rejected the request")
        await self._reply(message, {"event": "done"})

    async def cmd_set_roots(self, message: dict[str, Any]) -> None:
        self.roots = list(message["roots"])
        await _update_session(self.pk, roots=self.roots)
        if self.client is not None and self.client.state == "ready":
            if message.get("notify", True):
                await self.client.set_roots(self.roots)
            else:  # the server just got them in an answer to roots/list: no need to tell it again
                self.client.roots = list(self.roots)
        await self._reply(message, {"event": "done"})

    async def cmd_feature(self, message: dict[str, Any]) -> None:
        """A panel action whose wire form depends on the revision, done by the engine's own method.

        In the handshake revisions they are plain requests (ping, logging/setLevel,
        resources/subscribe and unsubscribe); 2026-07-28 has none of them and says the same with
        server/discover, a ``_meta`` log level and subscriptions/listen streams. The raw request
        form still sends exactly what a person typed.
        """
        client = self._live_client()
        action, value = message["action"], message.get("value") or ""
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
            else:
                raise EngineError(f"unknown panel action {action!r}")
        finally:
            # The panel reads what happened from the timeline next: answer once it is stored.
            assert self.recorder is not None
            await self.recorder.wait_stored(self.base + self.engine_seq)
        await self._reply(message, {"event": "done"})

    async def cmd_reinitialize(self, message: dict[str, Any]) -> None:
        client = self._live_client()
        await client.reinitialize()
        await _update_session(self.pk, protocol_version=client.protocol_version or "")
        await self._reply(message, {"event": "done"})

    async def cmd_disconnect(self, message: dict[str, Any]) -> None:
        self.stop("disconnected by the user")
        await self._reply(message, {"event": "done"})

    async def cmd_viewer(self, message: dict[str, Any]) -> None:
        self.viewers += int(message.get("delta", 0))
        self._arm_idle()


class Runtime:
    """Receive session starts and run one owner task per live session."""

    def __init__(self, layer: BaseChannelLayer | None = None, *, worker: str = "") -> None:
        self.layer = layer or get_channel_layer()
        self.worker = worker
        """The hosted engine worker's name (heartbeats in sessions/workers.py); empty when embedded."""
        self.owners: dict[int, SessionOwner] = {}
        self.tasks: dict[int, asyncio.Task[None]] = {}

    async def serve(self) -> None:
        while True:
            message = await self.layer.receive(RUNTIME_CHANNEL)
            if message.get("type") == "session.start":
                self.start(int(message["session_id"]))

    def start(self, session_pk: int) -> None:
        existing = self.owners.get(session_pk)
        if existing is not None:
            if existing.stopping:
                # Reconnect right after Disconnect: the old owner is still writing how it ended
                # (the page already shows "closed"). Start the new one when the old one is done.
                self.tasks[session_pk].add_done_callback(lambda _: self.start(session_pk))
            return
        owner = SessionOwner(self, session_pk)
        self.owners[session_pk] = owner
        task = asyncio.create_task(owner.run(), name=f"owner-{session_pk}")
        self.tasks[session_pk] = task

        def forget(_: asyncio.Task[None]) -> None:
            self.owners.pop(session_pk, None)
            self.tasks.pop(session_pk, None)

        task.add_done_callback(forget)

    async def shutdown(self, reason: str = "the inspector stopped") -> None:
        """Close every live session properly, recording how each ended."""
        for owner in list(self.owners.values()):
            owner.stop(reason)
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)

    def kill_processes(self) -> None:
        """Last resort at exit: no stdio server may outlive the inspector."""
        for owner in self.owners.values():
            process = getattr(getattr(owner.client, "transport", None), "process", None)
            if process is not None and process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)


_embedded: tuple[asyncio.AbstractEventLoop, Runtime, asyncio.Task[None]] | None = None
_hooks_installed = False


def mark_orphans_lost() -> int:
    """At start-up of the embedded runtime: sessions still marked live had their owner die with the
    last process (a crash, a kill -9). Say so, rather than show them live with no one behind them."""
    if not settings.INSPECTOR_EMBEDDED_RUNTIME:
        return 0
    return McpSession.objects.filter(status__in=McpSession.LIVE).update(
        status=McpSession.Status.LOST,
        worker_channel="",
        ended=timezone.now(),
        status_note="the inspector stopped before this session ended; frames up to its last write are kept",
    )


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
    _stop_with_the_server()
    return runtime


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
    global _embedded
    if _embedded is None:
        return
    _, runtime, serving = _embedded
    _embedded = None
    serving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await serving
    await runtime.shutdown(reason)
