"""Run the session runtime in its own process: the hosted set-up (Redis channel layer, PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from sessions.runtime import Runtime


class Command(BaseCommand):
    help = "Own live MCP connections for the web processes, taking sessions from the channel layer."

    def handle(self, *args: Any, **options: Any) -> None:
        if "InMemoryChannelLayer" in settings.CHANNEL_LAYERS["default"]["BACKEND"]:
            raise CommandError("an engine worker needs a shared channel layer: set REDIS_URL")
        asyncio.run(self.serve())

    async def serve(self) -> None:
        runtime = Runtime()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        self.stdout.write("engine worker ready", ending="\n")
        self.stdout.flush()
        serving = asyncio.create_task(runtime.serve())
        await stop.wait()
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await runtime.shutdown("the engine worker stopped")
