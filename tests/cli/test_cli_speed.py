"""What keeps one CLI call over HTTP cheap (issue 10), held in place: the session's DELETE reuses a
kept-alive connection instead of cutting a reply stream and opening another, the process ends
without the interpreter's teardown but after what teardown does that matters, and httpcore's
search for a missing sniffio happens once."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.paths import REPO

pytestmark = pytest.mark.slow

REQUEST_LINE = re.compile(rb"^(GET|POST|DELETE) ", re.MULTILINE)
RPC_METHOD = re.compile(rb'"method":\s*"([^"]+)"')
LAST_CHUNK = b"0\r\n\r\n"  # the end of a chunked body

Event = tuple[str, int, str]  # what, connection number, detail


@contextlib.asynccontextmanager
async def watching_proxy(url: str) -> AsyncIterator[tuple[str, list[Event]]]:
    """A TCP proxy in front of ``url``'s server; yields its URL and, in the order it saw them, the
    connections opened (``open``), the requests (``request``, GET/POST/DELETE), the JSON-RPC methods
    sent (``message``) and the client's end of each connection (``closed``).

    It passes on the end of a chunked body (a reply stream's end) 20 ms after the rest, as from a
    server that ends its stream a moment after the response, which servers may do."""
    where = urlsplit(url)
    events: list[Event] = []
    numbers = itertools.count()

    async def pipe(conn: int, source: asyncio.StreamReader, sink: asyncio.StreamWriter, up: bool) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await source.read(65536):
                if up:
                    events.extend(("request", conn, m.group(1).decode()) for m in REQUEST_LINE.finditer(data))
                    events.extend(("message", conn, m.group(1).decode()) for m in RPC_METHOD.finditer(data))
                elif data == LAST_CHUNK or data.endswith(b"\r\n" + LAST_CHUNK):
                    sink.write(data[: -len(LAST_CHUNK)])
                    await sink.drain()
                    await asyncio.sleep(0.02)
                    data = LAST_CHUNK
                sink.write(data)
                await sink.drain()
        if up:
            events.append(("closed", conn, ""))
        sink.close()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        conn = next(numbers)
        events.append(("open", conn, ""))
        server_r, server_w = await asyncio.open_connection(where.hostname, where.port)
        await asyncio.gather(pipe(conn, client_r, server_w, True), pipe(conn, server_r, client_w, False))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        port = server.sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}{where.path}", events


async def test_the_cli_ends_its_http_session_over_a_kept_alive_connection_and_cuts_no_reply(
    everything_http: str,
) -> None:
    async with watching_proxy(everything_http) as (url, events):
        cli = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "inspector", "--cli", url, "--method", "tools/call",
            "--tool-name", "echo", "--tool-arg", "message=hello",
            cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(30):
            out, err = await cli.communicate()
            # The proxy sees the client's side of every connection end (the process is gone).
            while sum(e[0] == "open" for e in events) > sum(e[0] == "closed" for e in events):
                await asyncio.sleep(0.01)
    assert cli.returncode == 0, err.decode()
    assert json.loads(out)["content"][0]["text"] == "Echo: hello"
    (delete,) = [i for i, e in enumerate(events) if e[0] == "request" and e[2] == "DELETE"]
    (call,) = [e[1] for e in events if e[0] == "message" and e[2] == "tools/call"]
    # The session is still ended (DELETE), over a connection an earlier request used: no new one.
    assert any(e[0] == "request" and e[1] == events[delete][1] for e in events[:delete]), events
    # The call's reply stream was read to its end, not cut: its connection outlived the DELETE.
    assert events.index(("closed", call, "")) > delete, events


def test_end_process_runs_atexit_handlers_and_flushes_output_before_ending() -> None:
    code = (
        "import atexit, sys\n"
        "from inspector.cli import end_process\n"
        "atexit.register(lambda: sys.stderr.write('atexit ran'))\n"
        "sys.stdout.write('x' * 100000)\n"  # more than a buffer: the rest waits for the flush
        "end_process(3)\n"
        "print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout, proc.stderr) == (3, "x" * 100000, "atexit ran")


def test_a_missing_sniffio_is_looked_for_once_not_on_every_lock_httpcore_sets_up(tmp_path: Path) -> None:
    code = (
        "import importlib.util, json, sys\n"
        "installed = importlib.util.find_spec('sniffio') is not None\n"
        "import sessions.engine._http\n"
        "remembered = sys.modules.get('sniffio', 'absent') is None\n"
        "print(json.dumps({'installed': installed, 'remembered': remembered}))\n"
    )
    (tmp_path / "sniffio.py").write_text("")  # an installed sniffio, for the second run

    def run(*path: str) -> dict[str, bool]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((*path, str(REPO)))}
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=30
        )
        return dict(json.loads(proc.stdout))

    # Not installed (as here): its absence is remembered. Installed: left alone, for httpcore to import.
    here = run()
    assert here["remembered"] is not here["installed"], here
    assert run(str(tmp_path)) == {"installed": True, "remembered": False}


def test_the_cli_process_collects_garbage_rarely_and_still_runs_atexit_handlers() -> None:
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print(gc.get_threshold()[0]))\n"
        "sys.argv = ['mcp-inspector', '--cli', 'python', 'server.py', '--method', 'no/such']\n"
        "from inspector.__main__ import run\n"
        "run()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert (proc.returncode, proc.stdout) == (2, "100000\n"), proc.stderr
    assert proc.stderr.startswith("error: ")
