"""Self-checks for the test servers and fixtures in conftest.py, using only subprocess and httpx.

These talk raw JSON-RPC to each server so that a failure here points at the test bench, not the engine.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

TIMEOUT = 10.0
INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"roots": {}, "sampling": {}, "elicitation": {}},
    "clientInfo": {"name": "smoke-test", "version": "0.0.1"},
}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def req(msg_id: int, method: str, params: dict | None = None) -> dict:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


# --- stdio helpers ------------------------------------------------------------------------------------------


class StdioPeer:
    """A subprocess whose stdout lines are read (raw bytes) by a thread, with timeouts on every read."""

    def __init__(self, spec: dict, stderr: int = subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(
            [spec["command"], *spec["args"]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.pump = threading.Thread(target=self._pump, daemon=True)
        self.pump.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")  # EOF marker

    def send(self, msg: object) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = TIMEOUT) -> bytes:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"no line from the server within {timeout}s")

    def response(self, msg_id: int) -> dict:
        """Read lines until the JSON-RPC response for `msg_id`, skipping notifications."""
        while True:
            line = self.line()
            assert line, "server closed stdout before answering"
            msg = json.loads(line)
            if isinstance(msg, dict) and msg.get("id") == msg_id and "method" not in msg:
                return msg

    def initialize(self) -> dict:
        self.send(req(1, "initialize", INIT_PARAMS))
        result = self.response(1)["result"]
        self.send(INITIALIZED)
        return result

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            # A moment to exit on the closed stdin; server-everything's timers keep it running regardless.
            self.proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.pump.join(timeout=5)
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def peer() -> Iterator[Any]:
    peers: list[StdioPeer] = []

    def start(spec: dict, stderr: int = subprocess.DEVNULL) -> StdioPeer:
        peers.append(StdioPeer(spec, stderr))
        return peers[-1]

    yield start
    for p in peers:
        p.close()


# --- stdio servers ------------------------------------------------------------------------------------------


def test_sdk_stdio(peer, sdk_stdio):
    p = peer(sdk_stdio)
    init = p.initialize()
    assert init["protocolVersion"] == "2025-11-25"
    assert init["serverInfo"]["name"] == "sdk-test-server"
    assert {"tools", "resources", "prompts", "logging"} <= set(init["capabilities"])
    p.send(req(2, "tools/list"))
    names = {t["name"] for t in p.response(2)["result"]["tools"]}
    assert {"add", "echo", "slow", "ask_name", "ask_llm", "list_roots", "fail"} <= names
    p.send(req(3, "tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}))
    assert p.response(3)["result"]["structuredContent"] == {"result": 5}
    p.send(req(4, "tools/call", {"name": "fail", "arguments": {}}))
    assert p.response(4)["result"]["isError"] is True


def test_sdk_stdio_server_requests(peer, sdk_stdio):
    """Elicitation, sampling and roots arrive as server->client requests on stdout."""
    p = peer(sdk_stdio)
    p.initialize()
    replies = {
        "ask_name": ("elicitation/create", {"action": "accept", "content": {"name": "Ada"}}, "Hello, Ada!"),
        "ask_llm": (
            "sampling/createMessage",
            {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
            "m: hi",
        ),
        "list_roots": ("roots/list", {"roots": [{"uri": "file:///tmp", "name": "tmp"}]}, "file:///tmp"),
    }
    for n, (tool, (method, reply, expected)) in enumerate(replies.items(), start=10):
        arguments = {"prompt": "x"} if tool == "ask_llm" else {}
        p.send(req(n, "tools/call", {"name": tool, "arguments": arguments}))
        server_req = json.loads(p.line())
        assert server_req["method"] == method
        p.send({"jsonrpc": "2.0", "id": server_req["id"], "result": reply})
        assert expected in p.response(n)["result"]["content"][0]["text"]


def test_everything_stdio(peer, everything_stdio):
    p = peer(everything_stdio)
    init = p.initialize()
    assert init["protocolVersion"] == "2025-11-25"
    p.send(req(2, "tools/list"))
    names = {t["name"] for t in p.response(2)["result"]["tools"]}
    assert {"echo", "get-sum", "trigger-long-running-operation"} <= names


def test_bad_stdio_garbage(peer, bad_stdio):
    p = peer(bad_stdio("garbage"))
    init = p.initialize()
    assert init["capabilities"] == {"tools": {}}
    p.send(req(2, "tools/list"))
    assert p.line() == b"this is not json\n"
    assert p.line() == b"\xff\xfe oops\n"
    assert json.loads(p.line()) == {"hello": "world"}
    assert json.loads(p.line())["result"]["tools"][0]["name"] == "t"


def test_bad_stdio_die(peer, bad_stdio):
    p = peer(bad_stdio("die"), stderr=subprocess.PIPE)
    p.initialize()
    p.send(req(2, "tools/call", {"name": "t", "arguments": {}}))
    assert p.line() == b""  # stdout closes without an answer
    assert p.proc.wait(timeout=TIMEOUT) == 3
    assert p.proc.stderr is not None and p.proc.stderr.read() == b"dying\n"


def test_bad_stdio_flood_is_fast(peer, bad_stdio):
    p = peer(bad_stdio("flood"))
    p.initialize()
    start = time.monotonic()
    p.send(req(2, "tools/call", {"name": "t", "arguments": {"count": 100_000}}))
    for k in range(100_000):
        assert json.loads(p.line())["params"]["data"] == {"i": k}
    assert json.loads(p.line())["id"] == 2
    assert time.monotonic() - start < 5  # the server writes it in well under a second


def test_bad_stdio_big(peer, bad_stdio):
    p = peer(bad_stdio("big"))
    p.initialize()
    p.send(req(2, "tools/call", {"name": "t", "arguments": {"size": 1_000_000}}))
    assert len(json.loads(p.line())["result"]["content"][0]["text"]) == 1_000_000


def test_bad_stdio_big_id_last(peer, bad_stdio):
    p = peer(bad_stdio("big-id-last"))
    p.initialize()
    p.send(req(2, "tools/call", {"name": "t", "arguments": {"size": 1000}}))
    line = p.line()
    assert line.startswith(b'{"result":') and line.rstrip().endswith(b'"id":2}')


def test_bad_stdio_violations(peer, bad_stdio):
    p = peer(bad_stdio("violations"))
    p.initialize()
    p.send(req(2, "tools/list"))
    msgs = [json.loads(p.line()) for _ in range(6)]
    assert msgs[0] == msgs[1] and msgs[0]["id"] == 2
    assert msgs[2]["id"] == 999
    assert "result" in msgs[3] and "error" in msgs[3]
    assert msgs[4]["method"] == "notifications/message" and "id" in msgs[4]
    assert msgs[5]["params"]["progressToken"] == "no-such-token"


def test_bad_stdio_batch(peer, bad_stdio):
    p = peer(bad_stdio("batch"))
    p.initialize()
    p.send(req(2, "tools/list"))
    batch = json.loads(p.line())
    assert isinstance(batch, list) and batch[0]["id"] == 2 and batch[1]["method"] == "notifications/message"


def test_bad_stdio_stderr(peer, bad_stdio):
    p = peer(bad_stdio("stderr"), stderr=subprocess.PIPE)
    p.initialize()
    p.proc.stdin.close()
    assert p.proc.wait(timeout=TIMEOUT) == 0
    assert p.proc.stderr is not None and p.proc.stderr.read().count(b"\n") >= 3


def test_bad_stdio_hang_exits_on_eof(peer, bad_stdio):
    p = peer(bad_stdio("hang"))
    p.initialize()
    p.send(req(2, "tools/call", {"name": "t", "arguments": {}}))
    p.proc.stdin.close()
    assert p.proc.wait(timeout=TIMEOUT) == 0


def test_bad_stdio_hang_ignore_eof_needs_sigkill(peer, bad_stdio):
    p = peer(bad_stdio("hang-ignore-eof"))
    p.initialize()  # the SIGTERM handler is installed before the first message is read
    p.proc.stdin.close()
    p.proc.send_signal(signal.SIGTERM)
    with pytest.raises(subprocess.TimeoutExpired):
        p.proc.wait(timeout=0.5)
    p.proc.kill()
    assert p.proc.wait(timeout=TIMEOUT) == -signal.SIGKILL


# --- HTTP helpers -------------------------------------------------------------------------------------------


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """Parse SSE lines into {"event", "data", "id", "retry"} dicts (data lines joined with newlines).

    Events with empty data (such as the priming event server-everything sends first) are skipped.
    """
    event: dict[str, str] = {}
    for line in lines:
        if line == "":
            if event.get("data"):
                yield event
            event = {}
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        event[field] = event[field] + "\n" + value if field == "data" and "data" in event else value


def post(
    client: httpx.Client, url: str, msg: dict, session: str | None = None
) -> tuple[httpx.Response, list[dict]]:
    """POST one message; return the response and the JSON-RPC messages it carried (JSON body or SSE)."""
    headers = dict(ACCEPT)
    if session:
        headers["mcp-session-id"] = session
    with client.stream("POST", url, headers=headers, json=msg) as r:
        ctype = r.headers.get("content-type", "")
        if ctype.startswith("text/event-stream"):
            messages = []
            for ev in sse_events(r.iter_lines()):
                messages.append(json.loads(ev["data"]))
                if messages[-1].get("id") == msg.get("id") and "method" not in messages[-1]:
                    break
        else:
            r.read()
            messages = [r.json()] if r.content else []
    return r, messages


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=TIMEOUT) as c:
        yield c


# --- HTTP servers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "has_session", "content_type"),
    [
        ("everything_http", True, "text/event-stream"),
        ("sdk_http_sse", True, "text/event-stream"),
        ("sdk_http_json", True, "application/json"),
        ("sdk_http_stateless", False, "text/event-stream"),
    ],
)
def test_http_initialize(request, client, fixture, has_session, content_type):
    url = request.getfixturevalue(fixture)
    r, msgs = post(client, url, req(1, "initialize", INIT_PARAMS))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith(content_type)
    assert msgs[-1]["result"]["protocolVersion"] == "2025-11-25"
    session = r.headers.get("mcp-session-id")
    assert bool(session) is has_session
    r, _ = post(client, url, INITIALIZED, session)
    assert r.status_code == 202
    r, msgs = post(client, url, req(2, "tools/list"), session)
    assert r.status_code == 200 and msgs[-1]["result"]["tools"]


def test_everything_http_unknown_session_is_400(client, everything_http):
    r, msgs = post(client, everything_http, req(2, "tools/list"), session="no-such-session")
    assert r.status_code == 400  # not the spec's 404
    assert msgs[0]["error"]["code"] == -32000


def test_sdk_http_sse_elicitation_round_trip(client, sdk_http_sse):
    r, _ = post(client, sdk_http_sse, req(1, "initialize", INIT_PARAMS))
    session = r.headers["mcp-session-id"]
    post(client, sdk_http_sse, INITIALIZED, session)
    headers = {**ACCEPT, "mcp-session-id": session}
    call = req(2, "tools/call", {"name": "ask_name", "arguments": {}})
    with client.stream("POST", sdk_http_sse, headers=headers, json=call) as r:
        events = sse_events(r.iter_lines())
        server_req = json.loads(next(events)["data"])
        assert server_req["method"] == "elicitation/create"
        accept = {"action": "accept", "content": {"name": "Bo"}}
        answer = {"jsonrpc": "2.0", "id": server_req["id"], "result": accept}
        assert post(client, sdk_http_sse, answer, session)[0].status_code == 202
        result = json.loads(next(events)["data"])
    assert result["id"] == 2 and result["result"]["content"][0]["text"] == "Hello, Bo!"


def test_everything_sse(client, everything_sse):
    with client.stream("GET", everything_sse, headers={"accept": "text/event-stream"}) as r:
        assert r.status_code == 200
        events = sse_events(r.iter_lines())
        first = next(events)
        assert first["event"] == "endpoint"
        assert first["data"].startswith("/message?sessionId=")
        post_url = str(httpx.URL(everything_sse).join(first["data"]))
        ack = client.post(post_url, json=req(1, "initialize", INIT_PARAMS))
        assert ack.status_code == 202
        reply = next(events)
        assert reply["event"] == "message"
        assert json.loads(reply["data"])["result"]["serverInfo"]


# --- misbehaving HTTP servers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "status"), [("expire", 404), ("expire400", 400)])
def test_bad_http_expire(client, bad_http, mode, status):
    url = bad_http(mode)
    r, _ = post(client, url, req(1, "initialize", INIT_PARAMS))
    session = r.headers["mcp-session-id"]
    assert post(client, url, INITIALIZED, session)[0].status_code == 202  # 1st POST after initialize
    assert post(client, url, req(2, "tools/list"), session)[0].status_code == 200  # 2nd, then forgotten
    r, msgs = post(client, url, req(3, "tools/list"), session)
    assert r.status_code == status
    r, _ = post(client, url, req(4, "initialize", INIT_PARAMS))
    assert r.status_code == 200 and r.headers["mcp-session-id"] != session


@pytest.mark.parametrize("mode", ["cut", "cut-abort"])
def test_bad_http_cut_and_resume(client, bad_http, mode):
    url = bad_http(mode)
    r, _ = post(client, url, req(1, "initialize", INIT_PARAMS))
    session = r.headers["mcp-session-id"]
    headers = {**ACCEPT, "mcp-session-id": session}
    call = req(2, "tools/call", {"name": "t", "arguments": {}, "_meta": {"progressToken": "tok"}})
    received = []
    with client.stream("POST", url, headers=headers, json=call) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        try:
            received.extend(sse_events(r.iter_lines()))
        except httpx.RemoteProtocolError:
            assert mode == "cut-abort"
        else:
            assert mode == "cut"
    assert [(e["id"], e.get("retry")) for e in received] == [("s1-1", "100")]
    assert json.loads(received[0]["data"])["params"] == {"progressToken": "tok", "progress": 1, "total": 2}
    r = client.get(url, headers={**headers, "last-event-id": "s1-1"})
    assert r.status_code == 200
    replay = list(sse_events(iter(r.text.splitlines())))
    assert [e["id"] for e in replay] == ["s1-2", "s1-3"]
    assert json.loads(replay[-1]["data"]) == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"content": [{"type": "text", "text": "resumed"}]},
    }
    assert client.get(url, headers=headers).status_code == 405


def test_bad_http_plain(client, bad_http):
    url = bad_http("plain")
    r, msgs = post(client, url, req(1, "initialize", INIT_PARAMS))
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in r.headers
    assert msgs[0]["result"]["protocolVersion"] == "2025-11-25"
    assert post(client, url, INITIALIZED)[0].status_code == 202
    r, msgs = post(client, url, req(2, "tools/call", {"name": "t", "arguments": {"x": 1}}))
    assert msgs[0]["result"]["content"][0]["text"] == 'ok {"x": 1}'
    assert client.get(url, headers={"accept": "text/event-stream"}).status_code == 405
