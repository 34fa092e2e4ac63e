"""Clean environments for spawned stdio servers: the hosted set-up hands a server only what its config
declares; the local mode hands it the user's environment, never the app's own secrets."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from support.paths import REPO, SANDBOX_READ
from support.teams import ateam_of
from support.web import live_runtime, make_user, request, start_session, stdio_config, wait_until

from sessions.engine import ClientOptions, StdioTarget, connect, sandbox_problem
from sessions.env import SECRET_VARIABLES, secret_variables
from sessions.models import McpSession
from sessions.runtime import client
from sessions.servers import HOSTED_PATH, Confinement, build_target

MARKER = "MCP_INSPECTOR_SERVER"  # the engine's own, on every server it starts (sessions/engine/_processes.py)
SENTINEL = "MCP_TEST_USER_SENTINEL"
# The app's secrets as a worker or web process has them in its environment, files included.
APP_SECRETS = {
    "SECRET_KEY": "django-secret",
    "DB_PASSWORD": "db-secret",
    "REDIS_URL": "redis://:redis-secret@127.0.0.1:6379/0",
    "INSPECTOR_LLM_API_KEY": "llm-secret",
    "INSPECTOR_TOKEN": "token-secret",
    "INSPECTOR_SECRET_KEYS": "fernet-secret",
    "DB_PASSWORD_FILE": "/run/secrets/db_password",
}


@pytest.fixture
def app_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment holds a user's variable and every secret of the app's."""
    monkeypatch.setenv(SENTINEL, "from-the-user")
    for name, value in APP_SECRETS.items():
        monkeypatch.setenv(name, value)


# --- deciding the environment (fast) ----------------------------------------------------------------


def test_every_secret_the_app_reads_is_in_the_withheld_list() -> None:
    read = set()
    for path in [*REPO.joinpath("inspector").rglob("*.py"), *REPO.joinpath("sessions").rglob("*.py")]:
        read |= set(re.findall(r"envsecret\(\s*[\"']([A-Z0-9_]+)[\"']", path.read_text(encoding="utf-8")))
    assert {"SECRET_KEY", "DB_PASSWORD", "REDIS_URL", "INSPECTOR_LLM_API_KEY", "INSPECTOR_TOKEN"} <= read
    assert read <= set(SECRET_VARIABLES), f"add {sorted(read - set(SECRET_VARIABLES))} to SECRET_VARIABLES"
    assert {"DB_PASSWORD_FILE", "SECRET_KEY_FILE", "INSPECTOR_SECRET_KEYS"} <= secret_variables()


def test_a_hosted_stdio_server_gets_only_its_declared_environment(app_environment: None) -> None:
    config = {"command": "server", "env": {"API_URL": "https://api.example"}}
    target = build_target(config, Confinement(hosted=True, withheld_env=secret_variables()))
    assert isinstance(target, StdioTarget)
    assert target.env == {"PATH": HOSTED_PATH, "API_URL": "https://api.example"}
    assert not target.inherit_env and target.fresh_home


def test_a_hosted_stdio_config_may_declare_its_path_and_home() -> None:
    config = {"command": "server", "env": {"PATH": "/opt/node/bin", "HOME": "/srv/home"}}
    target = build_target(config, Confinement(hosted=True))
    assert isinstance(target, StdioTarget)
    assert target.env == {"PATH": "/opt/node/bin", "HOME": "/srv/home"} and not target.fresh_home


def test_a_local_stdio_server_gets_the_users_environment_without_the_apps_secrets(
    app_environment: None,
) -> None:
    config = {"command": "server", "env": {"REDIS_URL": "redis://its-own", "API_URL": "x"}}
    target = build_target(config, Confinement(withheld_env=secret_variables()))
    assert isinstance(target, StdioTarget) and not target.inherit_env
    assert target.env[SENTINEL] == "from-the-user" and target.env["PATH"] == os.environ["PATH"]
    assert target.env["REDIS_URL"] == "redis://its-own"  # what the config declares is its own
    assert not (set(APP_SECRETS) - {"REDIS_URL"}) & set(target.env)


def test_the_cli_passes_the_users_whole_environment() -> None:
    target = build_target({"command": "server", "env": {"A": "1"}})
    assert isinstance(target, StdioTarget)
    assert target.inherit_env and target.env == {"A": "1"} and not target.fresh_home


