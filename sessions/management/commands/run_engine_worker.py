"""Run the session runtime in its own process: the hosted set-up (Redis channel layer, PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions.engine import undumpable
from sessions.runtime import workers
from sessions.runtime.host import Runtime, warm_up_in_background
from sessions.runtime.link import Link, link_of
from sessions.runtime.store import close_connections, in_db_thread

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Own live MCP connections for the web processes, taking sessions from the channel layer."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help=(
                "exit 0 if a worker on this machine has a fresh heartbeat and receives commands, "
                "else 1 and why (a container healthcheck)"
            ),
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            if problem := workers.health_here():
                raise CommandError(problem)
            return
        if "InMemoryChannelLayer" in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
            raise CommandError("an engine worker needs a shared channel layer: set REDIS_URL")
        if settings.INSPECTOR_HOSTED:
            # Its environment holds the deployment's secrets: the servers it starts, of the same user
            # when unsandboxed, must not read it through /proc (as mcp-inspector, inspector/__main__.py).
            undumpable()
        # The collector tuned for taking in floods of frames, as mcp-inspector's (inspector/__main__.py).
        gc.set_threshold(50_000, 20, 100)
        asyncio.run(self.serve())

    async def serve(self) -> None:
        name = workers.new_name()
        runtime = Runtime(worker=name)
        warm_up_in_background()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await in_db_thread(workers.beat)(name)
        self.stdout.write(f"engine worker ready: {name}", ending="\n")
        self.stdout.flush()
        serving = asyncio.create_task(runtime.serve())
        tasks = [serving, asyncio.create_task(self.heartbeat(name, runtime, serving))]
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runtime.shutdown("the engine worker stopped")
        await in_db_thread(workers.retire)(name)
        await close_connections()

    async def heartbeat(self, name: str, runtime: Runtime, serving: asyncio.Task[None]) -> None:
        """Beat while commands reach this worker, else say why (at once: ``--check`` reads it), and
        reap (the sessions of workers that stopped beating, those no worker took); a database hiccup is
        logged. A worker that cannot take commands for all but one of the beats after which the
        others take it for dead ends its sessions as lost itself, before the reapers kill their
        servers under them."""
        link = link_of(runtime.layer)
        every = settings.INSPECTOR_WORKER_HEARTBEAT
        beaten = time.monotonic()
        seen = link.changes if link is not None else 0
        while True:
            seen = await self._next_beat(link, seen, every)
            problem = _problem(link, serving)
            try:
                if not problem:
                    await in_db_thread(workers.beat)(name)
                    beaten = time.monotonic()
                else:
                    await in_db_thread(workers.unwell)(name, problem)
                    if runtime.owners and time.monotonic() - beaten >= every * (workers.MISSED_BEATS - 1):
                        log.warning("engine worker %s cannot receive commands: %s", name, problem)
                        runtime.lose_all(
                            f"its engine worker {name} cannot receive commands: {problem}; "
                            "frames up to its last write are kept"
                        )
                await workers.reap_and_tell()
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                log.warning("heartbeat of %s failed: %s", name, exc)

    @staticmethod
    async def _next_beat(link: Link | None, seen: int, every: float) -> int:
        """Wait a beat, or less when the channel layer goes down or comes back; the link's changes."""
        if link is None:
            await asyncio.sleep(every)
            return seen
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(every):
                seen = await link.changed(seen)
        return seen


def _problem(link: Link | None, serving: asyncio.Task[None]) -> str:
    """Why commands do not reach this worker now; empty when they do."""
    if link is not None and not link.up:
        return f"{link.problem} (since {time.strftime('%H:%M:%S', time.gmtime(link.down_since))} UTC)"
    if serving.done():
        return "its runtime stopped taking sessions"
    return ""
