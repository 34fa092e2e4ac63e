"""Hosted engine workers: heartbeats, and marking lost the sessions of a worker that stopped beating.

A worker (``manage.py run_engine_worker``) registers an ``EngineWorker`` row and refreshes its
``last_seen`` every ``INSPECTOR_WORKER_HEARTBEAT`` seconds; each session it owns records the worker's
name. A worker whose heartbeat is three beats old is gone (killed, out of memory, its machine lost):
its live sessions become ``lost``, with every frame up to the last write kept, and the pages watching
them are told. Workers reap each other as they beat; web processes reap when a page loads, at most
once a beat, so a crash is noticed even when no worker is left.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from datetime import timedelta
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions.models import EngineWorker, McpSession
from sessions.runtime.messages import StateChanged, encode_event

MISSED_BEATS = 3
_last_reap = 0.0


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
                status=McpSession.Status.LOST, status_note=note, worker_channel="", ended=now
            )
            lost += sessions
    return lost


def reap_due() -> bool:
    """Whether a web process should reap now: hosted only, at most once a heartbeat per process.

    No database work: pages call it on every load, and in the embedded set-up it is always False.
    """
    global _last_reap
    if settings.INSPECTOR_EMBEDDED_RUNTIME:
        return False
    now = time.monotonic()
    if now - _last_reap < settings.INSPECTOR_WORKER_HEARTBEAT:
        return False
    _last_reap = now
    return True


def reap_if_due() -> list[McpSession]:
    """Reap when it is due (see reap_due); the sessions marked lost."""
    return reap() if reap_due() else []


async def tell_viewers(sessions: list[McpSession]) -> None:
    """Let the pages watching these sessions show that they are lost."""
    layer: Any = get_channel_layer()
    for session in sessions:
        await layer.group_send(session.group_name, encode_event(StateChanged("lost")))
