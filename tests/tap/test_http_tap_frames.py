"""The HTTP tap without a process: its options, the legacy endpoint rewrite, and the frames its spool
makes of what the proxy hands it, judged by the server and the client rules."""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import pytest

from inspector.tap import UsageError, parse_args
from inspector.tap._http_spool import HttpSpool
from inspector.tap._proxy import _EndpointRewriter

UPSTREAM = "http://127.0.0.1:9001/mcp"


def test_a_listen_address_that_is_not_loopback_is_refused_without_allow_remote() -> None:
    with pytest.raises(UsageError, match="not a loopback address"):
        parse_args(["--listen", "0.0.0.0:8931", UPSTREAM])
    assert parse_args(["--listen", "0.0.0.0:8931", "--allow-remote", UPSTREAM]).listen == ("0.0.0.0", 8931)
    assert parse_args(["--listen", "[::1]:8931", UPSTREAM]).listen == ("::1", 8931)
    options = parse_args(["--listen", "localhost:0", "--name", "web", UPSTREAM])
    assert (options.url, options.name, options.command) == (UPSTREAM, "web", "")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--listen", "127.0.0.1:1"], "takes the server's URL"),
        (["--listen", "127.0.0.1:1", UPSTREAM, "--", "node"], "takes the server's URL"),
        (["--listen", "127.0.0.1", UPSTREAM], "HOST:PORT"),
        (["--listen", "127.0.0.1:99999", UPSTREAM], "HOST:PORT"),
        (["--listen", "127.0.0.1:1", "file:///etc/passwd"], "http:// or https://"),
        ([UPSTREAM], "a URL needs --listen"),
        (["--allow-remote", "--", "node"], "--allow-remote goes with --listen"),
    ],
)
def test_bad_http_tap_command_lines_are_refused_with_a_reason(argv: list[str], says: str) -> None:
    with pytest.raises(UsageError, match=says):
        parse_args(argv)


def test_the_stdio_tap_command_line_is_read_as_before() -> None:
    options = parse_args(["--name", "fs", "--", "npx", "-y", "server", "--help"])
    assert (options.command, options.args, options.listen) == ("npx", ["-y", "server", "--help"], None)


def feed(rewriter: _EndpointRewriter, *chunks: bytes) -> bytes:
    return b"".join(rewriter.feed(c) for c in chunks)


def test_an_endpoint_absolute_to_the_server_is_handed_to_the_host_on_the_tap() -> None:
    rewriter = _EndpointRewriter("http://127.0.0.1:9001/sse", "http://127.0.0.1:7000")
    out = feed(
        rewriter, b": hi\n\nevent: endpoint\r\ndata: http://127.0.0.1:9001/messages?s=1", b"\r\n\r\nevent: m"
    )
    assert out == b": hi\n\nevent: endpoint\ndata: http://127.0.0.1:7000/messages?s=1\r\n\r\nevent: m"
    assert rewriter.given == "http://127.0.0.1:7000/messages?s=1"
    assert rewriter.feed(b"data: http://127.0.0.1:9001/x\n\n") == b"data: http://127.0.0.1:9001/x\n\n"


@pytest.mark.parametrize(
    "data", [b"/messages?s=1", b"http://elsewhere.example/messages", b"https://127.0.0.1:9001/messages"]
)
def test_a_relative_or_foreign_endpoint_passes_as_it_is(data: bytes) -> None:
    rewriter = _EndpointRewriter("http://127.0.0.1:9001/sse", "http://127.0.0.1:7000")
    stream = b"event: endpoint\ndata: " + data + b"\n\n"
    assert feed(rewriter, stream[:10], stream[10:]) == stream and rewriter.given is None


def test_a_stream_that_is_not_legacy_passes_untouched() -> None:
    rewriter = _EndpointRewriter("http://127.0.0.1:9001/mcp", "http://127.0.0.1:7000")
    stream = b'id: 1\ndata: {"jsonrpc":"2.0","method":"notifications/message"}\n\nid: 2\n'
    assert feed(rewriter, stream[:7], stream[7:]) == stream


def spooled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, items: list[tuple[str, Any]]
) -> list[dict[str, Any]]:
    """The frames the HTTP tap's spool writes for ``items`` (what the proxy would have queued)."""
    monkeypatch.setenv("INSPECTOR_DATA_DIR", str(tmp_path / "data"))
    record = tmp_path / "record.jsonl"
    options = parse_args(["--listen", "127.0.0.1:7000", "--record", str(record), UPSTREAM])
    queued: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for i, (what, payload) in enumerate([("http-start", "http://127.0.0.1:7000/mcp"), *items]):
        queued.put((what, payload, 1000.0 + i, 10.0 + i))
    queued.put(None)
    HttpSpool(options, queued).run()
    spool = min((tmp_path / "data" / "taps").iterdir(), key=lambda p: len(p.name))  # the first host's
    assert spool.read_text() == record.read_text()
    return [json.loads(line) for line in record.read_text().splitlines()]


INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{},"clientInfo":{"name":"h","version":"1"}}}'
)
INIT_RESULT = (
    b'event: message\nid: e1\ndata: {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18",'
    b'"capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}\n\n'
)
SSE_HEAD = [(b"Content-Type", b"text/event-stream"), (b"Mcp-Session-Id", b"abc")]
GOOD = [(b"Accept", ACCEPT := b"application/json, text/event-stream"), (b"Content-Type", b"application/json")]


def test_an_http_exchange_is_recorded_in_the_engines_shapes_and_judged_on_both_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    frames = spooled(
        tmp_path,
        monkeypatch,
        [
            ("http-request", (1, "POST", "/mcp", [*GOOD, (b"Authorization", b"Bearer s3cret")], INIT)),
            ("http-response", (1, 200, "OK", SSE_HEAD)),
            ("http-chunk", (1, INIT_RESULT[:30])),
            ("http-chunk", (1, INIT_RESULT[30:])),
            ("http-end", (1, None, False)),
            (
                "http-request",
                (
                    2,
                    "POST",
                    "/mcp",
                    [*GOOD, (b"Mcp-Session-Id", b"abc")],
                    b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                ),
            ),
            ("http-response", (2, 202, "Accepted", [])),
            ("http-end", (2, None, False)),
            # The host forgets Accept's SSE and MCP-Protocol-Version; the server answers a request 202.
            (
                "http-request",
                (3, "POST", "/mcp", [(b"Accept", b"application/json"), (b"Mcp-Session-Id", b"abc")], listed),
            ),
            ("http-response", (3, 202, "Accepted", [])),
            ("http-end", (3, None, False)),
            ("http-request", (4, "GET", "/.well-known/oauth-protected-resource/mcp", [], b"")),
            ("http-response", (4, 200, "OK", [(b"content-type", b"application/json")])),
            ("http-chunk", (4, b'{"resource":"http://127.0.0.1:9001/mcp"}')),
            ("http-end", (4, None, False)),
            ("http-stop", "the tap stopped"),
        ],
    )
    post = frames[1]
    assert post["kind"] == "message" and post["method"] == "initialize"
    assert post["transport"]["http"]["url"] == UPSTREAM and post["transport"]["http"]["method"] == "POST"
    assert post["transport"]["http"]["headers"]["Authorization"].startswith("Bearer ••••")  # masked
    head = next(f for f in frames if f["transport"].get("http", {}).get("request_seq") == post["seq"])
    assert head["kind"] == "http" and head["transport"]["http"]["headers"]["Mcp-Session-Id"] == "abc"
    result = next(f for f in frames if f["direction"] == "in" and f["method"] == "initialize")
    assert (
        result["pair_seq"] == post["seq"] and result["transport"]["http"]["stream"] == f"POST #{post['seq']}"
    )
    assert result["transport"]["http"]["event_id"] == "e1"
    listing = next(f for f in frames if f["method"] == "tools/list")
    codes = {v["code"] for v in listing["verdicts"]}
    assert {"client-accept-header", "client-protocol-version-header"} <= codes
    answered = next(f for f in frames if f["transport"].get("http", {}).get("request_seq") == listing["seq"])
    assert "accepted-request" in {v["code"] for v in answered["verdicts"]}  # the server rules judged the head
    prm = frames[-2]
    assert prm["kind"] == "http" and prm["raw"].startswith('{"resource"') and prm["verdicts"] == []
    assert frames[-1]["transport"]["state"] == "closed"


def test_a_legacy_endpoint_switches_the_client_rules_to_the_legacy_transport(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frames = spooled(
        tmp_path,
        monkeypatch,
        [
            ("http-request", (1, "GET", "/mcp", [(b"Accept", b"text/event-stream")], b"")),
            ("http-response", (1, 200, "OK", [(b"Content-Type", b"text/event-stream")])),
            ("http-rewrote", (1, "http://127.0.0.1:7000/messages?s=1")),
            ("http-chunk", (1, b"event: endpoint\ndata: http://127.0.0.1:9001/messages?s=1\n\n")),
            ("http-request", (2, "POST", "/messages?s=1", [(b"Content-Type", b"application/json")], INIT)),
            ("http-response", (2, 202, "Accepted", [])),
            ("http-chunk", (2, b"Accepted")),
            ("http-end", (2, None, False)),
            ("http-end", (1, None, True)),
        ],
    )
    endpoint = next(f for f in frames if f["transport"].get("http", {}).get("event") == "endpoint")
    assert endpoint["note"] == (
        "endpoint http://127.0.0.1:9001/messages?s=1 (the tap gave the host http://127.0.0.1:7000/messages?s=1)"
    )
    post = next(f for f in frames if f["method"] == "initialize")
    assert post["verdicts"] == []  # no Accept: the legacy transport has no header rules
    accepted = next(f for f in frames if f["transport"].get("http", {}).get("request_seq") == post["seq"])
    assert accepted["raw"] == "Accepted" and accepted["verdicts"] == []
    assert frames[-1]["note"] == "the host closed the GET stream"
