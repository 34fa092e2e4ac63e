"""Django's ASGI handler with its request threads kept, rather than one new thread per request.

Django runs each request's synchronous code (the session and user lookups, ORM queries in views,
template rendering) on a thread of that request's own: its ``ASGIHandler`` enters
``ThreadSensitiveContext()``, which makes a new single-thread executor for the request and joins its
thread, from yet another new thread, when the request ends. So every request started two threads
and opened (and, at the end, closed) a database connection of its own: about a third of the app's
CPU for one tool call (issue 10).

``PooledThreadsHandler`` lends each request a single-thread executor from a pool instead
(``ThreadSensitiveContext(executor=…)``, asgiref's way of choosing the executor): a request still
has one thread to itself while it runs, as Django expects (its connection, its transactions), and
the thread, with its database connection (``CONN_MAX_AGE``), serves the next request. Requests in
flight at once borrow as many executors; past ``KEEP`` idle ones the extra are closed.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler
from django.db import connections

KEEP = 8  # idle request threads kept, each with its database connection


class ThreadPool:
    """Single-thread executors lent to requests, one per request in flight."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()
        self._made = 0

    def borrow(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self._made += 1
            number = self._made
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"request-{number}")

    def give_back(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(executor)
                return
        # One too many: its thread closes its database connection, then ends (not waited for here).
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)

    @property
    def idle(self) -> int:
        return len(self._idle)


class PooledThreadsHandler(ASGIHandler):
    """``ASGIHandler`` whose requests run their synchronous code on pooled threads."""

    def __init__(self) -> None:
        super().__init__()
        self.threads = ThreadPool()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.threads.borrow()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            # Work still queued on it (a view whose request was cancelled) runs before the next
            # request's, on the same thread: never two at once.
            self.threads.give_back(executor)
