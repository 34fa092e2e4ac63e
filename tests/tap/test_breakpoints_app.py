"""Breakpoints and faults on a real tap, set from the running inspector's pages: a raw host script
talks to server-everything through ``mcp-inspector tap`` while the inspector holds, edits, drops and
delays its messages."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from support.app_process import MCP_INSPECTOR
from support.processes import free_port, start_http_server
from support.tap_app import TOKEN, app_env, env_for, wait_for
from support.tap_host import Host, echo

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The inspector, and a browser logged in to it (a real token login)."""
    data_dir = tmp_path_factory.mktemp("bp") / "data"
    port = free_port()
    with start_http_server([MCP_INSPECTOR, "--no-browser", "--port", str(port)], port, env=app_env(data_dir)):
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=20) as browser:
            page = browser.get("/auth/token", params={"token": TOKEN})
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            assert csrf, page.text[:500]
            login = browser.post(
                "/auth/token", data={"token": TOKEN, "csrfmiddlewaretoken": csrf[1]}, headers={"Origin": base}
            )
            assert login.status_code == 302
            yield {"base": base, "browser": browser, "data": data_dir}


def post(app: dict[str, Any], path: str, data: dict[str, Any]) -> httpx.Response:
    browser = app["browser"]
    csrf = browser.cookies["mcp_inspector_csrftoken"]
    headers = {"X-CSRFToken": csrf, "Origin": app["base"], "HX-Request": "true"}
    return browser.post(path, data=data, headers=headers)


@contextlib.contextmanager
def tapped(app: dict[str, Any], name: str, everything: dict[str, Any]) -> Iterator[tuple[Host, str]]:
    host = Host(env_for(app["data"]), name, everything)
    try:
        host.start()
        public_id = wait_for(lambda: session_id(app, name), what="the tap session on the home page")
        wait_for(lambda: "Pause on" in app["browser"].get(f"/s/{public_id}/").text, what="the tap's controls")
        yield host, public_id
    finally:
        host.close()


def session_id(app: dict[str, Any], name: str) -> str | None:
    home = app["browser"].get("/").text
    found = re.search(rf'href="/s/([0-9a-f-]+)/"[^>]*>\s*{re.escape(name)}\s*<', home)
    return found[1] if found else None


def held_ids(app: dict[str, Any], public_id: str) -> list[int]:
    page = app["browser"].get(f"/s/{public_id}/").text
    return [int(n) for n in re.findall(r'id="held-(\d+)"', page)]


def stored(app: dict[str, Any], public_id: str) -> list[dict[str, Any]]:
    text = app["browser"].get(f"/s/{public_id}/export", params={"redacted": "0"}).text
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def answered(app: dict[str, Any], public_id: str) -> list[dict[str, Any]] | None:
    """The stored frames, once a tools/call answer is among them."""
    frames = stored(app, public_id)
    found = any(f["method"] == "tools/call" and f["direction"] == "in" for f in frames)
    return frames if found else None


def test_a_held_tools_call_edited_and_forwarded_reaches_the_server_edited_and_keeps_both_versions(
    app: dict[str, Any], everything_stdio: dict
) -> None:
    with tapped(app, "bp-edit", everything_stdio) as (host, public_id):
        added = post(app, f"/s/{public_id}/tap/rules", {"direction": "out", "method": "tools/call"})
        assert added.status_code == 204, added.text
        host.write(echo(2, "as-typed"))
        held = wait_for(lambda: held_ids(app, public_id), what="the held card")
        assert host.answer(2, timeout=0.3) is None  # held: the server has not answered
        page = app["browser"].get(f"/s/{public_id}/").text
        assert "<title>(1) bp-edit" in page and "as-typed" in page
        bad = post(app, f"/s/{public_id}/tap/held/{held[0]}", {"action": "edit", "raw": "{not json"})
        assert bad.status_code == 422 and "not JSON" in bad.text
        edited = json.dumps(echo(2, "edited-in-flight"), indent=2)  # several lines: sent as one
        done = post(app, f"/s/{public_id}/tap/held/{held[0]}", {"action": "edit", "raw": edited})
        assert done.status_code == 204, done.text
        answer = host.answer(2)
        assert answer is not None and answer["result"]["content"][0]["text"] == "Echo: edited-in-flight"
        frames = wait_for(lambda: answered(app, public_id), what="the answer stored")
        original = next(f for f in frames if "as-typed" in f["raw"])
        sent = next(f for f in frames if "edited-in-flight" in f["raw"] and f["direction"] == "out")
        assert "held, edited by" in original["note"]
        assert original["transport"]["tap"]["forwarded_as"] == sent["seq"]
        assert "held, edited by" in sent["note"] and sent["transport"]["tap"]["original"] == original["seq"]
        activity = app["browser"].get(f"/s/{public_id}/panel/activity").text
        assert "tap: edit" in activity and "tap: pause on" in activity


