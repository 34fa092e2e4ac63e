"""Hosted tap endpoints for real: one web process on PostgreSQL and Redis, with the embedded runtime off
and no engine worker (the web process forwards and records a tap endpoint's traffic itself).

bob (operator of team A) makes an endpoint for server-everything over Streamable HTTP; our CLI gets
through it what it gets directly; a raw host keeps a connection open while carol (viewer) watches its
session live; dave (team B's admin) finds nothing; bob revokes it, and the host's open stream ends and
its next request is refused. The token never reaches the access log.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.fernet import Fernet
from support.cli import run_cli
from support.hosted import Watcher, hosted_env, manage, password_login, prepare, psql
from support.processes import free_port, stop_process

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("services")]

REDIS_DB = 5  # test_hosted.py uses 12 to 14, test_oauth_hosted.py 11, test_together.py 10, 8, 9, 15
DYING_REDIS_DB = 6  # this module's other tests, which may run beside its first
SHARED_REDIS_DB = 4
GATES_REDIS_DB = 3
JSON_REDIS_DB = 2
ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-host", "version": "1"},
    },
}


@contextlib.contextmanager
def web_with_log(env: dict[str, str], log: Path) -> Iterator[str]:
    """`mcp-inspector` on a free port, everything it logs (access lines included) in ``log``."""
    port = free_port()
    argv = [str(Path(sys.executable).with_name("mcp-inspector")), "--no-browser", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, env={**env, "LOG_LEVEL": "INFO"}, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the web process did not answer within 60 s"
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_process(proc)


def tap_sessions(database: str) -> list[tuple[str, str, str]]:
    """(public id, team, status) of every tap session, oldest first."""
    query = (
        "SELECT s.public_id, t.name, s.status FROM mcp_sessions_mcpsession s JOIN teams_team t "
        "ON t.id = s.team_id WHERE s.transport_name = 'tap' ORDER BY s.id"
    )
    return [(row[0], row[1], row[2]) for row in psql(database, query)]


def frames_of(database: str, public_id: str) -> list[tuple[str, str, str]]:
    query = (
        "SELECT f.direction, f.kind, coalesce(f.method, '') FROM mcp_sessions_timelineframe f JOIN "
        f"mcp_sessions_mcpsession s ON s.id = f.session_id WHERE s.public_id = '{public_id}' ORDER BY f.seq"
    )
    return [(row[0], row[1], row[2]) for row in psql(database, query)]


def closed_sessions(database: str, count: int) -> list[tuple[str, str, str]] | None:
    found = tap_sessions(database)
    return found if len(found) == count and all(status == "closed" for _, _, status in found) else None


def wait_until(what: str, check, timeout: float = 30):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)
    return found


def test_a_teams_tap_endpoint_is_watched_by_its_team_hidden_from_others_and_refused_once_revoked(
    hosted_database: str, tmp_path: Path, everything_http: str
) -> None:
    env = hosted_env(
        hosted_database,
        REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",  # server-everything runs on the loopback interface here
    )
    prepare(env, REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    manage(env, "create_admin", "dave", "--team", "Team B", INSPECTOR_ADMIN_PASSWORD="dave-long-password-1")
    seed = (
        "from django.contrib.auth.models import User\n"
        "from sessions.teams.models import Membership, Team\n"
        "team = Team.objects.get(name='Team A')\n"
        "for name, role in (('bob', 'operator'), ('carol', 'viewer')):\n"
        "    user = User.objects.create_user(name, password=name + '-long-password-1')\n"
        "    Membership.objects.create(team=team, user=user, role=role)\n"
    )
    manage(env, "shell", "-c", seed)
    log = tmp_path / "web.log"
    with (
        web_with_log(env, log) as web,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as bob,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as carol,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as dave,
    ):
        bob_headers = password_login(bob, "bob", "bob-long-password-1")
        carol_headers = password_login(carol, "carol", "carol-long-password-1")
        dave_headers = password_login(dave, "dave", "dave-long-password-1")

        # carol may not make one; bob makes one, and its URL is shown this once.
        form = {"name": "everything via tap", "url": everything_http}
        assert carol.post("/team/taps", data=form, headers=carol_headers).status_code == 403
        made = bob.post("/team/taps", data=form, headers=bob_headers)
        assert made.status_code == 200, made.text[:2000]
        found = re.search(r'id="new-tap-url" value="([^"]+)"', made.text)
        assert found, made.text[:2000]
        tap_url = html.unescape(found[1])
        token = tap_url.split("/tap/", 1)[1].split("/", 1)[0]
        assert tap_url == f"{web}/tap/{token}/mcp" and len(token) >= 40
        assert token not in bob.get("/team").text  # shown once: the list has no token
        endpoint_id = psql(hosted_database, "SELECT id FROM teams_tapendpoint")[0][0]
        assert psql(
            hosted_database, f"SELECT count(*) FROM teams_tapendpoint WHERE digest LIKE '%{token}%'"
        ) == [["0"]]

        # Our CLI gets through the endpoint what it gets from the server directly.
        for args in (
            ["--method", "tools/list"],
            ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=héllo"],
        ):
            direct, tapped = run_cli("--cli", everything_http, *args), run_cli("--cli", tap_url, *args)
            assert direct.returncode == tapped.returncode == 0, tapped.stderr
            assert tapped.stdout == direct.stdout
        # Each CLI run was a host connection of its own: a tap session of team A, ended by its DELETE.
        sessions = wait_until("two closed tap sessions", lambda: closed_sessions(hosted_database, 2))
        assert {team for _, team, _ in sessions} == {"Team A"}
        call_frames = frames_of(hosted_database, sessions[1][0])
        assert ("out", "message", "initialize") in call_frames and (
            "out",
            "message",
            "tools/call",
        ) in call_frames
        assert ("in", "message", "tools/call") in call_frames  # the answer, paired with its request
        assert call_frames[0] == ("local", "state", "") and call_frames[-1] == ("local", "state", "")

        # A raw host opens a connection; carol watches its session live as the host calls a tool.
        with httpx.Client(timeout=30) as host:
            # A cookie of the app's own (a browser's, say) is neither forwarded nor recorded.
            cookie = {"Cookie": "mcp_inspector_sessionid=never-forwarded-cookie"}
            opened = host.post(tap_url, json=INITIALIZE, headers={"Accept": ACCEPT} | cookie)
            assert opened.status_code == 200, opened.text
            sid = opened.headers["mcp-session-id"]
            session_headers = {"Accept": ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert host.post(tap_url, json=initialized, headers=session_headers).status_code == 202
            live_id = wait_until(
                "the raw host's session", lambda: len(s := tap_sessions(hosted_database)) == 3 and s[2][0]
            )
            assert "everything via tap" in carol.get("/").text  # on the team's home page
            leaked = "SELECT count(*) FROM mcp_sessions_timelineframe WHERE transport::text ILIKE '%cookie%'"
            assert psql(hosted_database, leaked) == [["0"]]
            watcher = Watcher(web, carol, f"/ws/sessions/{live_id}/")
            try:
                call = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": "seen-by-carol"}},
                }
                answer = host.post(tap_url, json=call, headers=session_headers)
                assert answer.status_code == 200 and "seen-by-carol" in answer.text
                watcher.wait_for("seen-by-carol", timeout=30)
            finally:
                watcher.close()
            assert carol.get(f"/s/{live_id}/").status_code == 200

            # dave, of team B, gets nothing: not the session, not the endpoint, not its listing.
            assert dave.get(f"/s/{live_id}/").status_code == 404
            assert dave.post(f"/team/taps/{endpoint_id}/revoke", headers=dave_headers).status_code == 404
            assert (
                "everything via tap" not in dave.get("/team").text
                and "everything via tap" not in dave.get("/").text
            )

            # The host opens its standalone SSE stream; bob revokes the endpoint: the stream ends at once,
            # and the host's next request is refused.
            ended = threading.Event()

            def listen() -> None:
                with (
                    contextlib.suppress(httpx.HTTPError),
                    host.stream(
                        "GET", tap_url, headers=session_headers | {"Accept": "text/event-stream"}
                    ) as stream,
                ):
                    for _ in stream.iter_raw():
                        pass
                ended.set()

            listening = threading.Thread(target=listen, daemon=True)
            listening.start()
            wait_until(
                "the GET stream in flight", lambda: ("out", "http", "") in frames_of(hosted_database, live_id)
            )
            assert not ended.is_set()
            revoked = bob.post(f"/team/taps/{endpoint_id}/revoke", headers=bob_headers)
            assert revoked.status_code == 302
            assert ended.wait(10), "the open stream was not closed when the endpoint was revoked"
            refused = host.post(tap_url, json=call | {"id": 3}, headers=session_headers)
            assert refused.status_code == 410 and refused.text.strip() == "Gone"
            listening.join(5)
        assert wait_until("the session closed", lambda: tap_sessions(hosted_database)[2][2] == "closed")
        # An unknown token is as if there were no endpoint.
        assert httpx.post(tap_url.replace(token, "x" * 43), json=call).status_code == 404
    logged = log.read_text(errors="replace")
    assert "/tap/[redacted]/mcp" in logged, logged[-3000:]
    assert token not in logged


def test_the_tap_sessions_of_a_web_process_that_dies_end_as_lost_saying_why(
    hosted_database: str, tmp_path: Path, everything_http: str
) -> None:
    """Two web processes on one database: a host's connection recorded by the first, which is killed
    (SIGKILL: no clean end); the second's reaper marks its session lost, and its page says why."""
    env = hosted_env(
        hosted_database,
        DYING_REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",
        # Not shorter: on a loaded machine beats come seconds apart, and three late is taken for dead.
        INSPECTOR_WORKER_HEARTBEAT="3",
    )
    prepare(env, DYING_REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    with (
        web_with_log(env, tmp_path / "dying.log") as dying,
        web_with_log(env, tmp_path / "staying.log") as staying,
        httpx.Client(base_url=staying, follow_redirects=False, timeout=30) as alice,
        httpx.Client(timeout=30) as host,
    ):
        headers = password_login(alice, "alice", "alice-long-password-1")
        made = alice.post("/team/taps", data={"name": "dies", "url": everything_http}, headers=headers)
        found = re.search(r'id="new-tap-url" value="([^"]+)"', made.text)
        assert made.status_code == 200 and found, made.text[:2000]
        tap_url = html.unescape(found[1]).replace(staying, dying)  # the host reaches the first process
        opened = host.post(tap_url, json=INITIALIZE, headers={"Accept": ACCEPT})
        assert opened.status_code == 200, opened.text
        session_headers = {
            "Accept": ACCEPT,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert host.post(tap_url, json=initialized, headers=session_headers).status_code == 202
        live_id = wait_until(
            "the host's session ready",
            lambda: (s := tap_sessions(hosted_database)) and s[0][2] == "ready" and s[0][0],
        )
        beating = psql(hosted_database, "SELECT name FROM mcp_sessions_engineworker WHERE role = 'web'")
        assert len(beating) == 1 and beating[0][0].endswith(":web")
        web_pid = int(beating[0][0].split(":")[1])
        os.kill(web_pid, signal.SIGKILL)
        assert alice.get("/").status_code == 200  # the staying process runs (and reaps) as before
        wait_until("the session lost", lambda: tap_sessions(hosted_database)[0][2] == "lost", timeout=60)
        page = html.unescape(alice.get(f"/s/{live_id}/").text)
        assert f"the web process that recorded this tap session {beating[0][0]} stopped answering" in page
        assert psql(hosted_database, "SELECT count(*) FROM mcp_sessions_engineworker") == [["0"]]


def test_one_host_connection_whose_requests_land_in_two_web_processes_is_one_session(
    hosted_database: str, tmp_path: Path, everything_http: str
) -> None:
    """No balancer routing by token: the host's initialize reaches one web process, its next requests
    the other; the second hands what passes to the first, which records the one session."""
    env = hosted_env(
        hosted_database,
        SHARED_REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",
    )
    prepare(env, SHARED_REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    with (
        web_with_log(env, tmp_path / "first.log") as first,
        web_with_log(env, tmp_path / "second.log") as second,
        httpx.Client(base_url=first, follow_redirects=False, timeout=30) as alice,
        httpx.Client(timeout=30) as host,
    ):
        headers = password_login(alice, "alice", "alice-long-password-1")
        made = alice.post("/team/taps", data={"name": "two", "url": everything_http}, headers=headers)
        found = re.search(r'id="new-tap-url" value="([^"]+)"', made.text)
        assert made.status_code == 200 and found, made.text[:2000]
        to_first = html.unescape(found[1])
        to_second = to_first.replace(first, second)
        opened = host.post(to_first, json=INITIALIZE, headers={"Accept": ACCEPT})
        assert opened.status_code == 200, opened.text
        session_headers = {
            "Accept": ACCEPT,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        wait_until(
            "the connection shared",
            lambda: psql(hosted_database, "SELECT count(*) FROM teams_tapconnection") == [["1"]],
        )
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert host.post(to_second, json=initialized, headers=session_headers).status_code == 202
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "via-the-second"}},
        }
        answer = host.post(to_second, json=call, headers=session_headers)
        assert answer.status_code == 200 and "via-the-second" in answer.text
        assert host.delete(to_second, headers=session_headers).status_code < 300
        sessions = wait_until("one closed tap session", lambda: closed_sessions(hosted_database, 1))
        frames = wait_until(
            "every frame of the connection",
            lambda: (
                (f := frames_of(hosted_database, sessions[0][0]))
                and ("out", "http", "") in f
                and ("in", "message", "tools/call") in f
                and f
            ),
        )
    sent = [method for direction, kind, method in frames if direction == "out" and kind == "message"]
    assert sent == ["initialize", "notifications/initialized", "tools/call"]
    assert ("in", "message", "initialize") in frames
    assert len(tap_sessions(hosted_database)) == 1
    verdicts = psql(
        hosted_database,
        "SELECT f.method, f.pair_seq IS NOT NULL, f.verdicts::text FROM mcp_sessions_timelineframe f JOIN "
        f"mcp_sessions_mcpsession s ON s.id = f.session_id WHERE s.public_id = '{sessions[0][0]}' "
        "AND f.direction = 'in' AND f.method = 'tools/call'",
    )
    assert verdicts == [["tools/call", "t", "[]"]]  # paired with its request, judged with the session
    walls = psql(
        hosted_database,
        "SELECT f.wall FROM mcp_sessions_timelineframe f JOIN mcp_sessions_mcpsession s "
        f"ON s.id = f.session_id WHERE s.public_id = '{sessions[0][0]}' ORDER BY f.seq LIMIT 2",
    )
    assert float(walls[0][0]) <= float(walls[1][0])  # the session starts before the request that opened it


def test_a_hosted_tap_sessions_request_is_held_edited_and_forwarded_from_its_page(
    hosted_database: str, tmp_path: Path, everything_http: str
) -> None:
    """Breakpoints on a tap endpoint's session: bob (operator) pauses on tools/call on its page, the
    host's call is a card, he edits its argument and forwards it; the server got the edit, the host
    its answer, and the session both versions, linked. carol (viewer) sees the card but may not act."""
    env = hosted_env(
        hosted_database,
        GATES_REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",
    )
    prepare(env, GATES_REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    seed = (
        "from django.contrib.auth.models import User\n"
        "from sessions.teams.models import Membership, Team\n"
        "team = Team.objects.get(name='Team A')\n"
        "for name, role in (('bob', 'operator'), ('carol', 'viewer')):\n"
        "    user = User.objects.create_user(name, password=name + '-long-password-1')\n"
        "    Membership.objects.create(team=team, user=user, role=role)\n"
    )
    manage(env, "shell", "-c", seed)
    with (
        web_with_log(env, tmp_path / "web.log") as web,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as bob,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as carol,
        httpx.Client(timeout=30) as host,
    ):
        bob_headers = password_login(bob, "bob", "bob-long-password-1")
        carol_headers = password_login(carol, "carol", "carol-long-password-1")
        made = bob.post("/team/taps", data={"name": "gated", "url": everything_http}, headers=bob_headers)
        found = re.search(r'id="new-tap-url" value="([^"]+)"', made.text)
        assert made.status_code == 200 and found, made.text[:2000]
        tap_url = html.unescape(found[1])
        opened = host.post(tap_url, json=INITIALIZE, headers={"Accept": ACCEPT})
        assert opened.status_code == 200, opened.text
        session_headers = {
            "Accept": ACCEPT,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert host.post(tap_url, json=initialized, headers=session_headers).status_code == 202
        live_id = wait_until(
            "the session ready",
            lambda: (s := tap_sessions(hosted_database)) and s[0][2] == "ready" and s[0][0],
        )
        assert "Pause on" in bob.get(f"/s/{live_id}/").text
        htmx = {"HX-Request": "true"}
        rule = {"direction": "out", "method": "tools/call"}
        assert (
            carol.post(f"/s/{live_id}/tap/rules", data=rule, headers=carol_headers | htmx).status_code == 403
        )
        assert bob.post(f"/s/{live_id}/tap/rules", data=rule, headers=bob_headers | htmx).status_code == 204
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "as-typed"}},
        }
        watcher = Watcher(web, carol, f"/ws/sessions/{live_id}/")  # carol's open tab hears of the card
        answers: list[httpx.Response] = []
        caller = threading.Thread(
            target=lambda: answers.append(host.post(tap_url, json=call, headers=session_headers))
        )
        caller.start()
        held = wait_until(
            "the held card", lambda: re.findall(r'id="held-(\d+)"', carol.get(f"/s/{live_id}/").text)
        )
        assert answers == []
        try:
            watcher.wait_for(f'id="held-{held[0]}"', timeout=10)
        finally:
            watcher.close()
        edited = json.dumps(
            {**call, "params": {"name": "echo", "arguments": {"message": "edited-in-flight"}}}
        )
        decided = bob.post(
            f"/s/{live_id}/tap/held/{held[0]}",
            data={"action": "edit", "raw": edited},
            headers=bob_headers | htmx,
        )
        assert decided.status_code == 204, decided.text
        caller.join(15)
        assert answers and "Echo: edited-in-flight" in answers[0].text
        rows = wait_until(
            "both versions stored",
            lambda: (
                (
                    r := psql(
                        hosted_database,
                        "SELECT f.seq, f.direction, f.note, f.transport::text "
                        "FROM mcp_sessions_timelineframe f "
                        "JOIN mcp_sessions_mcpsession s ON s.id = f.session_id "
                        f"WHERE s.public_id = '{live_id}' AND f.method = 'tools/call' ORDER BY f.seq",
                    )
                )
                and len(r) >= 3
                and r
            ),
        )
        original = next(r for r in rows if "as-typed" in r[3] or "held, edited by" in r[2])
        assert (
            "held, edited by bob" in original[2] and f'"forwarded_as": {int(original[0]) + 1}' in original[3]
        )
        assert not re.findall(r'id="held-(\d+)"', bob.get(f"/s/{live_id}/").text)  # no card left
        close = bob.post(f"/s/{live_id}/tap/fault", data={"action": "close"}, headers=bob_headers | htmx)
        assert close.status_code == 422 and "revoke the endpoint" in html.unescape(close.text)

        # The server's answer is held too (its SSE event), edited, and the host gets the edit.
        assert bob.post(f"/s/{live_id}/tap/rules/0/remove", headers=bob_headers | htmx).status_code == 204
        answer_rule = {"direction": "in", "method": "tools/call"}
        assert (
            bob.post(f"/s/{live_id}/tap/rules", data=answer_rule, headers=bob_headers | htmx).status_code
            == 204
        )
        second = {**call, "id": 3, "params": {"name": "echo", "arguments": {"message": "answer-me"}}}
        answers.clear()
        caller = threading.Thread(
            target=lambda: answers.append(host.post(tap_url, json=second, headers=session_headers))
        )
        caller.start()
        held = wait_until(
            "the held answer", lambda: re.findall(r'id="held-(\d+)"', bob.get(f"/s/{live_id}/").text)
        )
        reply = {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"content": [{"type": "text", "text": "edited-answer"}]},
        }
        decided = bob.post(
            f"/s/{live_id}/tap/held/{held[0]}",
            data={"action": "edit", "raw": json.dumps(reply)},
            headers=bob_headers | htmx,
        )
        assert decided.status_code == 204, decided.text
        caller.join(15)
        assert answers and "edited-answer" in answers[0].text and "Echo: answer-me" not in answers[0].text


