"""The servers the benchmarks talk to: launch specs for stdio, and HTTP servers started on free ports."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ROOT / "tests" / "servers"
EVERYTHING_JS = SERVERS / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SDK_SERVER = SERVERS / "sdk_server.py"
BAD_STDIO = SERVERS / "bad_stdio.py"


def node() -> str:
    path = shutil.which("node")
    if path is None or not EVERYTHING_JS.is_file():
        sys.exit(
            "bench needs `node` and server-everything: run tests/run (or npm install --prefix tests/servers)"
        )
    return path


def everything_stdio() -> list[str]:
    return [node(), str(EVERYTHING_JS)]


def sdk_stdio() -> list[str]:
    return [sys.executable, str(SDK_SERVER), "stdio"]


def bad_stdio(mode: str) -> list[str]:
    return [sys.executable, str(BAD_STDIO), mode]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_server(argv: Sequence[str], port: int, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Run ``argv`` until 127.0.0.1:``port`` accepts connections; yield http://127.0.0.1:port/mcp."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server {list(argv)} did not start listening on port {port}")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def everything_http() -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return http_server([node(), str(EVERYTHING_JS), "streamableHttp"], port, env={"PORT": str(port)})


def sdk_http(*flags: str) -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return http_server([sys.executable, str(SDK_SERVER), "http", "--port", str(port), *flags], port)


def django_on(folder: str) -> None:
    """Set Django up in this process on ``folder`` as its data folder, its SQLite database migrated."""
    os.environ["INSPECTOR_DATA_DIR"] = folder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def child_json(module: str, *args: str, show_stderr: bool = False) -> dict[str, Any]:
    """Run ``python -m module args`` (a section that sets Django up, in a process of its own); the JSON
    object its last line prints. Its stderr goes with the error, or straight through with ``show_stderr``."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=None if show_stderr else subprocess.PIPE,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = " (its error is above)" if show_stderr else f":\n{done.stderr[-3000:]}"
        raise RuntimeError(f"{module} failed{why}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@contextlib.contextmanager
def scratch_app(prefix: str) -> Iterator[str]:
    """This process as the app on a temporary data folder and SQLite database, migrated; a tiny HTTP
    server (``bench/tiny_http.py``) beside it, whose URL it yields. Both go at the end."""
    import tempfile

    data = tempfile.mkdtemp(prefix=prefix)
    django_on(data)
    port = free_port()
    try:
        with http_server([sys.executable, "-m", "bench.tiny_http", str(port)], port) as url:
            yield url
    finally:
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def busy_load(processes: int, nice: int) -> Iterator[list[int]]:
    """``processes`` Python busy loops at niceness ``nice``, running until the block ends; yields their pids.

    A fixed, repeatable stand-in for a machine others are using: every app measured inside the block
    competes with the same load.
    """
    loops = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            stdin=subprocess.DEVNULL,
            preexec_fn=lambda: os.nice(nice),
        )
        for _ in range(processes)
    ]
    try:
        yield [p.pid for p in loops]
    finally:
        for p in loops:
            p.kill()
        for p in loops:
            p.wait()