def test_a_dropped_request_never_gets_an_answer_and_the_session_says_so(
    app: dict[str, Any], everything_stdio: dict
) -> None:
    with tapped(app, "bp-drop", everything_stdio) as (host, public_id):
        rule = post(app, f"/s/{public_id}/tap/rules", {"query": 'method:tools/call "drop-me"'})
        assert rule.status_code == 204
        host.write(echo(7, "pass-me"))
        passed = host.answer(7, timeout=10)
        assert passed is not None and passed["result"]["content"][0]["text"] == "Echo: pass-me"
        host.write(echo(8, "drop-me"))
        held = wait_for(lambda: held_ids(app, public_id), what="the held card")
        assert post(app, f"/s/{public_id}/tap/held/{held[0]}", {"action": "drop"}).status_code == 204
        assert host.answer(8, timeout=1.5) is None  # the host's own read, with its own deadline: nothing
        dropped = wait_for(
            lambda: [f for f in stored(app, public_id) if "drop-me" in f["raw"]], what="the drop stored"
        )
        assert [f["direction"] for f in dropped] == ["out"] and "dropped by" in dropped[0]["note"]
        assert held_ids(app, public_id) == []


def test_a_delay_fault_shows_in_the_answers_latency_and_as_a_frame_of_its_own(
    app: dict[str, Any], everything_stdio: dict
) -> None:
    with tapped(app, "bp-delay", everything_stdio) as (host, public_id):
        assert post(app, f"/s/{public_id}/tap/faults", {"latency_in": "500"}).status_code == 204
        started = time.monotonic()
        host.write(echo(3, "slow"))
        assert host.answer(3) is not None
        assert time.monotonic() - started >= 0.5
        frames = wait_for(lambda: answered(app, public_id), what="the answer stored")
        answer = next(f for f in frames if f["method"] == "tools/call" and f["direction"] == "in")
        assert answer["latency_ms"] >= 500
        faults = [f for f in frames if f["kind"] == "state" and (f["note"] or "").startswith("fault: added")]
        assert faults and faults[-1]["seq"] < answer["seq"]
        assert "500 ms added server → host" in app["browser"].get(f"/s/{public_id}/").text
        assert post(app, f"/s/{public_id}/tap/faults", {}).status_code == 204  # no fault any more
        started = time.monotonic()
        host.write(echo(4, "fast"))
        assert host.answer(4) is not None and time.monotonic() - started < 0.5


def test_a_viewer_bad_input_and_a_query_known_only_after_the_fact_are_refused(
    app: dict[str, Any], everything_stdio: dict
) -> None:
    with tapped(app, "bp-refuse", everything_stdio) as (_host, public_id):
        late = post(app, f"/s/{public_id}/tap/rules", {"query": "latency:>100"})
        assert late.status_code == 422 and "known only after" in late.text
        empty = post(app, f"/s/{public_id}/tap/rules", {"direction": ""})
        assert empty.status_code == 422 and "Say what to pause on" in empty.text
        gone = post(app, f"/s/{public_id}/tap/held/99", {"action": "forward"})
        assert gone.status_code == 422 and "no such held message" in gone.text
        bad = post(app, f"/s/{public_id}/tap/faults", {"latency_out": "-5"})
        assert bad.status_code == 422
