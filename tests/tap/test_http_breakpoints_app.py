"""Breakpoints and faults on a real HTTP tap, set from the running inspector's pages: raw HTTP hosts
(httpx, with deadlines of their own) talk to server-everything over Streamable HTTP through
``mcp-inspector tap --listen`` while the inspector holds, edits, drops and delays their messages."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.processes import free_port, start_http_server
from support.tap_app import TAP, App, env_for, running_app, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with running_app(tmp_path_factory.mktemp("httpbp") / "data") as running:
        yield running


def echo(rpc_id: int, text: str) -> dict[str, Any]:
    params = {"name": "echo", "arguments": {"message": text}}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


class HttpHost:
    """A raw Streamable HTTP host: its own session, its own deadline."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name
        self.client = httpx.Client(timeout=10)
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def start(self, *, initialized: bool = True) -> None:
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": self.name, "version": "1"},
        }
        first = self.client.post(
            self.url,
            headers=self.headers,
            json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        )
        assert first.status_code == 200, first.text
        self.headers |= {
            "Mcp-Session-Id": first.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        if initialized:
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any], timeout: float = 10) -> dict[str, Any] | None:
        """The answer to ``message`` (``None`` for a notification, or when the host's deadline passes)."""
        try:
            reply = self.client.post(self.url, headers=self.headers, json=message, timeout=timeout)
        except httpx.TimeoutException:
            return None
        if reply.status_code == 202:
            return None
        if reply.headers["content-type"].startswith("application/json"):
            return reply.json()
        data = [line[5:].strip() for line in reply.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1]) if data else None

    def __enter__(self) -> HttpHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()


@contextlib.contextmanager
def tapped(app: App, name: str, upstream: str) -> Iterator[tuple[str, str]]:
    """An HTTP tap for ``upstream`` named ``name``; yields the URL a host uses and the session's id."""
    port = free_port()
    argv = [*TAP, "--listen", f"127.0.0.1:{port}", "--name", name, upstream]
    with start_http_server(argv, port, env=env_for(app.data)) as tap:
        url = upstream.replace(upstream.split("/")[2], f"127.0.0.1:{port}", 1)
        public_id = wait_for(lambda: app.session_id(name), what="the tap session on the home page")
        wait_for(lambda: "Pause on" in app.browser.get(f"/s/{public_id}/").text, what="the tap's controls")
        yield url, public_id
        tap.terminate()
        tap.wait(15)


def post(app: App, path: str, data: dict[str, Any]) -> httpx.Response:
    csrf = app.browser.cookies["mcp_inspector_csrftoken"]
    headers = {"X-CSRFToken": csrf, "Origin": app.base, "HX-Request": "true"}
    return app.browser.post(path, data=data, headers=headers)


def frames_with(app: App, public_id: str, text: str) -> list[dict[str, Any]]:
    """The stored frames, once one of them holds ``text``."""

    def found() -> list[dict[str, Any]] | None:
        frames = app.frames(public_id)
        return frames if any(text in f["raw"] for f in frames) else None

    return wait_for(found, what=f"{text!r} stored")


def held_ids(app: App, public_id: str) -> list[int]:
    import re

    return [int(n) for n in re.findall(r'id="held-(\d+)"', app.browser.get(f"/s/{public_id}/").text)]


def test_a_held_tools_call_edited_and_forwarded_reaches_the_server_edited_and_keeps_both_versions(
    app: App, everything_http: str
) -> None:
    with tapped(app, "http-bp-edit", everything_http) as (url, public_id), HttpHost(url, "edit-host") as host:
        host.start()
        rule = post(app, f"/s/{public_id}/tap/rules", {"direction": "out", "method": "tools/call"})
        assert rule.status_code == 204
        answers: list[Any] = []
        caller = threading.Thread(target=lambda: answers.append(host.send(echo(2, "as-typed"))))
        caller.start()
        held = wait_for(lambda: held_ids(app, public_id), what="the held card")
        assert answers == []  # held: the server has not answered
        edited = json.dumps(echo(2, "edited-in-flight"), indent=2)
        done = post(app, f"/s/{public_id}/tap/held/{held[0]}", {"action": "edit", "raw": edited})
        assert done.status_code == 204, done.text
        caller.join(10)
        assert answers and answers[0]["result"]["content"][0]["text"] == "Echo: edited-in-flight"
        frames = frames_with(app, public_id, "Echo: edited")
        original = next(f for f in frames if "as-typed" in f["raw"])
        sent = next(f for f in frames if "edited-in-flight" in f["raw"] and f["direction"] == "out")
        assert "held, edited by" in original["note"]
        assert original["transport"]["tap"]["forwarded_as"] == sent["seq"]
        assert sent["transport"]["tap"]["original"] == original["seq"]
        assert sent["transport"]["http"]["method"] == "POST"


