"""The runtime's database work: its own thread, the frame INSERT, and the session rows it keeps current."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import Sum
from django.utils import timezone

from sessions.engine import Frame, PendingRequest, PendingResolved, kill_recorded
from sessions.frames import frame_of
from sessions.models import McpSession, PendingReview, TimelineFrame
from sessions.teams.models import Activity

__all__ = [
    "Disowned",
    "append_phases",
    "close_connections",
    "in_db_thread",
    "load_session",
    "mark_orphans_lost",
    "record_activity",
    "replay_source",
    "resolve_review",
    "save_review",
    "store_frames",
    "update_session",
]

# The runtime's database work runs on a thread of its own: not the thread that Django shares
# between thread-sensitive calls, which a request in a sync middleware may hold for as long as
# its view runs. One thread also keeps the runtime's writes from contending with each other.
_db_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-runtime-db")

_P = ParamSpec("_P")
_R = TypeVar("_R")

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]
_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]

_SETTLE_EVERY = 0.002
"""Seconds of database work after which the callers waiting so far are told, though more is queued."""


class _Queue:
    """The calls waiting for the database thread, run there in the order they came, many per hop.

    A call of its own on the thread (``run_in_executor``) costs more than a small write it carries:
    a submission, a wake-up of the thread, and one of the event loop to hear back. When many sessions
    write at once (a thousand ending with the process), the calls queued while the thread is busy go
    in its next turn, and their callers are told together. Each call runs as it did alone (its own
    transaction or autocommit); one that fails fails only its own caller; one whose caller gave up
    (cancelled) before it ran is skipped, as ``run_in_executor`` skips it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: list[_Call] = []
        self._draining = False

    def submit(self, call: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        queued: _Call = (loop, future, call)
        with self._lock:
            self._calls.append(queued)
            if self._draining:
                return future
            self._draining = True
        try:
            _db_executor.submit(self._drain)
        except BaseException:  # the executor is shut down (the interpreter is exiting)
            with self._lock:
                self._draining = False
                self._calls.remove(queued)
            raise
        return future

    def _drain(self) -> None:
        """On the database thread: run what is queued, and what is queued meanwhile, then stop."""
        while True:
            with self._lock:
                calls, self._calls = self._calls, []
                if not calls:
                    self._draining = False
                    return
            done: list[tuple[asyncio.AbstractEventLoop, _Outcome]] = []
            told = time.monotonic()
            for loop, future, call in calls:
                if future.cancelled():
                    continue
                try:
                    done.append((loop, (future, call(), None)))
                except BaseException as exc:  # handed to the caller, as run_in_executor hands it
                    done.append((loop, (future, None, exc)))
                if time.monotonic() - told > _SETTLE_EVERY:
                    _tell(done)
                    done, told = [], time.monotonic()
            _tell(done)


def _tell(done: list[tuple[asyncio.AbstractEventLoop, _Outcome]]) -> None:
    """Hand each outcome to its caller: one wake-up of each event loop for all of them."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
    for loop, outcome in done:
        by_loop.setdefault(loop, []).append(outcome)
    for loop, outcomes in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, outcomes)


def _settle(outcomes: list[_Outcome]) -> None:
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


_queue = _Queue()


def _keep_connections() -> None:
    """Keep the thread's connections open between calls, unless one is no longer fit for use.

    Opening one per call cost more than the frame INSERT it served (a third of the runtime's
    database time per tool call). Unlike ``close_old_connections``, ``CONN_MAX_AGE`` does not apply:
    this thread lives as long as the process, and only ever runs one call at a time.
    """
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.get_autocommit() != conn.settings_dict["AUTOCOMMIT"]:
            conn.close()  # left in a transaction by a call that failed mid-way
        elif conn.errors_occurred:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()


def in_db_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """Run a blocking database function on the runtime's database thread (see ``_Queue``)."""

    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        for conn in connections.all(initialized_only=True):
            conn.health_check_done = False  # type: ignore[attr-defined]  # CONN_HEALTH_CHECKS: test it first
        try:
            return fn(*args, **kwargs)
        finally:
            _keep_connections()

    @functools.wraps(fn)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        result: _R = await _queue.submit(functools.partial(call, *args, **kwargs))
        return result

    return run


@in_db_thread
def close_connections() -> None:
    """Close the database thread's connections (the runtime stopped; a test database may be dropped next)."""
    connections.close_all()


class Disowned(Exception):
    """The session is no longer this owner's (declared lost, or taken by another): nothing was written."""


@in_db_thread
def store_frames(
    session_pk: int, batch: list[dict[str, Any]], owner_channel: str = "", last_seq: int = 0
) -> None:
    """Insert a batch of frame rows and move the session's ``last_seq`` on, in one transaction.

    With ``owner_channel``, only while the session is still that owner's (``Disowned`` otherwise): a
    worker that resumes after its sessions were declared lost appends nothing to them. The row is
    updated first, so that on PostgreSQL its lock orders this write and the reaper's.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:  # the ORM's UPDATE costs more to build than to run
            seq = last_seq or batch[-1]["seq"]
            if owner_channel:
                lost = McpSession.Status.LOST
                cursor.execute(_owned_last_seq_sql(), [seq, session_pk, owner_channel, lost])
                if cursor.rowcount == 0:
                    raise Disowned(f"session {session_pk} is no longer this owner's")
            else:
                cursor.execute(_last_seq_sql(), [seq, session_pk])
        TimelineFrame.insert_rows(session_pk, batch)


@functools.cache
def _last_seq_sql() -> str:
    """``McpSession.objects.filter(pk=…).update(last_seq=…)``, built once."""
    meta, quote = McpSession._meta, connection.ops.quote_name
    last_seq = quote(meta.get_field("last_seq").column)
    return f"UPDATE {quote(meta.db_table)} SET {last_seq} = %s WHERE {quote(meta.pk.column)} = %s"


@functools.cache
def _owned_last_seq_sql() -> str:
    """The same, only while the session's owner is the given channel and it was not declared lost."""
    meta, quote = McpSession._meta, connection.ops.quote_name
    channel, status = quote(meta.get_field("worker_channel").column), quote(meta.get_field("status").column)
    return f"{_last_seq_sql()} AND {channel} = %s AND {status} <> %s"


@in_db_thread
def load_session(pk: int) -> dict[str, Any]:
    row = McpSession.objects.get(pk=pk)
    return {
        "config": row.config,
        "group": row.group_name,
        "last_seq": row.last_seq,
        "roots": row.roots,
        "next_request_id": _next_request_id(row),
        "stored_bytes": _stored_bytes(row),
    }


@in_db_thread
def replay_source(pk: int) -> list[Frame] | None:
    """The messages of the session this one replays, as engine frames, if it is a replay starting now
    (a replay reconnected is a session like any other: its conversation was sent once)."""
    row = McpSession.objects.only("replay_of_id", "last_seq").get(pk=pk)
    if row.replay_of_id is None or row.last_seq:
        return None
    stored = TimelineFrame.objects.filter(session_id=row.replay_of_id, kind="message").order_by("seq")
    return [frame_of(frame) for frame in stored]


def _stored_bytes(row: McpSession) -> int:
    """The bytes of the frames a session holds, when a limit counts them (a reconnect continues the count)."""
    if not settings.INSPECTOR_MAX_SESSION_BYTES or not row.last_seq:
        return 0
    return TimelineFrame.objects.filter(session=row).aggregate(total=Sum("size"))["total"] or 0


def _next_request_id(row: McpSession) -> int:
    """Continue request numbering after a reconnect, so ids stay unique within a recorded session."""
    ids = TimelineFrame.objects.filter(session=row, direction="out", rpc_kind="request").values_list(
        "rpc_id", flat=True
    )
    numbers = [int(i) for i in ids if i.isdigit()]
    return max(numbers, default=-1) + 1


def _owned(pk: int, owner_channel: str) -> Any:
    """The session's row, only while it is the owner's of ``owner_channel`` (any owner's when empty)."""
    rows = McpSession.objects.filter(pk=pk)
    if owner_channel:
        rows = rows.filter(worker_channel=owner_channel).exclude(status=McpSession.Status.LOST)
    return rows


@in_db_thread
def update_session(pk: int, *, owner_channel: str = "", **fields: Any) -> bool:
    """Set ``fields`` of the session (with ``owner_channel``: only while that owner's); whether it did."""
    return bool(_owned(pk, owner_channel).update(**fields))


@in_db_thread
def append_phases(pk: int, phases: list[dict[str, Any]], *, owner_channel: str = "", **fields: Any) -> bool:
    """Add ``phases`` to the session's (none: only the fields), and set ``fields``, in one write.

    With ``owner_channel``, only while the session is that owner's; whether it wrote.
    """
    rows = _owned(pk, owner_channel)
    if phases:
        # Only the phases are read: the whole row would decrypt the session's config for nothing.
        # Only the session's owner appends, one write at a time on this thread.
        kept = rows.values_list("phases", flat=True).first()
        if kept is None:  # no such row, or not this owner's any more
            return False
        fields["phases"] = [*kept, *phases]
    return bool(rows.update(**fields))


@in_db_thread
def save_review(pk: int, pending: PendingRequest, base: int) -> None:
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
def resolve_review(pk: int, resolved: PendingResolved, answer: dict[str, Any] | None) -> None:
    fields: dict[str, Any] = {
        "status": resolved.outcome,
        "detail": resolved.detail,
        "resolved": timezone.now(),
    }
    if answer is not None:
        fields.update(answer)
    PendingReview.objects.filter(session_id=pk, key=resolved.key).update(**fields)


@in_db_thread
def record_activity(
    pk: int, user_id: int | None, action: str, detail: str = "", frame_seq: int | None = None
) -> int:
    """Note who did what in the session (a request sent, a panel action); the new row's id."""
    # Plain SQL: one a request, and the ORM's insert cost more CPU than the call's frames' write.
    at = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_ACTIVITY, [pk, user_id, action, detail[:500], frame_seq, at])
        return int(cursor.fetchone()[0])


_INSERT_ACTIVITY = (
    f"INSERT INTO {Activity._meta.db_table} (session_id, user_id, action, detail, frame_seq, at)"
    " VALUES (%s, %s, %s, %s, %s, %s) RETURNING id"
)


def mark_orphans_lost() -> int:
    """At start-up of the embedded runtime: sessions still marked live had their owner die with the
    last process (a crash, a kill -9). Say so, rather than show them live with no one behind them."""
    if not settings.INSPECTOR_EMBEDDED_RUNTIME:
        return 0
    orphans = McpSession.objects.filter(status__in=McpSession.LIVE)
    # Their servers died with that process; whatever those started dies now.
    kill_recorded(orphans.values_list("server_process", flat=True))
    return orphans.update(
        status=McpSession.Status.LOST,
        worker_channel="",
        ended=timezone.now(),
        status_note="the inspector stopped before this session ended; frames up to its last write are kept",
        server_process={},
    )
