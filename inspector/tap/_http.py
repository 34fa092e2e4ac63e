"""The HTTP tap's run: listen, forward until stopped (SIGINT, SIGTERM, SIGHUP), record as it goes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import sys
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from inspector.tap._options import TapOptions

__all__ = ["run"]


def run(options: TapOptions) -> int:
    """Serve until a signal says stop; return 0, or 1 when the address cannot be listened on."""
    sys.setswitchinterval(0.0001)  # the forwarding loop waits for the interpreter lock while the spool works
    items: queue.SimpleQueue[Any] = queue.SimpleQueue()
    return asyncio.run(_serve(options, items))


class Batches:
    """What the forwarding loop hands the spool thread, handed over once per turn of the loop rather
    than item by item: each hand-over wakes that thread, which then contends for the interpreter lock
    while an answer is still on its way to the host. Order is kept; another thread's items go at once."""

    def __init__(self, items: queue.SimpleQueue[Any], loop: asyncio.AbstractEventLoop) -> None:
        self.items, self.loop = items, loop
        self.pending: list[Any] = []
        self.thread = threading.get_ident()

    def put(self, item: Any) -> None:
        if threading.get_ident() != self.thread:
            self.items.put(item)
            return
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.append(item)

    def flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.items.put(batch)


async def _serve(options: TapOptions, items: queue.SimpleQueue[Any]) -> int:
    from inspector.tap._http_gate import HttpTraffic
    from inspector.tap._proxy import Proxy

    assert options.listen is not None and options.url is not None
    host, port = options.listen
    loop = asyncio.get_running_loop()
    batches = Batches(items, loop)
    traffic = HttpTraffic(batches)
    traffic.server_label = f"{options.name} {options.url}"
    proxy = Proxy(options.url, batches, rewrite_resource=options.rewrite_resource, traffic=traffic)
    traffic.on_close.append(lambda: loop.call_soon_threadsafe(proxy.close_hosts))
    try:
        server = await asyncio.start_server(proxy.serve, host, port, reuse_address=True)
    except OSError as exc:
        _say(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        await proxy.aclose()
        return 1
    bound = server.sockets[0].getsockname()[1]
    proxy.tap_origin = f"http://{f'[{host}]' if ':' in host else host}:{bound}"
    parts = urlsplit(options.url)
    listen_url = proxy.tap_origin + parts.path + (f"?{parts.query}" if parts.query else "")
    items.put(("http-start", listen_url, time.time(), time.monotonic()))
    from inspector.tap._http_spool import HttpSpool

    spool = threading.Thread(target=HttpSpool(options, items, traffic).run, name="tap-spool", daemon=True)
    spool.start()
    _say(f"point the host at {listen_url} (forwarding to {options.url})")
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError, NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        _second_signal_ends_at_once(loop)
        server.close()
        await proxy.aclose()
        batches.flush()
        items.put(("http-stop", "the tap stopped", time.time(), time.monotonic()))
        items.put(None)
        # Every frame the spool was handed is written before the tap ends, however far behind a loaded
        # machine left it (its first frame alone compiles the schemas); a second signal does not wait.
        await asyncio.to_thread(spool.join)
    return 0


def _second_signal_ends_at_once(loop: asyncio.AbstractEventLoop) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError, NotImplementedError):
            loop.remove_signal_handler(sig)
            signal.signal(sig, signal.SIG_DFL)


def _say(message: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"mcp-inspector tap: {message}\n".encode())
