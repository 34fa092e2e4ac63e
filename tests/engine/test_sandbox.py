"""The hosted sandbox as a command line (fast: nothing is started): what a server would see, and who decides.

What a sandboxed server really sees is proved with real processes in test_sandbox_processes.py and
tests/hosted/test_isolation.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessions.engine import (
    ClientSession,
    Sandbox,
    StdioTarget,
    TransportError,
    make_transport,
    sandbox_problem,
)
from sessions.engine._sandbox import NOBODY, bwrap_options, sandboxed
from sessions.servers import HOSTED_PATH, SANDBOX_ADVICE, Confinement, build_target

SANDBOX = Sandbox(read_only=("/opt/mcp",))
SECRET = "sk-catalog-secret-value"


def pairs(options: list[str], flag: str) -> list[tuple[str, str]]:
    """The (source, destination) of every ``flag`` in bwrap's options."""
    return [(options[i + 1], options[i + 2]) for i, option in enumerate(options) if option == flag]


@pytest.fixture
def no_probe_result() -> Iterator[None]:
    """A probe's answer is kept for the process: forget what this test made it find."""
    sandbox_problem.cache_clear()
    yield
    sandbox_problem.cache_clear()


def test_the_sandbox_has_its_own_user_pid_ipc_and_uts_namespaces_and_dies_with_its_parent() -> None:
    options = bwrap_options(SANDBOX, env={}, workdir="/tmp/mcp-server-home-x")
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"):
        assert flag in options
    assert "--disable-userns" in options
    assert "--unshare-net" not in options and "--share-net" not in options  # servers may fetch
    # A /proc of its own PID namespace: the worker and other servers are not in it.
    assert options[options.index("--proc") + 1] == "/proc"
    assert options[options.index("--tmpfs") + 1] == "/tmp"


def test_the_server_sees_the_system_read_only_and_only_its_own_directory_writable() -> None:
    options = bwrap_options(SANDBOX, env={}, workdir="/tmp/mcp-server-home-x", cwd="/srv/catalog")
    read_only = dict(pairs(options, "--ro-bind"))
    assert read_only["/usr"] == "/usr" and read_only["/opt/mcp"] == "/opt/mcp"
    assert read_only["/srv/catalog"] == "/srv/catalog"  # an administrator's directory, read-only
    assert pairs(options, "--bind") == [("/tmp/mcp-server-home-x", "/tmp/mcp-server-home-x")]
    assert options[options.index("--chdir") + 1] == "/srv/catalog"
    # Never the whole machine nor the whole of /etc (a deployment's config and secret files live there).
    assert not {"/", "/etc", "/home", "/root", "/run", "/var", "/proc"} & set(read_only)
    shown = ("/usr", "/bin", "/sbin", "/lib", "/etc/", "/opt/mcp", "/srv")
    assert all(source.startswith(shown) for source in read_only)
    assert "--dev-bind" not in options


def test_without_a_chosen_directory_the_server_starts_in_its_own() -> None:
    options = bwrap_options(SANDBOX, env={}, workdir="/tmp/mcp-server-home-y")
    assert options[options.index("--chdir") + 1] == "/tmp/mcp-server-home-y"


def test_the_servers_environment_goes_to_bwrap_through_a_memfd_never_its_command_line() -> None:
    env = {"PATH": HOSTED_PATH, "API_KEY": SECRET, "LD_PRELOAD": "/tmp/evil.so"}
    argv = ["npx", "-y", "server"]
    with sandboxed(SANDBOX, argv[0], argv[1:], env=env, workdir="/tmp/w", outer_env={"M": "1"}) as launch:
        fd = launch.pass_fds[0]
        passed = os.pread(fd, 1 << 20, 0).split(b"\0")
        assert launch.argv[1:] == ["--args", str(fd), "--", "npx", "-y", "server"]
        assert os.path.basename(launch.argv[0]) == "bwrap"
        # bwrap itself runs with only what finds its process tree: no loader variable acts on it.
        assert launch.env == {"M": "1"} and launch.cwd == "/"
    assert SECRET not in " ".join(launch.argv)
    options = [option.decode() for option in passed if option]
    assert options.index("--clearenv") < options.index("--setenv")
    assert ("API_KEY", SECRET) in pairs(options, "--setenv")
    with pytest.raises(OSError):
        os.fstat(fd)  # closed once the spawn is done


