"""Run the session runtime in its own process: the hosted set-up (Redis channel layer, PostgreSQL)."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions.engine import undumpable
from sessions.runtime import workers
from sessions.runtime.host import Runtime, warm_up_in_background
from sessions.runtime.store import close_connections, in_db_thread

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Own live MCP connections for the web processes, taking sessions from the channel layer."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--check",
            action="store_true",
            help="exit 0 if a worker on this machine has a fresh heartbeat, else 1 (a container healthcheck)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            if not workers.beating_here():
                raise CommandError("no engine worker on this machine has a fresh heartbeat")
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
        tasks = [asyncio.create_task(runtime.serve()), asyncio.create_task(self.heartbeat(name))]
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runtime.shutdown("the engine worker stopped")
        await in_db_thread(workers.retire)(name)
        await close_connections()

    async def heartbeat(self, name: str) -> None:
        """Beat, and reap (the sessions of workers that stopped beating, those no worker took); a
        database hiccup is logged."""
        while True:
            await asyncio.sleep(settings.INSPECTOR_WORKER_HEARTBEAT)
            try:
                await in_db_thread(workers.beat)(name)
                await workers.reap_and_tell()
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                log.warning("heartbeat of %s failed: %s", name, exc)
