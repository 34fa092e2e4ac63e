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

Django's handler also went to that thread and back twice a request only for housekeeping: the
``request_started`` signal (forget the query log, close a connection that is too old or broken)
and ``response.close()`` (the ``request_finished`` signal: the same, and the caches'). Each trip
woke the thread, then the event loop: about a tenth of the app's CPU for a tool call. Here both
are queued on the request's thread without waiting: the thread runs its work in order, so the
start's housekeeping still runs before any of the request's own, and the end's before the next
request's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.db import connections
from django.urls import set_script_prefix

log = logging.getLogger(__name__)

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
                await self._handle(scope, receive, send, executor)
        finally:
            # Work still queued on it (a view whose request was cancelled) runs before the next
            # request's, on the same thread: never two at once.
            self.threads.give_back(executor)

    async def _handle(
        self, scope: dict[str, Any], receive: Any, send: Any, executor: ThreadPoolExecutor
    ) -> None:
        """``ASGIHandler.handle``, with the housekeeping at both ends queued on the request's thread."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        _queue(executor, signals.request_started.send, sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None  # a request Django could not make comes with its answer
            body_file.close()
            await self.send_response(error_response, send)
            _queue(executor, error_response.close)
            return

        async def process_request() -> Any:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away meanwhile
                await self.send_response(response, send)
            return response

        # As Django's: a disconnect while the view runs cancels it (the view may handle that).
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(process_request()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            _queue(executor, signals.request_finished.send, sender=self.__class__)
        else:
            _queue(executor, response.close)
        body_file.close()


def _queue(executor: ThreadPoolExecutor, work: Any, **kwargs: Any) -> None:
    """Run ``work`` on the request's thread after what is queued there, without waiting for it (in a
    copy of the request's context, as ``sync_to_async`` would)."""
    context = contextvars.copy_context()
    executor.submit(lambda: context.run(work, **kwargs)).add_done_callback(_log_failure)


def _log_failure(done: Future[Any]) -> None:
    if not done.cancelled() and (error := done.exception()) is not None:
        log.error("request housekeeping failed", exc_info=error)
