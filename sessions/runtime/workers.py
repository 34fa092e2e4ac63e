"""Hosted engine workers: heartbeats, and marking lost the sessions of a worker that stopped beating.

A hosted web process that records tap endpoints' traffic (``inspector/tap_sessions.py``) beats the same
way (an ``EngineWorker`` row of role ``web``, never asked to start a session), so its tap sessions are
marked lost as an engine worker's are when it dies.

A worker (``manage.py run_engine_worker``) registers an ``EngineWorker`` row and refreshes its
``last_seen`` every ``INSPECTOR_WORKER_HEARTBEAT`` seconds; each session it owns records the worker's
name. A worker whose heartbeat is three beats old is gone (killed, out of memory, its machine lost):
its live sessions become ``lost``, with every frame up to the last write kept, and the pages watching
them are told. Their stdio servers died with it (``PR_SET_PDEATHSIG``); what those servers started
is killed here too, when the reaper runs on the same machine. Workers reap each other as they beat,
and each hosted web process runs a reaper task that does the same every beat, so a crash is noticed
even when no worker is left. Never on a GET: loading a page changes nothing.

A session never waits for a worker for ever: asking for one when none has a fresh heartbeat fails it
at once, and one that no worker took within three beats (the worker that took its ``StartSession``
died at once, say) is failed by the reaper. Either way a ``state`` frame and the status note say why.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions.engine import Frame, kill_recorded
from sessions.frames import frame_row, summary
from sessions.models import EngineWorker, McpSession, TimelineFrame
from sessions.runtime.messages import FramesStored, StateChanged, encode_event
from sessions.runtime.store import in_db_thread

MISSED_BEATS = 3
NO_WORKER = "no engine worker is running: start one with `python manage.py run_engine_worker`, then reconnect"
log = logging.getLogger(__name__)


def new_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def beat(name: str, role: str = EngineWorker.Role.ENGINE) -> None:
    """Say this worker (or web process, ``role``) is alive and takes commands (registering it on the
    first beat)."""
    EngineWorker.objects.update_or_create(
        name=name, defaults={"last_seen": timezone.now(), "problem": "", "role": role}
    )


def unwell(name: str, problem: str) -> None:
    """Say why this worker cannot take commands now, without beating: three beats of it and its
    sessions are lost, as a dead worker's."""
    EngineWorker.objects.filter(name=name).update(problem=problem)


def health_here() -> str:
    """Why no worker on this machine (its container, say) is healthy; empty when one is: a fresh
    heartbeat and commands reaching it."""
    here = EngineWorker.objects.filter(
        role=EngineWorker.Role.ENGINE, name__startswith=f"{socket.gethostname()}:"
    ).order_by("-last_seen")
    if here.filter(last_seen__gte=_cutoff(timezone.now()), problem="").exists():
        return ""
    unwell = here.exclude(problem="").first()
    if unwell is not None:
        return f"engine worker {unwell.name} cannot receive commands: {unwell.problem}"
    return "no engine worker on this machine has a fresh heartbeat"


def beating_here() -> bool:
    """Whether a worker on this machine has a fresh heartbeat and takes commands."""
    return not health_here()


def retire(name: str) -> None:
    """A worker that stops cleanly closes its sessions itself; it just leaves the register."""
    EngineWorker.objects.filter(name=name).delete()


def _cutoff(now: datetime) -> datetime:
    """A heartbeat older than this is a worker gone."""
    return now - timedelta(seconds=settings.INSPECTOR_WORKER_HEARTBEAT * MISSED_BEATS)


def reap() -> list[McpSession]:
    """Mark lost the live sessions of workers whose heartbeat stopped; return those sessions."""
    now = timezone.now()
    cutoff = _cutoff(now)
    lost: list[McpSession] = []
    for worker in EngineWorker.objects.filter(last_seen__lt=cutoff):
        with transaction.atomic():
            # Deleted only while still stale: a worker that beat meanwhile keeps its row and sessions.
            if not EngineWorker.objects.filter(pk=worker.pk, last_seen__lt=cutoff).delete()[0]:
                continue
            why = f"cannot receive commands: {worker.problem}" if worker.problem else "stopped answering"
            whose = "its engine worker"
            if worker.role == EngineWorker.Role.WEB:
                whose = "the web process that recorded this tap session"
            note = (
                f"{whose} {worker.name} {why} "
                f"(last heartbeat {worker.last_seen:%H:%M:%S} UTC); "
                "frames up to its last write are kept"
            )
            sessions = list(
                McpSession.objects.filter(worker=worker.name, status__in=McpSession.LIVE)
                # Asked again (a reconnect) and not taken yet: fail_untaken's, not this worker's.
                .exclude(status=McpSession.Status.STARTING, worker_channel="")
            )
            McpSession.objects.filter(pk__in=[s.pk for s in sessions]).update(
                status=McpSession.Status.LOST,
                status_note=note,
                worker_channel="",
                ended=now,
                server_process={},
            )
            lost += sessions
    # Their servers died with the worker; what those started is killed by pid and start time.
    kill_recorded(s.server_process for s in lost)
    return lost