def test_a_hosted_tap_sessions_json_answer_is_held_and_edited_with_its_length(
    hosted_database: str, tmp_path: Path, sdk_http_json: str
) -> None:
    """A server that answers in JSON (the SDK's, json_response): the held answer goes to the host as
    edited, its Content-Length the edit's."""
    env = hosted_env(
        hosted_database,
        JSON_REDIS_DB,
        INSPECTOR_DATA_DIR=str(tmp_path / "data"),
        INSPECTOR_HOSTED="true",
        INSPECTOR_SECRET_KEYS=Fernet.generate_key().decode(),
        INSPECTOR_EMBEDDED_RUNTIME="false",
        INSPECTOR_EGRESS_ALLOW="127.0.0.1",
    )
    prepare(env, JSON_REDIS_DB)
    manage(env, "create_admin", "alice", "--team", "Team A", INSPECTOR_ADMIN_PASSWORD="alice-long-password-1")
    with (
        web_with_log(env, tmp_path / "web.log") as web,
        httpx.Client(base_url=web, follow_redirects=False, timeout=30) as alice,
        httpx.Client(timeout=30) as host,
    ):
        headers = password_login(alice, "alice", "alice-long-password-1") | {"HX-Request": "true"}
        made = alice.post("/team/taps", data={"name": "json", "url": sdk_http_json}, headers=headers)
        found = re.search(r'id="new-tap-url" value="([^"]+)"', made.text)
        assert made.status_code == 200 and found, made.text[:2000]
        tap_url = html.unescape(found[1])
        opened = host.post(tap_url, json=INITIALIZE, headers={"Accept": ACCEPT})
        assert opened.status_code == 200 and opened.headers["content-type"].startswith("application/json")
        session_headers = {
            "Accept": ACCEPT,
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-06-18",
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert host.post(tap_url, json=initialized, headers=session_headers).status_code == 202
        live_id = wait_until(
            "the session ready",
            lambda: (s := tap_sessions(hosted_database)) and s[0][2] == "ready" and s[0][0],
        )
        rule = {"direction": "in", "method": "tools/call"}
        assert alice.post(f"/s/{live_id}/tap/rules", data=rule, headers=headers).status_code == 204
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}},
        }
        answers: list[httpx.Response] = []
        caller = threading.Thread(
            target=lambda: answers.append(host.post(tap_url, json=call, headers=session_headers))
        )
        caller.start()
        held = wait_until(
            "the held answer", lambda: re.findall(r'id="held-(\d+)"', alice.get(f"/s/{live_id}/").text)
        )
        reply = {
            "jsonrpc": "2.0",
            "id": 2,
            "result": {"content": [{"type": "text", "text": "a much longer edit"}]},
        }
        decided = alice.post(
            f"/s/{live_id}/tap/held/{held[0]}",
            data={"action": "edit", "raw": json.dumps(reply)},
            headers=headers,
        )
        assert decided.status_code == 204, decided.text
        caller.join(15)
        assert answers and answers[0].json() == reply
        assert int(answers[0].headers["content-length"]) == len(answers[0].content)
