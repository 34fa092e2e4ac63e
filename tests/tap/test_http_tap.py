"""The HTTP tap as a real reverse proxy between our CLI (or a raw HTTP host) and real servers: what the
host gets is what it gets without the tap, and every exchange is recorded in the engine's HTTP shapes."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.cli import run_cli
from support.oauth import protected_web
from support.processes import free_port, start_http_server

pytestmark = pytest.mark.slow

TAP = [sys.executable, "-m", "inspector", "tap"]
ACCEPT = "application/json, text/event-stream"


@contextlib.contextmanager
def http_tap(url: str, data_dir: Path, record: Path, name: str = "http-tap") -> Iterator[str]:
    """The tap listening on a free loopback port for ``url``; yields the URL a host is pointed at."""
    port = free_port()
    argv = [*TAP, "--listen", f"127.0.0.1:{port}", "--name", name, "--record", str(record), url]
    with start_http_server(argv, port, env={"INSPECTOR_DATA_DIR": str(data_dir)}) as tap:
        yield url.replace(url.split("/")[2], f"127.0.0.1:{port}", 1)
        tap.terminate()
        tap.wait(15)  # the tap writes its last frames and ends the session on SIGTERM


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def http_of(frame: dict[str, Any]) -> dict[str, Any]:
    return frame["transport"].get("http") or {}


def header(frame: dict[str, Any], name: str) -> str | None:
    headers = http_of(frame).get("headers") or {}
    return next((v for k, v in headers.items() if k.lower() == name), None)


def verdicts(frames: list[dict[str, Any]]) -> list[str]:
    return sorted(v["code"] for f in frames for v in f["verdicts"])


def recorded_directly(tmp_path: Path, *args: str) -> tuple[Any, list[dict[str, Any]]]:
    path = tmp_path / f"direct-{len(list(tmp_path.glob('direct-*')))}.jsonl"
    return run_cli(*args, "--record", str(path)), records(path)


def test_our_cli_gets_the_same_answers_from_server_everything_through_the_http_tap(
    tmp_path: Path, everything_http: str
) -> None:
    record = tmp_path / "tap.jsonl"
    calls = [
        ["--method", "tools/list"],
        ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=héllo"],
    ]
    with http_tap(everything_http, tmp_path / "data", record) as tapped_url:
        assert tapped_url.endswith("/mcp") and tapped_url != everything_http
        for args in calls:
            direct, direct_frames = recorded_directly(tmp_path, "--cli", everything_http, *args)
            tapped = run_cli("--cli", tapped_url, *args)
            assert direct.returncode == tapped.returncode == 0, tapped.stderr
            assert tapped.stdout == direct.stdout
    # Each call is an HTTP session of its own upstream, so a session of its own: --record's FILE, FILE-2.
    sessions = [records(record), records(tmp_path / "tap-2.jsonl")]
    for frames, method in zip(sessions, ("tools/list", "tools/call"), strict=True):
        assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
        assert (
            frames[0]["transport"]["state"] == "connecting" and frames[-1]["transport"]["state"] == "closed"
        )
        out = [(f["kind"], f["method"]) for f in frames if f["direction"] == "out"]
        into = [(f["kind"], f["method"]) for f in frames if f["direction"] == "in" and f["kind"] == "message"]
        assert out.count(("message", "initialize")) == 1 and ("message", method) in out
        assert ("http", None) in out  # the DELETE that ends each HTTP session
        assert ("message", method) in into
    frames = sessions[1]
    answer = next(f for f in frames if f["direction"] == "in" and f["method"] == "tools/call")
    assert http_of(answer)["stream"].startswith("POST #") and answer["pair_seq"] and answer["latency_ms"] >= 0
    assert json.loads(answer["raw"])["result"]["content"][0]["text"] == "Echo: héllo"
    # The server's Mcp-Session-Id reached the host, which sent it back through the tap unchanged.
    given = [header(f, "mcp-session-id") for f in frames if f["kind"] == "http" and f["direction"] == "in"]
    sent = [
        header(f, "mcp-session-id") for f in frames if f["direction"] == "out" and f["method"] != "initialize"
    ]
    assert given[0] and given[0] in sent
    # The same judgement as the engine passed on its own recording of the same calls: none.
    assert verdicts(sessions[0] + frames) == verdicts(direct_frames) == []


def test_the_python_sdk_server_answers_the_same_through_the_http_tap(
    tmp_path: Path, sdk_http_sse: str
) -> None:
    with http_tap(sdk_http_sse, tmp_path / "data", tmp_path / "tap.jsonl") as tapped_url:
        direct = run_cli("--cli", sdk_http_sse, "--method", "tools/list")
        tapped = run_cli("--cli", tapped_url, "--method", "tools/list")
        call = ["--method", "tools/call", "--tool-name", "add", "--tool-arg", "a=2", "--tool-arg", "b=3"]
        direct_call, tapped_call = run_cli("--cli", sdk_http_sse, *call), run_cli("--cli", tapped_url, *call)
    assert direct.returncode == tapped.returncode == 0, tapped.stderr
    assert tapped.stdout == direct.stdout and json.loads(tapped.stdout)["tools"]
    assert tapped_call.stdout == direct_call.stdout and tapped_call.returncode == 0


def test_a_reply_stream_cut_mid_reply_is_resumed_through_the_tap_with_last_event_id(
    tmp_path: Path, bad_http: Any
) -> None:
    record = tmp_path / "tap.jsonl"
    url = bad_http("cut")
    with http_tap(url, tmp_path / "data", record) as tapped_url:
        tapped = run_cli("--cli", tapped_url, "--method", "tools/call", "--tool-name", "t")
    assert tapped.returncode == 0, tapped.stderr
    assert json.loads(tapped.stdout)["content"][0]["text"] == "resumed"
    frames = records(record)
    resume = next(f for f in frames if http_of(f).get("method") == "GET")
    assert (
        header(resume, "last-event-id") == "s1-1" and resume["note"] == "resume the stream after event s1-1"
    )
    assert header(resume, "mcp-session-id") == "cut-1"
    resumed = [f for f in frames if http_of(f).get("stream", "").endswith("(resumed)")]
    assert [http_of(f)["event_id"] for f in resumed] == ["s1-2", "s1-3"]
    first = next(f for f in frames if http_of(f).get("event_id") == "s1-1")
    assert http_of(resumed[0])["stream"] == http_of(first)["stream"] + " (resumed)"
    assert resumed[-1]["method"] == "tools/call" and resumed[-1]["pair_seq"]


def test_a_standalone_get_stream_passes_through_streamed(tmp_path: Path, everything_http: str) -> None:
    record = tmp_path / "tap.jsonl"
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    with http_tap(everything_http, tmp_path / "data", record) as tapped_url, httpx.Client(timeout=10) as host:
        opened = host.post(tapped_url, json=init, headers={"Accept": ACCEPT})
        session = opened.headers["mcp-session-id"]
        common = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-06-18"}
        notified = host.post(
            tapped_url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=common | {"Accept": ACCEPT},
        )
        assert notified.status_code == 202
        with host.stream("GET", tapped_url, headers=common | {"Accept": "text/event-stream"}) as stream:
            # The head arrives while the server holds the stream open: nothing waited for its end.
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
        host.delete(tapped_url, headers=common)
    frames = records(record)
    get = next(f for f in frames if http_of(f).get("method") == "GET")
    assert get["note"] == "open the SSE stream" and header(get, "mcp-session-id") == session
    head = next(f for f in frames if http_of(f).get("request_seq") == get["seq"])
    assert http_of(head)["status"] == 200 and head["verdicts"] == []
    assert any(f["transport"].get("state") == "http-closed" for f in frames)  # the host left the stream


def test_a_401_and_the_protected_resource_metadata_pass_unchanged(tmp_path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    record = tmp_path / "tap.jsonl"
    with protected_web() as url, http_tap(url, tmp_path / "data", record) as tapped_url:
        direct = httpx.post(url, json=body, headers={"Accept": ACCEPT}, timeout=10)
        tapped = httpx.post(tapped_url, json=body, headers={"Accept": ACCEPT}, timeout=10)
        well_known = "/.well-known/oauth-protected-resource/mcp"
        origin, tapped_origin = url.removesuffix("/mcp"), tapped_url.removesuffix("/mcp")
        metadata = httpx.get(origin + well_known, timeout=10)
        tapped_metadata = httpx.get(tapped_origin + well_known, timeout=10)
    assert tapped.status_code == direct.status_code == 401
    assert tapped.headers["www-authenticate"] == direct.headers["www-authenticate"]
    assert "resource_metadata=" in tapped.headers["www-authenticate"]
    assert tapped.content == direct.content
    assert tapped_metadata.status_code == 200 and tapped_metadata.json() == metadata.json()
    frames = records(record)
    refused = next(f for f in frames if http_of(f).get("status") == 401)
    assert refused["note"] == "the server asks for authorization" and header(refused, "www-authenticate")
    prm = next(f for f in frames if http_of(f).get("url", "").endswith(well_known))
    assert prm["kind"] == "http" and prm["verdicts"] == []  # not an MCP request: no client rule reads it


def test_legacy_sse_works_through_the_tap(tmp_path: Path, everything_sse: str) -> None:
    record = tmp_path / "tap.jsonl"
    args = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=legacy"]
    with http_tap(everything_sse, tmp_path / "data", record) as tapped_url:
        direct = run_cli("--cli", everything_sse, *args)
        tapped = run_cli("--cli", tapped_url, *args)
    assert direct.returncode == tapped.returncode == 0, tapped.stderr
    assert tapped.stdout == direct.stdout
    frames = records(record)
    endpoint = next(f for f in frames if http_of(f).get("event") == "endpoint")
    assert endpoint["raw"].startswith("/message") and endpoint["verdicts"] == []  # relative: passed as it is
    posts = [f for f in frames if f["kind"] == "message" and f["direction"] == "out"]
    assert {urlpath(http_of(f)["url"]) for f in posts} == {"/message"}
    answer = next(f for f in frames if f["direction"] == "in" and f["method"] == "tools/call")
    assert http_of(answer)["stream"] == "GET" and answer["pair_seq"]
    assert [v for f in frames for v in f["verdicts"] if v["severity"] == "error"] == []


def urlpath(url: str) -> str:
    return "/" + url.split("/", 3)[3].split("?")[0]


def test_an_unreachable_server_is_a_502_from_the_tap_and_a_frame(tmp_path: Path) -> None:
    record = tmp_path / "tap.jsonl"
    with http_tap(f"http://127.0.0.1:{free_port()}/mcp", tmp_path / "data", record) as tapped_url:
        answer = httpx.post(tapped_url, json={}, timeout=10)
    assert answer.status_code == 502 and "cannot reach" in answer.text
    assert any(f["transport"].get("state") == "http-error" for f in records(record))
