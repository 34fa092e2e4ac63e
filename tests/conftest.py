"""Shared pytest fixtures: MCP servers to test against.

Every fixture returns plain data (launch specs for stdio servers, URLs for HTTP servers); nothing here
imports the engine. HTTP servers run as subprocesses on free ports, bound to 127.0.0.1 where the server
allows it (server-everything listens on all interfaces), and are stopped at teardown.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

import pytest

# Keep the tests' settings (secret key, SQLite file) out of the user's own data directory.
os.environ.setdefault("INSPECTOR_DATA_DIR", tempfile.mkdtemp(prefix="mcp-inspector-tests-"))

TESTS_DIR = Path(__file__).resolve().parent
SERVERS_DIR = TESTS_DIR / "servers"
EVERYTHING_JS = SERVERS_DIR / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SDK_SERVER = SERVERS_DIR / "sdk_server.py"
BAD_STDIO = SERVERS_DIR / "bad_stdio.py"
BAD_HTTP = SERVERS_DIR / "bad_http.py"


STARTUP_TIMEOUT = 20.0
STOP_GRACE = 5.0


@functools.cache
def modes_of(script: Path) -> frozenset[str]:
    """The modes a misbehaving server script offers: its MODES literal, read without importing it."""
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MODES" for t in node.targets):
            return frozenset(ast.literal_eval(node.value))
    raise LookupError(f"{script} has no MODES")


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(log: IO[bytes], limit: int = 4000) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:]


def stop_process(proc: subprocess.Popen, grace: float = STOP_GRACE) -> None:
    """Terminate `proc`, then kill it if it is still alive after `grace` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace)


@contextlib.contextmanager
def start_http_server(
    argv: Sequence[str],
    port: int,
    env: Mapping[str, str] | None = None,
    timeout: float = STARTUP_TIMEOUT,
) -> Iterator[subprocess.Popen]:
    """Start `argv` as a subprocess and wait until 127.0.0.1:`port` accepts connections.

    `env` entries are added to the current environment. The server's stdout and stderr go to a temporary
    file whose tail is shown if the server exits or does not listen within `timeout` seconds. On exit the
    process is terminated, then killed after a grace period.
    """
    full_env = {**os.environ, **(env or {})}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=full_env
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"server {list(argv)} did not listen on port {port} within {timeout}s; "
                        f"output:\n{_log_tail(log)}"
                    )
                try:  # doubles as the poll interval and the "did it die?" check
                    code = proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    continue
                pytest.fail(
                    f"server {list(argv)} exited with code {code} before listening; output:\n{_log_tail(log)}"
                )
            yield proc
        finally:
            stop_process(proc)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.fail("`node` is not on PATH; server-everything needs Node 20 or newer")
    return node


def _everything_js() -> str:
    if not EVERYTHING_JS.is_file():
        pytest.fail(
            f"{EVERYTHING_JS} is missing: run tests/run (or `npm install --no-audit --no-fund "
            f"--prefix tests/servers`) to install @modelcontextprotocol/server-everything"
        )
    return str(EVERYTHING_JS)


# --- server-everything (npm @modelcontextprotocol/server-everything 2026.8.31) -----------------------------


@pytest.fixture(scope="session")
def everything_stdio() -> dict:
    """Launch spec for server-everything over stdio: {"command": node, "args": [".../dist/index.js"]}."""
    return {"command": _node(), "args": [_everything_js()]}


@pytest.fixture(scope="session")
def everything_http() -> Iterator[str]:
    """URL of a server-everything Streamable HTTP endpoint, http://127.0.0.1:PORT/mcp."""
    argv, port = [_node(), _everything_js(), "streamableHttp"], free_port()
    with start_http_server(argv, port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="session")
