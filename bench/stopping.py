"""Stopping with many live sessions: how long the runtime takes to close them all, losing no frame.

.venv/bin/python -m bench.stopping --sessions 1000 (prints one JSON line). In a process of its own,
on a fresh SQLite database: ``--sessions`` live sessions over Streamable HTTP to ``bench/tiny_http.py``
are started through the embedded runtime (as connecting does), then ``stop_embedded_runtime()``
(what SIGTERM runs) is timed. Every session must end ``closed`` with every frame it counted stored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from bench import servers

WAVE = 50  # sessions starting at once


async def open_sessions(count: int, url: str, user: Any = None) -> list[Any]:
    """``count`` sessions to the tiny server at ``url``, started through the embedded runtime as
    connecting starts one, a wave at a time; return them once every one is ``ready``."""
    from asgiref.sync import sync_to_async
    from channels.exceptions import ChannelFull
    from django.contrib.auth.models import User

    from sessions.models import McpSession
    from sessions.runtime import client
    from sessions.teams.access import personal_team

    def make() -> list[McpSession]:
        owner = user or User.objects.create(username="bench")
        team = personal_team(owner)
        config = {
            "name": "tiny", "transport": "http", "url": url, "command": "", "args": [], "env": {},
            "protocol_version": "2025-11-25", "capabilities": {"review_roots": False},
            "timeout": 30, "max_total_timeout": 120,
        }  # fmt: skip
        rows = [McpSession(owner=owner, team=team, name="tiny", config=config) for _ in range(count)]
        return McpSession.objects.bulk_create(rows)

    sessions = await sync_to_async(make)()
    pks = [s.pk for s in sessions]

    def settled() -> int:
        return McpSession.objects.filter(pk__in=pks, status__in=("ready", "failed", "closed")).count()

    for index, session in enumerate(sessions):
        if index % WAVE == 0:  # a few handshakes at a time: the tiny server is one process
            while await sync_to_async(settled)() < index - WAVE:
                await asyncio.sleep(0.05)
        while True:  # the in-memory layer holds 100 messages a channel: let the runtime take them
            try:
                await client.start_session(session)
                break
            except ChannelFull:
                await asyncio.sleep(0.01)

    def ready() -> int:
        return McpSession.objects.filter(pk__in=pks, status="ready").count()

    deadline = time.monotonic() + 300 + count / 20
    while (n := await sync_to_async(ready)()) < count:
        if time.monotonic() > deadline:
            notes = await sync_to_async(_others)()
            raise RuntimeError(f"only {n} of {count} sessions got ready; the others: {notes[:5]}")
        await asyncio.sleep(0.1)
    return sessions


async def run(count: int, url: str) -> dict[str, Any]:
    from asgiref.sync import sync_to_async
    from django.db.models import Count

    from sessions.models import McpSession
    from sessions.runtime.host import stop_embedded_runtime

    started = time.perf_counter()
    await open_sessions(count, url)
    opened = time.perf_counter() - started
    started, cpu = time.perf_counter(), time.process_time()
    await stop_embedded_runtime()
    stop_s, stop_cpu_s = time.perf_counter() - started, time.process_time() - cpu

    def check() -> tuple[int, int]:
        rows = McpSession.objects.annotate(stored=Count("frames"))
        closed = sum(1 for r in rows if r.status == "closed")
        lost = sum(1 for r in rows if r.stored != r.last_seq)
        return closed, lost

    closed, lost = await sync_to_async(check)()
    return {
        "sessions": count, "open_s": opened, "stop_s": stop_s, "stop_cpu_s": stop_cpu_s,
        "closed": closed, "lost": lost,
    }  # fmt: skip


def _others() -> list[tuple[str, str]]:
    """What the sessions that did not get ready say."""
    from sessions.models import McpSession

    return sorted({(s.status, s.status_note) for s in McpSession.objects.exclude(status="ready")})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stopping")
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    with servers.scratch_app("bench-stopping-") as url:
        result = asyncio.run(run(args.sessions, url))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