def test_a_dropped_request_leaves_the_host_to_its_own_deadline(app: App, everything_http: str) -> None:
    with tapped(app, "http-bp-drop", everything_http) as (url, public_id), HttpHost(url, "drop-host") as host:
        host.start()
        rule = post(app, f"/s/{public_id}/tap/rules", {"query": 'method:tools/call "drop-me"'})
        assert rule.status_code == 204
        answers: list[Any] = []
        started = time.monotonic()
        caller = threading.Thread(target=lambda: answers.append(host.send(echo(8, "drop-me"), timeout=3)))
        caller.start()
        held = wait_for(lambda: held_ids(app, public_id), what="the held card")
        assert post(app, f"/s/{public_id}/tap/held/{held[0]}", {"action": "drop"}).status_code == 204
        caller.join(10)
        assert answers == [None] and time.monotonic() - started >= 3  # the host's own timeout, nothing else
        passed = host.send(echo(9, "pass-me"))
        assert passed is not None and passed["result"]["content"][0]["text"] == "Echo: pass-me"
        frames = frames_with(app, public_id, "drop-me")
        dropped = [f for f in frames if "drop-me" in f["raw"]]
        assert [f["direction"] for f in dropped] == ["out"] and "dropped by" in dropped[0]["note"]


def test_a_latency_fault_shows_in_latency_and_two_hosts_on_the_tap_are_judged_apart(
    app: App, everything_http: str
) -> None:
    with (
        tapped(app, "http-bp-delay", everything_http) as (url, public_id),
        HttpHost(url, "clean-host") as clean,
        HttpHost(url, "rude-host") as rude,
    ):
        clean.start()
        rude.start(initialized=False)  # a planted misbehaving host: a request before it is initialized
        assert rude.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) is not None
        assert post(app, f"/s/{public_id}/tap/faults", {"latency_in": "500"}).status_code == 204
        started = time.monotonic()
        assert clean.send(echo(3, "slow")) is not None and time.monotonic() - started >= 0.5
        frames = frames_with(app, public_id, "Echo: slow")
        answer = next(f for f in frames if "Echo: slow" in f["raw"])
        assert answer["latency_ms"] >= 500
        assert any((f["note"] or "").startswith("fault: added") and f["seq"] < answer["seq"] for f in frames)

        def sent_by(host: HttpHost, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
            sid = host.headers["Mcp-Session-Id"]
            out = [f for f in frames if f["direction"] == "out" and f["kind"] == "message"]
            return [
                f
                for f in out
                if (f["transport"].get("http") or {}).get("headers", {}).get("Mcp-Session-Id") == sid
            ]

        # The second host's upstream session is a session of its own, which the tap's rules reach too.
        second = wait_for(lambda: app.session_id("http-bp-delay #2"), what="the second host's session")
        rude_frames = frames_with(app, second, "tools/list")
        assert sent_by(rude, frames) == [] and sent_by(clean, rude_frames) == []
        assert [v for f in sent_by(clean, frames) for v in f["verdicts"]] == []
        assert "client-before-initialized" in [
            v["code"] for f in sent_by(rude, rude_frames) for v in f["verdicts"]
        ]
        assert "Pause on" in app.browser.get(f"/s/{second}/").text


class LegacyHost:
    """A raw legacy HTTP+SSE host: its GET stream read by a thread, each message event queued."""

    def __init__(self, sse_url: str) -> None:
        import queue

        self.sse_url = sse_url
        self.client = httpx.Client(timeout=10)
        self.events: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.endpoint: queue.SimpleQueue[str] = queue.SimpleQueue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        origin = sse_url.split("/sse")[0]
        self.post_url = origin + self.endpoint.get(timeout=10)

    def _read(self) -> None:
        headers = {"Accept": "text/event-stream"}
        with (
            contextlib.suppress(httpx.HTTPError),
            httpx.Client(timeout=None) as reading,
            reading.stream("GET", self.sse_url, headers=headers) as stream,
        ):
            kind = ""
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:") and kind == "endpoint":
                    self.endpoint.put(line[5:].strip())
                elif line.startswith("data:"):
                    self.events.put(json.loads(line[5:].strip()))
                elif not line:
                    kind = ""

    def send(self, message: dict[str, Any]) -> int:
        return self.client.post(self.post_url, json=message).status_code

    def answer(self, rpc_id: int) -> dict[str, Any]:
        while True:
            event = self.events.get(timeout=10)
            if event.get("id") == rpc_id:
                return event

    def close(self) -> None:
        self.client.close()


def test_a_held_request_answered_with_an_error_under_legacy_sse_reaches_the_host_on_its_stream(
    app: App, everything_sse: str
) -> None:
    with tapped(app, "http-bp-legacy", everything_sse) as (url, public_id):
        host = LegacyHost(url)
        try:
            params = {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "l", "version": "1"},
            }
            assert host.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}) == 202
            assert host.answer(1)["result"]["serverInfo"]
            assert host.send({"jsonrpc": "2.0", "method": "notifications/initialized"}) == 202
            rule = post(app, f"/s/{public_id}/tap/rules", {"direction": "out", "method": "tools/call"})
            assert rule.status_code == 204
            status: list[int] = []
            sender = threading.Thread(target=lambda: status.append(host.send(echo(2, "never-sent"))))
            sender.start()
            held = wait_for(lambda: held_ids(app, public_id), what="the held card")
            answered = post(
                app,
                f"/s/{public_id}/tap/held/{held[0]}",
                {"action": "error", "code": "-32001", "message": "refused in flight"},
            )
            assert answered.status_code == 204, answered.text
            sender.join(10)
            assert status == [202]  # as a legacy server answers a POST: the answer comes on the stream
            got = host.answer(2)
            assert got["error"] == {"code": -32001, "message": "refused in flight"}
            frames = frames_with(app, public_id, "refused in flight")
            assert not any("Echo: never-sent" in f["raw"] for f in frames)  # the server never got it
        finally:
            host.close()
