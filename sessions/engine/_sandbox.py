"""A stdio server in a sandbox: bubblewrap (``bwrap``) with user, mount, PID, IPC and UTS namespaces.

Inside, the server sees the system's programs and libraries read-only (``/usr`` and the top-level
links to it), the few files of ``/etc`` that resolving names, checking certificates and naming users
need, the paths the sandbox lists as readable, its own ``/proc`` (its own processes only: not the
worker, not other servers), a minimal ``/dev``, a private ``/tmp`` and a fresh working directory of
its own. Nothing else of the machine: not the worker's files, its data folder, secret files or other
servers' directories. The network is the machine's: servers may fetch.

bwrap runs unprivileged: it needs only that this process may create a user namespace. When this
process is root, the sandbox is started as an unprivileged user (``Sandbox.user``, ``nobody``), so
root's files stay out of reach even of the namespace's own root. With a PID namespace, the server's
whole tree dies with the sandbox's first process, which dies with bwrap (``--die-with-parent``), which
dies with this process (the parent-death signal): nothing it started outlives it, however it forked.

The options travel through a memfd (``--args``), not bwrap's command line: the server's environment,
which may hold its secrets, would otherwise be readable in ``/proc/<pid>/cmdline`` by anyone on the
machine. bwrap itself gets an environment of one variable, so nothing meant for the server (a loader
variable, say) acts on bwrap before the sandbox exists.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Launch", "Sandbox", "bwrap_options", "prepare_workdir", "sandbox_problem", "sandboxed"]

# What of /etc a program needs to resolve names, check TLS certificates, name users, find libraries
# and its interpreter's settings; the rest of /etc (a deployment's own config, secrets) stays out.
ETC = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "gai.conf",
    "group",
    "host.conf",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki",
    "protocols",
    "python3*",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
)
# On merged-/usr systems these are links into /usr; elsewhere, directories of their own.
TOP_LEVEL = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
NOBODY = 65534


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where a stdio server runs when it must not reach the machine it runs on."""

    read_only: tuple[str, ...] = ()
    """Host paths the server may read too (where a server's program lives), bound at the same place."""
    bwrap: str = "bwrap"
    user: int = NOBODY
    """The uid and gid the sandbox runs as on the host when this process is root."""
    advice: str = ""
    """What to set up where no sandbox can run, told with the reason (the app knows its own settings)."""

    def refusal(self, problem: str) -> str:
        """Why a server is not started: ``problem`` (``sandbox_problem``'s answer) and what to do."""
        said = f"stdio servers cannot start here: each runs in a bubblewrap sandbox, and {problem}"
        return f"{said}. {self.advice}" if self.advice else said


@dataclass(slots=True)
class Launch:
    """How to start a process: its argv, environment and directory, and what the spawn must pass on."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    pass_fds: tuple[int, ...] = ()
    user: int | None = None
    """Become this uid and gid (and no supplementary groups) before the exec; None: stay as is."""

    def spawn_options(self) -> dict[str, Any]:
        """The keyword arguments of ``subprocess.Popen`` (or asyncio's) that carry this launch out."""
        options: dict[str, Any] = {"env": self.env, "cwd": self.cwd, "pass_fds": self.pass_fds}
        if self.user is not None:
            options |= {"user": self.user, "group": self.user, "extra_groups": []}
        return options


def _system_binds() -> list[str]:
    options = ["--ro-bind", "/usr", "/usr"]
    for path in TOP_LEVEL:
        if os.path.islink(path):
            options += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            options += ["--ro-bind", path, path]
    for name in ETC:
        for path in sorted(glob.glob(os.path.join("/etc", name))):
            options += ["--ro-bind", path, path]
    return options


def bwrap_options(
    sandbox: Sandbox, *, env: Mapping[str, str], workdir: str, cwd: str | None = None
) -> list[str]:
    """bwrap's options for one server: namespaces, what it sees, its environment and directory.

    ``workdir`` is the server's own directory (bound read-write); ``cwd``, a directory an
    administrator chose, is bound read-only and is where it starts instead.
    """
    options = [
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        # No namespaces of its own inside: the kernel's namespace code is attack surface enough.
        "--disable-userns",
        "--die-with-parent",
        *_system_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
    ]
    for path in sandbox.read_only:
        options += ["--ro-bind", path, path]
    options += ["--bind", workdir, workdir]
    if cwd:
        options += ["--ro-bind", cwd, cwd]
    options += ["--chdir", cwd or workdir, "--clearenv"]
    for name, value in env.items():
        options += ["--setenv", name, value]
    return options


def _bwrap_path(sandbox: Sandbox) -> str:
    return shutil.which(sandbox.bwrap) or sandbox.bwrap


def _run_as(sandbox: Sandbox) -> int | None:
    return sandbox.user if os.geteuid() == 0 else None


def prepare_workdir(sandbox: Sandbox, path: str) -> None:
    """Make a fresh directory the sandbox's to write in (when this process is root, it is another user)."""
    user = _run_as(sandbox)
    if user is not None:
        os.chown(path, user, user)


@contextlib.contextmanager
def sandboxed(
    sandbox: Sandbox,
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    workdir: str,
    cwd: str | None = None,
    outer_env: Mapping[str, str] | None = None,
) -> Iterator[Launch]:
    """The launch of ``command`` in the sandbox; its options' memfd is closed when the block ends.

    ``outer_env`` is bwrap's own environment (what finds the process tree from outside), not the server's.
    """
    data = b"".join(
        option.encode() + b"\0" for option in bwrap_options(sandbox, env=env, workdir=workdir, cwd=cwd)
    )
    fd = os.memfd_create("mcp-sandbox-options")
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        yield Launch(
            [_bwrap_path(sandbox), "--args", str(fd), "--", command, *args],
            env=dict(outer_env or {}),
            cwd="/",
            pass_fds=(fd,),
            user=_run_as(sandbox),
        )
    finally:
        os.close(fd)


@functools.cache
def sandbox_problem(sandbox: Sandbox) -> str:
    """Why no server can start in this sandbox on this machine, or "" when one can (bwrap runs ``true``).

    Found once per process: a missing bwrap, user namespaces refused (a sysctl, a container's
    seccomp profile, an AppArmor rule), a readable path that cannot be bound.
    """
    if shutil.which(sandbox.bwrap) is None:
        return f"{sandbox.bwrap} is not installed (not found on PATH)"
    with tempfile.TemporaryDirectory(prefix="mcp-sandbox-probe-") as workdir:
        try:
            prepare_workdir(sandbox, workdir)
            with sandboxed(sandbox, "true", [], env={"PATH": "/usr/bin:/bin"}, workdir=workdir) as launch:
                run = subprocess.run(
                    launch.argv,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=30,
                    check=False,
                    **launch.spawn_options(),
                )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap could not be run: {exc}"
    if run.returncode != 0:
        said = run.stderr.decode(errors="replace").strip().splitlines()
        return f"bwrap failed: {said[-1] if said else f'exit code {run.returncode}'}"
    return ""
