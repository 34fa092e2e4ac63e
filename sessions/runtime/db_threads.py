"""Threads of our own for database work done from the event loop, each keeping its connections.

Not the thread that Django shares between thread-sensitive calls (``sync_to_async``, channels'
``database_sync_to_async``): a request in a sync middleware may hold that one for as long as its view
runs, and channels closes its connection after every call, so each call opens one again.

- The runtime's thread (``in_db_thread``): frames, session rows, reviews; one thread keeps its writes
  from contending with each other.
- The live pages' thread (``in_pages_thread``): what the session page's and the shared timeline's
  sockets read and render (a form's session lookup, a call card, a page of rows). Apart from the
  runtime's, so a page's read never waits behind a flood's writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from django.db import connections

__all__ = ["close_connections", "in_db_thread", "in_pages_thread"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

_Call = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]
_Outcome = tuple["asyncio.Future[Any]", Any, BaseException | None]

_SETTLE_EVERY = 0.002
"""Seconds of database work after which the callers waiting so far are told, though more is queued."""


class _Queue:
    """The calls waiting for one database thread, run there in the order they came, many per hop.

    A call of its own on the thread (``run_in_executor``) costs more than a small write it carries:
    a submission, a wake-up of the thread, and one of the event loop to hear back. When many sessions
    write at once (a thousand ending with the process), the calls queued while the thread is busy go
    in its next turn, and their callers are told together. Each call runs as it did alone (its own
    transaction or autocommit); one that fails fails only its own caller; one whose caller gave up
    (cancelled) before it ran is skipped, as ``run_in_executor`` skips it.
    """

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._calls: list[_Call] = []
        self._draining = False

    def submit(self, call: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        queued: _Call = (loop, future, call)
        with self._lock:
            self._calls.append(queued)
            if self._draining:
                return future
            self._draining = True
        try:
            self._executor.submit(self._drain)
        except BaseException:  # the executor is shut down (the interpreter is exiting)
            with self._lock:
                self._draining = False
                self._calls.remove(queued)
            raise
        return future

    def _drain(self) -> None:
        """On the database thread: run what is queued, and what is queued meanwhile, then stop."""
        while True:
            with self._lock:
                calls, self._calls = self._calls, []
                if not calls:
                    self._draining = False
                    return
            done: list[tuple[asyncio.AbstractEventLoop, _Outcome]] = []
            told = time.monotonic()
            for loop, future, call in calls:
                if future.cancelled():
                    continue
                try:
                    done.append((loop, (future, call(), None)))
                except BaseException as exc:  # handed to the caller, as run_in_executor hands it
                    done.append((loop, (future, None, exc)))
                if time.monotonic() - told > _SETTLE_EVERY:
                    _tell(done)
                    done, told = [], time.monotonic()
            _tell(done)

    def runs(self, fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
        """``fn`` (blocking, on the database) as a coroutine function that runs it on this thread."""

        def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            for conn in connections.all(initialized_only=True):
                conn.health_check_done = False  # type: ignore[attr-defined]  # CONN_HEALTH_CHECKS: test it first
            try:
                return fn(*args, **kwargs)
            finally:
                _keep_connections()

        @functools.wraps(fn)
        async def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            result: _R = await self.submit(functools.partial(call, *args, **kwargs))
            return result

        return run


def _tell(done: list[tuple[asyncio.AbstractEventLoop, _Outcome]]) -> None:
    """Hand each outcome to its caller: one wake-up of each event loop for all of them."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
    for loop, outcome in done:
        by_loop.setdefault(loop, []).append(outcome)
    for loop, outcomes in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, outcomes)


def _settle(outcomes: list[_Outcome]) -> None:
    for future, result, error in outcomes:
        if future.done():
            continue
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


def _keep_connections() -> None:
    """Keep the thread's connections open between calls, unless one is no longer fit for use.

    Opening one per call cost more than most calls it served. Unlike ``close_old_connections``,
    ``CONN_MAX_AGE`` does not apply: these threads live as long as the process, and each only ever
    runs one call at a time.
    """
    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.get_autocommit() != conn.settings_dict["AUTOCOMMIT"]:
            conn.close()  # left in a transaction by a call that failed mid-way
        elif conn.errors_occurred:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()


_runtime = _Queue("mcp-runtime-db")
_pages = _Queue("mcp-pages-db")


def in_db_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """Run a blocking database function on the runtime's database thread."""
    return _runtime.runs(fn)


def in_pages_thread(fn: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """Run a blocking database function for a live page's socket on the pages' database thread."""
    return _pages.runs(fn)


def _close_all() -> None:
    connections.close_all()


async def close_connections() -> None:
    """Close both threads' connections (the runtime stopped; a test database may be dropped next)."""
    await _runtime.runs(_close_all)()
    await _pages.runs(_close_all)()