def test_a_hosted_cwd_is_used_only_for_a_catalog_server() -> None:
    config = {"command": "server", "cwd": "/root"}
    with pytest.raises(ValueError, match="cwd names a file on the inspector's own machine"):
        build_target(config, Confinement(hosted=True))
    assert build_target({**config, "catalog": 7}, Confinement(hosted=True)).cwd == "/root"  # type: ignore[union-attr]
    assert build_target(config, Confinement()).cwd == "/root"  # type: ignore[union-attr]


def test_the_runtime_confines_its_servers_by_the_settings(settings: Any) -> None:
    from sessions.runtime.owner import confinement

    settings.INSPECTOR_HOSTED = False
    assert confinement() == Confinement(hosted=False, withheld_env=secret_variables(), egress_allow=())
    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_EGRESS_ALLOW = ["10.0.0.0/8", "intranet.example"]
    assert confinement().hosted and confinement().egress_allow == ("10.0.0.0/8", "intranet.example")


@pytest.mark.django_db(transaction=True)
async def test_where_no_sandbox_can_run_a_hosted_stdio_session_fails_saying_what_to_set_up(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SANDBOX = True, True
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap to find: nothing is started
    sandbox_problem.cache_clear()
    try:
        async with live_runtime():
            alice = await make_user()
            config = {**stdio_config("server", []), "catalog": {"id": 1}}
            session = await McpSession.objects.acreate(
                owner=alice, team=await ateam_of(alice), name="x", config=config
            )
            await client.start_session(session)

            def ended() -> McpSession | None:
                session.refresh_from_db()
                return session if session.status in ("failed", "closed") else None

            await wait_until(ended, what="the session to end")
    finally:
        sandbox_problem.cache_clear()
    assert session.status == "failed"
    assert "bubblewrap sandbox, and bwrap is not installed" in session.status_note
    assert (
        "apt-get install bubblewrap" in session.status_note and "INSPECTOR_SANDBOX=off" in session.status_note
    )


# --- what a real server sees (slow) -----------------------------------------------------------------


def environment_of(result: dict[str, Any]) -> dict[str, str]:
    """The environment server-everything's get-env tool reports."""
    env: dict[str, str] = json.loads(result["content"][0]["text"])
    return env


@pytest.mark.slow
async def test_a_hosted_server_sees_none_of_the_workers_environment(
    everything_stdio: dict, app_environment: None
) -> None:
    config = {**everything_stdio, "env": {"DECLARED": "yes"}}
    target = build_target(config, Confinement(hosted=True, withheld_env=secret_variables()))
    async with asyncio.timeout(30), connect(target, ClientOptions(timeout=20)) as session:
        env = environment_of(await session.call_tool("get-env"))
        home = Path(env["HOME"])
        assert home.is_dir() and not any(home.iterdir()) and home.name.startswith("mcp-server-home-")
    assert set(env) == {"DECLARED", "PATH", "HOME", MARKER}, sorted(env)
    assert env["PATH"] == HOSTED_PATH and env["DECLARED"] == "yes"
    assert not home.exists()  # removed with the server


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_local_session_passes_the_users_environment_but_not_the_apps_secrets(
    everything_stdio: dict, app_environment: None, settings: Any
) -> None:
    settings.INSPECTOR_HOSTED = False
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(everything_stdio["command"], everything_stdio["args"], env={"DECLARED": "yes"})
        session = await start_session(alice, config)
        answer = await request(session, "tools/call", {"name": "get-env", "arguments": {}}, wait=20)
    env = environment_of(answer["result"])
    assert env[SENTINEL] == "from-the-user" and env["DECLARED"] == "yes"
    assert env["PATH"] == os.environ["PATH"]
    assert not set(APP_SECRETS) & set(env), sorted(set(APP_SECRETS) & set(env))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_hosted_session_passes_nothing_of_the_web_process(
    everything_stdio: dict, app_environment: None, settings: Any
) -> None:
    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SANDBOX_READ = True, SANDBOX_READ
    async with live_runtime():
        alice = await make_user()
        config = stdio_config(everything_stdio["command"], everything_stdio["args"], env={"DECLARED": "yes"})
        session = await start_session(alice, config)
        answer = await request(session, "tools/call", {"name": "get-env", "arguments": {}}, wait=20)
    env = environment_of(answer["result"])
    # PWD is bubblewrap's, the sandbox's working directory.
    assert set(env) == {"DECLARED", "PATH", "HOME", MARKER, "PWD"}, sorted(env)