async def tell_viewers(sessions: list[McpSession]) -> None:
    """Let the pages watching these sessions show that they are lost."""
    layer: Any = get_channel_layer()
    for session in sessions:
        await layer.group_send(session.group_name, encode_event(StateChanged("lost")))


# --- a session that no worker takes ----------------------------------------------------------------


@dataclass(frozen=True)
class FailedStart:
    """A session failed before any worker took it, and the state frame stored to say why."""

    session: McpSession
    frame: dict[str, Any]


def ask_for_worker(session_pk: int) -> FailedStart | None:
    """Hosted, before sending StartSession: fail the session at once when no worker is alive;
    otherwise note when it asked (a ``starting`` phase: the reaper's clock for ``fail_untaken``)."""
    now = timezone.now()
    if not EngineWorker.objects.filter(role=EngineWorker.Role.ENGINE, last_seen__gte=_cutoff(now)).exists():
        return fail_start(session_pk, NO_WORKER)
    with transaction.atomic():
        session = McpSession.objects.select_for_update().filter(pk=session_pk).first()
        if session is not None:
            phase = {"state": "starting", "note": "waiting for an engine worker", "wall": now.timestamp()}
            session.phases = [*session.phases, phase]
            session.save(update_fields=["phases"])
    return None


def fail_start(session_pk: int, note: str) -> FailedStart | None:
    """Fail a session that no worker has taken, with a state frame that says why; None once taken."""
    with transaction.atomic():
        session = (
            McpSession.objects.select_for_update()
            .filter(pk=session_pk, status=McpSession.Status.STARTING, worker_channel="")
            .first()
        )
        if session is None:
            return None
        seq = session.last_seq + 1
        frame = Frame("state", "local", seq=seq, transport={"state": "failed"}, note=note)
        row = frame_row(frame, 0)
        TimelineFrame.insert_rows(session.pk, [row])
        session.status = McpSession.Status.FAILED
        session.status_note = note
        session.ended = timezone.now()
        session.last_seq = seq
        session.phases = [*session.phases, {"state": "failed", "note": note, "wall": frame.wall, "seq": seq}]
        session.save(update_fields=["status", "status_note", "ended", "last_seq", "phases"])
    return FailedStart(session, row)


def fail_untaken() -> list[FailedStart]:
    """Fail the sessions that asked for a worker three beats ago or more and were not taken."""
    now = timezone.now()
    cutoff = _cutoff(now).timestamp()
    waited = settings.INSPECTOR_WORKER_HEARTBEAT * MISSED_BEATS
    note = (
        f"no engine worker took this session within {waited:g} s ({MISSED_BEATS} heartbeats): the worker "
        "asked may have stopped. Check that one runs (`python manage.py run_engine_worker`), then reconnect"
    )
    failed = []
    for session in McpSession.objects.filter(status=McpSession.Status.STARTING, worker_channel=""):
        if _asked_at(session) < cutoff and (done := fail_start(session.pk, note)) is not None:
            failed.append(done)
    return failed


def _asked_at(session: McpSession) -> float:
    """When the session last asked for a worker: its ``starting`` phase, else its creation."""
    last = session.phases[-1] if isinstance(session.phases, list) and session.phases else {}
    if (
        isinstance(last, dict)
        and last.get("state") == "starting"
        and isinstance(last.get("wall"), int | float)
    ):
        return float(last["wall"])
    return session.created.timestamp()


async def tell_failed(failed: list[FailedStart]) -> None:
    """Show the pages watching these sessions their state frame and that they failed."""
    layer: Any = get_channel_layer()
    for item in failed:
        seq = item.frame["seq"]
        group = item.session.group_name
        await layer.group_send(group, encode_event(FramesStored(seq, seq, [summary(item.frame)])))
        await layer.group_send(
            group, encode_event(StateChanged(McpSession.Status.FAILED, item.session.status_note))
        )


async def reap_and_tell() -> list[McpSession]:
    """One round of reaping (on the runtime's database thread), then tell the pages watching."""
    lost = await in_db_thread(reap)()
    failed = await in_db_thread(fail_untaken)()
    await tell_viewers(lost)
    await tell_failed(failed)
    return lost + [f.session for f in failed]


_reaper: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None


def ensure_reaper() -> None:
    """Hosted web processes: reap every heartbeat in the background, once per event loop."""
    global _reaper
    if settings.INSPECTOR_EMBEDDED_RUNTIME:
        return  # the embedded runtime owns every session itself; orphans are marked at start-up
    loop = asyncio.get_running_loop()
    if _reaper is not None and _reaper[0] is loop and not _reaper[1].done():
        return
    _reaper = (loop, loop.create_task(_reap_forever(), name="mcp-reaper"))


async def _reap_forever() -> None:
    while True:
        await asyncio.sleep(settings.INSPECTOR_WORKER_HEARTBEAT)
        try:
            await reap_and_tell()
        except Exception as exc:  # a database hiccup: the next beat tries again
            log.warning("reaping lost engine workers failed: %s", exc)