def everything_sse() -> Iterator[str]:
    """URL of a server-everything legacy HTTP+SSE endpoint, http://127.0.0.1:PORT/sse."""
    argv, port = [_node(), _everything_js(), "sse"], free_port()
    with start_http_server(argv, port, env={"PORT": str(port)}):
        yield f"http://127.0.0.1:{port}/sse"


# --- Python SDK server (tests/servers/sdk_server.py) --------------------------------------------------------


@pytest.fixture(scope="session")
def sdk_stdio() -> dict:
    """Launch spec for the SDK test server over stdio."""
    return {"command": sys.executable, "args": [str(SDK_SERVER), "stdio"]}


def _sdk_http(*flags: str) -> Iterator[str]:
    port = free_port()
    with start_http_server([sys.executable, str(SDK_SERVER), "http", "--port", str(port), *flags], port):
        yield f"http://127.0.0.1:{port}/mcp"


@dataclasses.dataclass(frozen=True)
class HttpsServer:
    url: str
    ca_file: str
    """The PEM of the private CA that signed the server's certificate (nobody else trusts it)."""


@pytest.fixture(scope="session")
def sdk_https(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsServer]:
    """SDK test server over HTTPS, with a certificate from a throwaway CA (trustme)."""
    import trustme

    where = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    ca.cert_pem.write_to_path(str(where / "ca.pem"))
    cert.private_key_and_cert_chain_pem.write_to_path(str(where / "server.pem"))
    port = free_port()
    argv = [sys.executable, str(SDK_SERVER), "http", "--port", str(port), "--json"]
    with start_http_server([*argv, "--tls", str(where / "server.pem"), str(where / "server.pem")], port):
        yield HttpsServer(f"https://127.0.0.1:{port}/mcp", str(where / "ca.pem"))


@pytest.fixture(scope="session")
def sdk_http_sse() -> Iterator[str]:
    """SDK test server, stateful Streamable HTTP, SSE replies."""
    yield from _sdk_http()


@pytest.fixture(scope="session")
def sdk_http_json() -> Iterator[str]:
    """SDK test server, stateful Streamable HTTP, application/json replies."""
    yield from _sdk_http("--json")


@pytest.fixture(scope="session")
def sdk_http_stateless() -> Iterator[str]:
    """SDK test server, stateless Streamable HTTP (no session id), SSE replies."""
    yield from _sdk_http("--stateless")


# --- misbehaving servers ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bad_stdio() -> Callable[[str], dict]:
    """Factory: bad_stdio(mode) -> {"command": python, "args": [".../bad_stdio.py", mode]}."""

    def make(mode: str) -> dict:
        if mode not in modes_of(BAD_STDIO):
            raise ValueError(f"unknown bad_stdio mode {mode!r}; choose from {sorted(modes_of(BAD_STDIO))}")
        return {"command": sys.executable, "args": [str(BAD_STDIO), mode]}

    return make


@pytest.fixture
def bad_http() -> Iterator[Callable[[str], str]]:
    """Factory: bad_http(mode) -> "http://127.0.0.1:PORT/mcp".

    Each call starts a fresh server (state is per process); all are stopped after the test.
    """
    with contextlib.ExitStack() as stack:

        def make(mode: str) -> str:
            if mode not in modes_of(BAD_HTTP):
                raise ValueError(f"unknown bad_http mode {mode!r}; choose from {sorted(modes_of(BAD_HTTP))}")
            port = free_port()
            stack.enter_context(start_http_server([sys.executable, str(BAD_HTTP), mode, str(port)], port))
            return f"http://127.0.0.1:{port}/mcp"

        yield make


@pytest.fixture(autouse=True)
async def no_runtime_outlives_its_test() -> AsyncIterator[None]:
    """Each test starts with an empty in-memory channel layer and no embedded runtime left running."""
    yield
    from channels.layers import get_channel_layer

    from sessions.runtime.host import stop_embedded_runtime

    await stop_embedded_runtime("the test ended")
    layer = get_channel_layer()
    if hasattr(layer, "flush"):
        await layer.flush()
