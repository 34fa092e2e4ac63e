"""OAuth test helpers: protected servers started on free ports, a headless authorizer that keeps the
URLs it was sent to, an in-memory token store, and a search for secrets in recorded frames."""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import pytest

from sessions.engine import Frame
from support.processes import free_port, start_http_server

SERVERS_DIR = Path(__file__).resolve().parent.parent / "servers"
OAUTH_SDK_SERVER = SERVERS_DIR / "oauth_sdk_server.py"
TS_EXAMPLE = (
    SERVERS_DIR / "node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js"
)
REDIRECT = "http://127.0.0.1/callback"


def wait_listening(port: int, timeout: float = 20.0) -> None:
    """Wait until 127.0.0.1:``port`` accepts connections (a server's second port)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"nothing listened on port {port} within {timeout}s")
            time.sleep(0.05)  # the poll interval of a condition with a deadline, as start_http_server's


@dataclass(frozen=True)
class ProtectedServer:
    url: str
    auth_url: str
    client_secret: str

    def state(self) -> dict[str, Any]:
        """The authorization server's counters and every secret it issued or received."""
        return dict(httpx.get(f"{self.auth_url}/debug/state", timeout=10).json())

    def counts(self) -> dict[str, int]:
        return dict(self.state()["counts"])


@contextlib.contextmanager
def oauth_sdk_server(*flags: str) -> Iterator[ProtectedServer]:
    """tests/servers/oauth_sdk_server.py on two free ports (resource server, authorization server)."""
    port, auth_port = free_port(), free_port()
    secret = "pre-registered-secret-" + secrets.token_urlsafe(12)
    argv = [sys.executable, str(OAUTH_SDK_SERVER), "--port", str(port), "--auth-port", str(auth_port), *flags]
    # The server listens on its authorization port before its resource port: one wait is enough.
    with start_http_server(argv, port, env={"OAUTH_CLIENT_SECRET": secret}):
        yield ProtectedServer(f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{auth_port}", secret)


@contextlib.contextmanager
def protected_web() -> Iterator[str]:
    """tests/servers/protected_web.py (authorization server and resource in one process, one origin,
    unlike oauth_sdk_server's two) on a free port; yields the MCP URL."""
    port = free_port()
    with start_http_server(
        [sys.executable, str(SERVERS_DIR / "protected_web.py"), "--port", str(port)], port
    ):
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.contextmanager
def ts_example_server() -> Iterator[str]:
    """The TypeScript SDK's example server with ``--oauth --oauth-strict`` (its demo authorization
    server approves every request at once); yields its URL, on ``localhost`` as it names itself."""
    node = shutil.which("node")
    if node is None or not TS_EXAMPLE.is_file():
        pytest.fail(f"needs node and {TS_EXAMPLE} (npm install --prefix tests/servers)")
    port, auth_port = free_port(), free_port()
    env = {"MCP_PORT": str(port), "MCP_AUTH_PORT": str(auth_port)}
    with start_http_server([node, str(TS_EXAMPLE), "--oauth", "--oauth-strict"], port, env=env):
        wait_listening(auth_port)
        yield f"http://localhost:{port}/mcp"


class TestAuthorizer:
    """Follows the authorization endpoint's redirects back to our redirect URI (test servers approve
    without a person), keeping every authorization URL it was sent to."""

    __test__ = False
    application_type = "native"

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.returned: list[str] = []

    async def redirect_uri(self) -> str:
        return REDIRECT

    async def authorize(self, url: str, state: str) -> str:
        self.urls.append(url)
        async with httpx.AsyncClient(follow_redirects=False, timeout=10.0) as client:
            for _ in range(5):
                response = await client.get(url)
                location = response.headers.get("location")
                assert response.status_code in (302, 303, 307), (response.status_code, response.text)
                url = urljoin(url, location)
                if url.startswith(REDIRECT):
                    self.returned.append(url)
                    return url
        raise AssertionError("too many redirects")

    def params(self, index: int = -1) -> dict[str, str]:
        """The query of the ``index``-th authorization URL."""
        return {k: v[0] for k, v in parse_qs(urlsplit(self.urls[index]).query).items()}

    def codes(self) -> list[str]:
        return [parse_qs(urlsplit(u).query)["code"][0] for u in self.returned]


class MemoryStore:
    """A ``TokenStore`` in a dict (what the web app and the CLI keep encrypted or in a file)."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any]] = {}

    def load(self, key: str) -> dict[str, Any] | None:
        return json.loads(json.dumps(self.data[key])) if key in self.data else None

    def save(self, key: str, data: dict[str, Any]) -> None:
        self.data[key] = json.loads(json.dumps(data))


def frame_text(frame: Frame) -> str:
    """Everything a frame carries, as text: its bytes, transport details, note and verdicts."""
    return " ".join(
        [
            frame.raw.decode("utf-8", "replace"),
            json.dumps(frame.transport),
            frame.note or "",
            json.dumps(frame.message) if frame.message is not None else "",
            " ".join(v.message for v in frame.verdicts),
        ]
    )


def leaked(frames: Iterable[Frame], secrets: Iterable[str]) -> list[tuple[int, str]]:
    """Every (frame seq, secret) where a secret, or its Basic-auth or URL-encoded spelling, shows."""
    found = []
    texts = [(f.seq, frame_text(f)) for f in frames]
    for secret in secrets:
        spellings = {secret, httpx.QueryParams({"x": secret}).get("x") or secret}
        spellings |= {base64.b64encode(f"{c}:{secret}".encode()).decode() for c in ("test-client",)}
        found += [(seq, secret) for seq, text in texts for s in spellings if s in text]
    return found
