"""Requests run their synchronous code on kept threads, each with its database connection (issue 10)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.core.signals import request_finished
from django.db import connection

from inspector.request_threads import PooledThreadsHandler, ThreadPool


def test_a_returned_executor_serves_the_next_borrower_and_extras_end() -> None:
    pool = ThreadPool(keep=1)
    first, second = pool.borrow(), pool.borrow()
    assert first is not second  # two requests in flight: two threads
    threads = [e.submit(threading.current_thread).result(5) for e in (first, second)]
    assert threads[0] is not threads[1]
    pool.give_back(first)
    pool.give_back(second)  # one more than it keeps: closed, its thread ends
    threads[1].join(5)
    assert not threads[1].is_alive() and threads[0].is_alive()
    assert pool.borrow() is first and pool.idle == 0


async def _get(app: Any, path: str) -> int:
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5000),
    }
    talk = ApplicationCommunicator(app, scope)
    await talk.send_input({"type": "http.request", "body": b""})
    start = await talk.receive_output(10)
    await talk.receive_output(10)  # the body
    await talk.wait(10)
    return int(start["status"])


def _three_healthz(app: Any) -> list[int]:
    """Three requests one after another: their statuses."""

    async def three() -> list[int]:
        return [await _get(app, "/healthz") for _ in range(3)]

    return asyncio.run(three())


@pytest.mark.django_db(transaction=True)
def test_requests_one_after_another_share_a_thread_and_its_database_connection() -> None:
    seen: list[tuple[str, int]] = []

    def record(**kwargs: Any) -> None:  # runs on the request's thread as the request ends
        connection.ensure_connection()
        seen.append((threading.current_thread().name, id(connection.connection)))

    request_finished.connect(record, dispatch_uid="test_request_threads")
    try:
        app = PooledThreadsHandler()
        assert _three_healthz(app) == [200, 200, 200]
        # The last request's end is queued, not waited for: its thread runs it.
        app.threads.borrow().submit(lambda: None).result(10)
    finally:
        request_finished.disconnect(dispatch_uid="test_request_threads")
    assert len(seen) == 3
    assert len(set(seen)) == 1, seen  # one thread, one connection, not one each
    assert seen[0][0].startswith("request-")


@pytest.mark.django_db(transaction=True)
def test_both_ends_housekeeping_runs_once_a_request_on_its_thread_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from django.core.signals import request_started

    seen: list[tuple[str, str]] = []

    def started(**kwargs: Any) -> None:
        seen.append(("started", threading.current_thread().name))

    def finished(**kwargs: Any) -> None:
        seen.append(("finished", threading.current_thread().name))
        if len(seen) == 4:
            raise RuntimeError("a receiver failed")  # logged, the next request unharmed

    request_started.connect(started, dispatch_uid="test_housekeeping")
    request_finished.connect(finished, dispatch_uid="test_housekeeping")
    try:
        app = PooledThreadsHandler()
        assert _three_healthz(app) == [200, 200, 200]
        # The last request's end is queued, not waited for: its thread runs it.
        idle = app.threads.borrow()
        idle.submit(lambda: None).result(10)
    finally:
        request_started.disconnect(dispatch_uid="test_housekeeping")
        request_finished.disconnect(dispatch_uid="test_housekeeping")
    assert [what for what, _ in seen] == ["started", "finished"] * 3
    assert len({thread for _, thread in seen}) == 1 and seen[0][1].startswith("request-")
    assert "request housekeeping failed" in caplog.text


def test_twisted_keeps_no_access_log_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Daphne's HTTP factory formatted Twisted's access line for every request, query string and all."""
    from daphne import server
    from twisted.python import log

    from inspector.__main__ import quiet_twisted_access_log

    monkeypatch.setattr(server, "HTTPFactory", server.HTTPFactory)  # put back after the test
    written: list[str] = []
    file = type("File", (), {"write": lambda self, line: written.append(line)})()
    monkeypatch.setattr(log, "logfile", file)
    quiet_twisted_access_log()
    factory = server.HTTPFactory(server=None)
    factory.startFactory()
    factory.log(object())  # type: ignore[arg-type]  # not even looked at
    factory.stopFactory()
    assert written == []
