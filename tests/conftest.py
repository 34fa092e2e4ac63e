"""Shared pytest fixtures: MCP servers to test against; and the fast layer's guard.

Every fixture returns plain data (launch specs for stdio servers, URLs for HTTP servers); nothing here
uses the engine but short_close_grace (a shorter wait for stdio servers to exit). HTTP servers run as
subprocesses on free ports, bound to 127.0.0.1 where the server allows it (server-everything listens on
all interfaces), and are stopped at teardown.

A test not marked ``slow`` starts no process (``pytest -m "not slow"`` is the fast layer): one that
tries fails, and a ``browser`` test must be ``slow`` too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.browser import (  # noqa: F401 - fixtures for the browser tests
    app_context,
    app_env,
    browser,
    home,  # noqa: F401
    live_app,
)
from support.paths import SANDBOX_READ
from support.processes import HttpsServer, free_port, modes_of, start_http_server

TESTS_DIR = Path(__file__).resolve().parent
SERVERS_DIR = TESTS_DIR / "servers"

# For the processes the tests start (this one's settings are already read: tests set them in place).
os.environ.setdefault("INSPECTOR_SANDBOX_READ", ",".join(SANDBOX_READ))
EVERYTHING_JS = SERVERS_DIR / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
SDK_SERVER = SERVERS_DIR / "sdk_server.py"
PLANTED_SERVER = SERVERS_DIR / "planted.py"
BAD_STDIO = SERVERS_DIR / "bad_stdio.py"
BAD_HTTP = SERVERS_DIR / "bad_http.py"
BROWSER_FIXTURES = {"live_app", "browser", "app_context", "home"}


# --- the fast layer starts no process -----------------------------------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        drives_a_browser = item.get_closest_marker("browser") is not None
        if drives_a_browser and item.get_closest_marker("slow") is None:
            raise pytest.UsageError(f"{item.nodeid}: a browser test is slow too (@pytest.mark.slow)")
        if not drives_a_browser and BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            raise pytest.UsageError(f"{item.nodeid} drives a browser: mark it @pytest.mark.browser")


_running: list[pytest.Item] = []
_STARTED = pytest.StashKey[list[str]]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Any:
    # Around the whole test, so a session fixture a test sets up counts as that test's.
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.remove(item)


def _refused_in_a_fast_test(what: str) -> None:
    item = _running[-1] if _running else None
    if item is None or item.get_closest_marker("slow") is not None:
        return
    item.stash.setdefault(_STARTED, []).append(what)
    raise OSError(errno.EPERM, f"a test not marked slow starts no process ({what})")


@pytest.fixture(scope="session", autouse=True)
def fast_tests_start_no_process() -> Iterator[None]:
    """Every way the tests' code starts a program (subprocess, asyncio's subprocesses, Playwright's
    driver, multiprocessing, fork) refuses in a test not marked slow; the test then fails."""
    mp = pytest.MonkeyPatch()
    execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def guarded_execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> Any:
        _refused_in_a_fast_test(repr(args)[:200])
        return execute_child(self, args, *rest, **kwargs)

    def guard(module: Any, name: str) -> None:
        original = getattr(module, name)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            _refused_in_a_fast_test(f"{module.__name__}.{name}{repr(args)[:200]}")
            return original(*args, **kwargs)

        mp.setattr(module, name, guarded)

    mp.setattr(subprocess.Popen, "_execute_child", guarded_execute_child)
    import _posixsubprocess  # multiprocessing starts its processes through it, not through Popen

    for module, name in [(os, "fork"), (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system")]:
        guard(module, name)
    guard(_posixsubprocess, "fork_exec")
    try:
        yield
    finally:
        mp.undo()


@pytest.fixture(autouse=True)
def no_process_in_a_fast_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails the test even where its code caught the refusal (the runtime reports a failed start)."""
    yield
    started = request.node.stash.get(_STARTED, [])
    if started:
        pytest.fail(f"not marked slow, yet it started a process: {started}; mark it slow or use no process")


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


@pytest.fixture(scope="session")
def planted_stdio() -> dict:
    """Launch spec for build A of the planted-changes server over stdio (``--build B`` after it: build B)."""
    return {"command": sys.executable, "args": [str(PLANTED_SERVER), "stdio"]}


def _sdk_http(*flags: str) -> Iterator[str]:
    port = free_port()
    with start_http_server([sys.executable, str(SDK_SERVER), "http", "--port", str(port), *flags], port):
        yield f"http://127.0.0.1:{port}/mcp"


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


@pytest.fixture(scope="session", autouse=True)
def short_close_grace() -> Iterator[None]:
    """Stdio servers get 0.5 s, not the engine's 2 s, to exit after their stdin closes, before SIGTERM.

    server-everything keeps timers running and never exits on a closed stdin, so every session of it
    ending in this process (the app's and the engine's) would wait out the whole grace. The order
    (close stdin, wait, SIGTERM, wait, SIGKILL) is unchanged; tests of the shutdown itself set their
    own graces. Processes the tests start (the CLI, mcp-inspector) keep the engine's default.
    """
    import dataclasses

    from sessions.engine import StdioTarget

    defaults = StdioTarget.__init__.__defaults__
    # __init__'s defaults are those of the fields that have one, in order.
    with_default = [
        f.name
        for f in dataclasses.fields(StdioTarget)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    at = with_default.index("close_grace")
    assert defaults is not None and len(defaults) == len(with_default) and defaults[at] == 2.0, defaults
    StdioTarget.__init__.__defaults__ = (*defaults[:at], 0.5, *defaults[at + 1 :])
    try:
        yield
    finally:
        StdioTarget.__init__.__defaults__ = defaults


@pytest.fixture(scope="session", autouse=True)
def fast_password_hasher() -> Iterator[None]:
    """Passwords hashed with MD5, not PBKDF2: the tests check who gets in, not what a guess costs, and
    PBKDF2's rounds made the people of a test cost more than its requests. Processes the tests start
    (the browser's app, the hosted set-up) keep the real hashers."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def static_files_found_when_asked() -> Iterator[None]:
    """WhiteNoise finds a static file when it is asked for (its autorefresh), not by listing them all
    when the middleware is built: each test client builds its own, and the listing cost more than most
    tests. The app's processes the tests start, and tests/project/test_install.py's, list them as
    deployed."""
    from django.test import override_settings

    with override_settings(WHITENOISE_AUTOREFRESH=True):
        yield


@pytest.fixture(autouse=True)
def no_runtime_outlives_its_test(request: pytest.FixtureRequest) -> None:
    """Each test starts with an empty in-memory channel layer and no embedded runtime left running.

    Not browser tests: their app runs in its own process, and Playwright's sync API cannot share the
    thread with a running asyncio loop (an async fixture would start one)."""
    if request.node.get_closest_marker("browser") is None:
        request.getfixturevalue("stop_the_embedded_runtime")


@pytest.fixture
async def stop_the_embedded_runtime() -> AsyncIterator[None]:
    yield
    from channels.layers import get_channel_layer

    from sessions.runtime.host import stop_embedded_runtime

    await stop_embedded_runtime("the test ended")
    layer = get_channel_layer()
    if hasattr(layer, "flush"):
        await layer.flush()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database, and on PostgreSQL no connection left behind at the end: a thread
    of asgiref's executor, or a background import, may still hold one, and DROP DATABASE would fail."""
    yield
    with django_db_blocker.unblock():
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