def test_as_root_the_sandbox_runs_as_nobody_otherwise_as_this_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with sandboxed(SANDBOX, "server", [], env={}, workdir="/tmp/w") as launch:
        spawn: dict[str, Any] = launch.spawn_options()
    assert (spawn["user"], spawn["group"], spawn["extra_groups"]) == (NOBODY, NOBODY, [])
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with sandboxed(SANDBOX, "server", [], env={}, workdir="/tmp/w") as launch:
        assert "user" not in launch.spawn_options()


def test_the_hosted_confinement_puts_every_stdio_server_in_its_sandbox() -> None:
    target = build_target({"command": "server"}, Confinement(hosted=True, sandbox=SANDBOX))
    assert isinstance(target, StdioTarget)
    assert target.sandbox == SANDBOX and target.watchdog and target.fresh_home and not target.inherit_env


async def test_where_no_sandbox_can_run_a_hosted_stdio_server_is_refused_saying_what_to_set_up(
    no_probe_result: None,
) -> None:
    missing = Sandbox(bwrap="no-such-bwrap-here", advice=SANDBOX_ADVICE)
    target = build_target({"command": "server", "catalog": 3}, Confinement(hosted=True, sandbox=missing))
    assert isinstance(target, StdioTarget)
    with pytest.raises(TransportError) as refused:
        await ClientSession(make_transport(target)).open()  # no bwrap found: nothing is started
    message = str(refused.value)
    assert "each runs in a bubblewrap sandbox, and no-such-bwrap-here is not installed" in message
    assert "apt-get install bubblewrap" in message and "INSPECTOR_SANDBOX=off" in message


def test_the_local_mode_and_an_administrator_who_switched_it_off_run_servers_unsandboxed() -> None:
    local = build_target({"command": "server"}, Confinement())
    off = build_target({"command": "server"}, Confinement(hosted=True, sandbox=None))
    cli = build_target({"command": "server"})
    assert isinstance(local, StdioTarget) and isinstance(off, StdioTarget) and isinstance(cli, StdioTarget)
    assert local.sandbox is None and off.sandbox is None and cli.sandbox is None
    # The app's servers are watched for a SIGKILL of the app; the CLI's are the user's own, as ever.
    assert local.watchdog and off.watchdog and not cli.watchdog


def test_the_runtime_sandboxes_hosted_servers_unless_switched_off(settings: Any) -> None:
    from sessions.runtime.owner import confinement

    settings.INSPECTOR_HOSTED = True
    settings.INSPECTOR_SANDBOX_READ = ["/opt/mcp"]
    assert confinement().sandbox == Sandbox(read_only=("/opt/mcp",), advice=SANDBOX_ADVICE)
    settings.INSPECTOR_SANDBOX = False
    assert confinement().sandbox is None
    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SANDBOX = False, True
    assert confinement().sandbox is None


# --- the start-up check --------------------------------------------------------------------------------


def test_the_check_says_when_an_administrator_switched_the_sandbox_off(settings: Any) -> None:
    from inspector.checks import check_sandbox

    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SANDBOX = True, False
    [warning] = check_sandbox()
    assert warning.id == "inspector.W001" and "unsandboxed" in warning.msg
    settings.INSPECTOR_HOSTED = False
    assert check_sandbox() == []


def test_the_check_refuses_a_readable_path_that_holds_the_data_folder_or_a_secret_file(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from inspector.checks import check_sandbox

    secret = tmp_path / "secrets" / "keys"
    monkeypatch.setenv("INSPECTOR_SECRET_KEYS_FILE", str(secret))
    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SANDBOX = True, True
    settings.DATA_DIR = tmp_path / "data"
    settings.INSPECTOR_SANDBOX_READ = [str(tmp_path), str(tmp_path / "secrets"), "relative/path"]
    problems = check_sandbox()
    assert [p.id for p in problems] == ["inspector.E005"] * 3
    assert "the data folder" in problems[0].msg and "a secret file" in problems[1].msg
    assert "not an absolute path" in problems[2].msg


def test_the_check_warns_with_what_to_set_up_where_no_sandbox_can_run(
    settings: Any, monkeypatch: pytest.MonkeyPatch, no_probe_result: None
) -> None:
    from inspector.checks import check_sandbox

    settings.INSPECTOR_HOSTED, settings.INSPECTOR_SANDBOX, settings.INSPECTOR_SANDBOX_READ = True, True, []
    monkeypatch.setenv("PATH", "/nonexistent")  # no bwrap to find: nothing is run
    [warning] = check_sandbox()
    assert warning.id == "inspector.W002"
    assert "bwrap is not installed" in warning.msg and "apt-get install bubblewrap" in warning.msg
