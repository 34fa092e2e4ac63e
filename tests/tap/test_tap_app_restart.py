"""The inspector stopped while a host is mid-session through a stdio tap: the host goes on, every call
answered; when the inspector starts again, the session holds every frame, in order, none twice."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.paths import SERVERS
from support.raw_host import RawHost
from support.tap_app import TAP, App, env_for, records, running_app, wait_for

pytestmark = pytest.mark.slow

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def echo(host: RawHost, request_id: int, text: str) -> str:
    call = {"name": "echo", "arguments": {"text": text}}
    answer = host.ask({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call})
    return str(answer["result"]["content"][0]["text"])


def stored_raw(app: App, public_id: str) -> str:
    return "\n".join(f["raw"] for f in app.frames(public_id))


def test_a_host_goes_on_while_the_inspector_is_away_and_the_session_has_every_frame_after(
    tmp_path: Path,
) -> None:
    data, record = tmp_path / "data", tmp_path / "tap.jsonl"
    server = [sys.executable, str(SERVERS / "sdk_server.py"), "stdio"]
    argv = [*TAP, "--name", "through-a-restart", "--record", str(record), "--", *server]
    host: RawHost | None = None
    try:
        with running_app(data) as first:
            host = RawHost(argv, env_for(data))
            assert "result" in host.ask(INITIALIZE)
            host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert echo(host, 2, "before-the-stop") == "before-the-stop"
            public_id = wait_for(lambda: first.session_id("through-a-restart"), what="the tap session")
            wait_for(lambda: "before-the-stop" in stored_raw(first, public_id), what="the first call stored")
        # The inspector is gone: the host's calls are still answered, through the tap.
        assert [echo(host, n, f"while-away-{n}") for n in (3, 4, 5)] == [f"while-away-{n}" for n in (3, 4, 5)]
        assert host.proc.poll() is None
        with running_app(data) as second:
            wait_for(lambda: "while-away-5" in stored_raw(second, public_id), what="the frames of the gap")
            assert echo(host, 6, "after-the-restart") == "after-the-restart"
            assert host.close() == 0
            host = None
            assert second.ended_session("through-a-restart") == public_id
            stored = second.frames(public_id)
    finally:
        if host is not None:
            host.close()
    recorded = records(record)
    assert [(f["seq"], f["kind"], f["direction"], f["raw"]) for f in stored] == [
        (f["seq"], f["kind"], f["direction"], f["raw"]) for f in recorded
    ]
    answers = [f["raw"] for f in stored if f["direction"] == "in" and f["method"] == "tools/call"]
    markers = ["before-the-stop", "while-away-3", "while-away-4", "while-away-5", "after-the-restart"]
    assert [next(m for m in markers if m in raw) for raw in answers] == markers
    assert not list((data / "taps").iterdir())  # every frame stored: the spool is gone
