"""The database threads: the live pages' reads apart from the runtime's writes, each keeping connections."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.backends.signals import connection_created

from sessions.models import McpSession
from sessions.runtime.db_threads import close_connections, in_db_thread, in_pages_thread

pytestmark = pytest.mark.django_db(transaction=True)


async def test_a_page_reads_while_the_runtime_thread_is_busy() -> None:
    release = threading.Event()
    busy = asyncio.ensure_future(in_db_thread(release.wait)(10))
    try:
        assert await asyncio.wait_for(in_pages_thread(McpSession.objects.count)(), 5) == 0
        assert not busy.done()
    finally:
        release.set()
    assert await busy is True


async def test_the_pages_thread_opens_one_connection_for_many_reads() -> None:
    await close_connections()
    opened: list[str] = []

    def note(sender: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(note)
    try:
        for _ in range(5):
            await in_pages_thread(McpSession.objects.count)()
    finally:
        connection_created.disconnect(note)
    assert len(opened) == 1 and opened[0].startswith("mcp-pages-db"), opened


async def test_a_read_that_fails_inside_a_transaction_leaves_the_next_a_fresh_connection() -> None:
    def fails() -> None:
        transaction.set_autocommit(False)
        raise RuntimeError("mid-way")

    with pytest.raises(RuntimeError, match="mid-way"):
        await in_pages_thread(fails)()
    assert await in_pages_thread(lambda: connection.get_autocommit())() is True
