"""A planted misbehaving host through the stdio tap, end to end: one script of raw JSON-RPC lines breaks
the client's rules one after the other (a request before ``notifications/initialized``, cancelling its
initialize, answering ``sampling/createMessage`` without declaring ``sampling``, reusing an id,
``roots/list_changed`` without ``roots.listChanged``) against the Python SDK server; the stored session
flags each frame with its ``client-`` code and the Conformance tab says the client broke it.

The rules themselves are tested fast in tests/engine; this proves the way from a host to the tab.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from support.paths import SERVERS
from support.raw_host import RawHost
from support.tap_app import TAP, env_for, running_app

pytestmark = pytest.mark.slow

SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "planted"}


def test_each_misbehaviour_of_a_planted_host_is_flagged_as_the_clients(tmp_path: Path) -> None:
    with running_app(tmp_path / "data") as app:
        server = [sys.executable, str(SERVERS / "sdk_server.py"), "stdio"]
        host = RawHost([*TAP, "--name", "planted-host", "--", *server], env_for(app.data))
        try:
            params = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "p", "version": "1"},
            }
            assert "result" in host.ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
            host.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})  # before initialized
            host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            host.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
            call = {"name": "ask_llm", "arguments": {"prompt": "hi"}}
            host.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            asked = host.receive(lambda line: line.get("method") == "sampling/createMessage")
            host.send({"jsonrpc": "2.0", "id": asked["id"], "result": SAMPLED})  # sampling never declared
            assert host.receive(lambda line: line.get("id") == 3 and "method" not in line)["result"]
            add = {"name": "add", "arguments": {"a": 1, "b": 2}}
            host.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": add})  # id 2 again
            host.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
            host.ask({"jsonrpc": "2.0", "id": 4, "method": "ping"})
        finally:
            host.close()
        public_id = app.ended_session("planted-host")
        frames = app.frames(public_id)
        tab = app.browser.get(f"/s/{public_id}/", params={"tab": "conformance"}).text
    flagged = [
        (f["method"], v["code"])
        for f in frames
        if f["direction"] == "out"
        for v in f["verdicts"]
        if v["code"].startswith("client-")
    ]
    assert flagged == [
        ("tools/list", "client-before-initialized"),
        ("notifications/cancelled", "client-cancel-initialize"),
        ("sampling/createMessage", "client-undeclared-sampling"),
        ("tools/call", "client-id-reuse"),
        ("notifications/roots/list_changed", "client-roots-list-changed"),
    ]
    sides = set(re.findall(r'<td class="report-side">(\w+)</td>\s*<td><code>(client-[a-z-]+)</code>', tab))
    assert sides == {("client", code) for _, code in flagged}
