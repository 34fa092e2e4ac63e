"""The runtime's database work, on its thread (db_threads): the frame INSERT, the session rows it keeps."""

from __future__ import annotations

import functools
import json
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from sessions.engine import Frame, PendingRequest, PendingResolved, kill_recorded
from sessions.frames import frame_of
from sessions.models import McpSession, PendingReview, TimelineFrame
from sessions.runtime.db_threads import close_connections, in_db_thread
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
) -> dict[str, Any]:
    """Note who did what in the session (a request sent, a panel action); the new row as the activity
    log shows it (``messages.ActivityAdded``'s entry), so that no tab reads it back."""
    # Plain SQL: one a request, and the ORM's insert cost more CPU than the call's frames' write.
    at, detail = timezone.now(), detail[:500]
    row = [pk, user_id, action, detail, frame_seq, connection.ops.adapt_datetimefield_value(at)]
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_ACTIVITY, row)
        activity_id = int(cursor.fetchone()[0])
    name = None
    if user_id is not None:
        User = get_user_model()  # noqa: N806 - a class
        name = User.objects.filter(pk=user_id).values_list(User.USERNAME_FIELD, flat=True).first()
    return {
        "id": activity_id,
        "at": at.isoformat(),
        "user": name,
        "action": action,
        "detail": detail,
        "frame_seq": frame_seq,
    }


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
