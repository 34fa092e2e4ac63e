"""Hosted engine workers: heartbeats, and marking lost the sessions of a worker that stopped beating.

A worker (``manage.py run_engine_worker``) registers an ``EngineWorker`` row and refreshes its
``last_seen`` every ``INSPECTOR_WORKER_HEARTBEAT`` seconds; each session it owns records the worker's
name. A worker whose heartbeat is three beats old is gone (killed, out of memory, its machine lost):
its live sessions become ``lost``, with every frame up to the last write kept, and the pages watching
them are told. Their stdio servers died with it (``PR_SET_PDEATHSIG``); what those servers started
is killed here too, when the reaper runs on the same machine. Workers reap each other as they beat,
and each hosted web process runs a reaper task that does the same every beat, so a crash is noticed
even when no worker is left. Never on a GET: loading a page changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions.engine import kill_recorded
from sessions.models import EngineWorker, McpSession
from sessions.runtime.messages import StateChanged, encode_event
from sessions.runtime.store import in_db_thread

MISSED_BEATS = 3
log = logging.getLogger(__name__)


def new_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def beat(name: str) -> None:
    """Say this worker is alive (registering it on the first beat)."""
    EngineWorker.objects.update_or_create(name=name, defaults={"last_seen": timezone.now()})


def retire(name: str) -> None:
    """A worker that stops cleanly closes its sessions itself; it just leaves the register."""
    EngineWorker.objects.filter(name=name).delete()


def reap() -> list[McpSession]:
    """Mark lost the live sessions of workers whose heartbeat stopped; return those sessions."""
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.INSPECTOR_WORKER_HEARTBEAT * MISSED_BEATS)
    lost: list[McpSession] = []
    for worker in EngineWorker.objects.filter(last_seen__lt=cutoff):
        with transaction.atomic():
            # Deleted only while still stale: a worker that beat meanwhile keeps its row and sessions.
            if not EngineWorker.objects.filter(pk=worker.pk, last_seen__lt=cutoff).delete()[0]:
                continue
            note = (
                f"its engine worker {worker.name} stopped answering "
                f"(last heartbeat {worker.last_seen:%H:%M:%S} UTC); "
                "frames up to its last write are kept"
            )
            sessions = list(McpSession.objects.filter(worker=worker.name, status__in=McpSession.LIVE))
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


async def reap_and_tell() -> list[McpSession]:
    """One round of reaping (on the runtime's database thread), then tell the pages watching."""
    lost = await in_db_thread(reap)()
    await tell_viewers(lost)
    return lost


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
