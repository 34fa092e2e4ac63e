"""A normal (non-editable) install of the checkout, as users get one: its wheel, installed by pip.

The wheel is built from the checkout by the project's build backend (hatchling, in the test venv:
nothing is downloaded) and installed by pip (``--no-deps --no-index``) into a fresh virtual
environment; pip compiles the bytecode as it installs, as it does for users. The dependencies are
this venv's, and only those a user's install has: the project's runtime requirements and theirs,
linked into the new environment's site-packages (the test tools beside them would change what
loads: httpx imports its command line's ``click`` and ``rich`` when they are there). The project's
own code comes from the wheel alone (checked), with no editable finder and no source tree on
``sys.path``. Run what it installs with ``clean_env()``: a ``PYTHONPATH`` (set when benchmarking a
worktree) would put the source tree first again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench.servers import ROOT

BUILD_WHEEL = "import sys, hatchling.build as m; print(m.build_wheel(sys.argv[1]))"


def clean_env() -> dict[str, str]:
    """This process's environment without what would make Python import the checkout instead."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _run(*argv: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=clean_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{argv} failed: {done.stderr[-2000:]}")
    return done.stdout


def runtime_dependencies(project: str = "mcp-inspector") -> list[metadata.Distribution]:
    """The distributions a user's install of ``project`` has besides it: its requirements, recursively,
    without extras (markers evaluated for this interpreter)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [Requirement(r) for r in metadata.distribution(project).requires or []]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in found or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        found[name] = dist = metadata.distribution(name)
        todo += [Requirement(r) for r in dist.requires or []]
    return list(found.values())


def _link_runtime_dependencies(site: Path) -> None:
    """Link each runtime dependency's top-level files (packages, modules, metadata) into ``site``, and
    the bytecode of its single-file modules: pip compiles it at install, and where the environment says
    PYTHONDONTWRITEBYTECODE such a module would be compiled on every start instead."""
    (site / "__pycache__").mkdir(exist_ok=True)
    for dist in runtime_dependencies():
        files = [Path(str(f)) for f in dist.files or []]
        for top in {f.parts[0] for f in files} - {"..", "__pycache__"}:
            source = Path(str(dist.locate_file(top)))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
        for cached in (f for f in files if len(f.parts) == 2 and f.parts[0] == "__pycache__"):
            source = Path(str(dist.locate_file(cached)))
            if source.exists() and not (site / cached).exists():
                (site / cached).symlink_to(source)


@contextlib.contextmanager
def installed() -> Iterator[Path]:
    """Yield the ``bin/`` of a fresh virtual environment with the checkout installed from its wheel."""
    root = Path(tempfile.mkdtemp(prefix="bench-install-"))
    try:
        _run(sys.executable, "-c", BUILD_WHEEL, root / "dist", cwd=ROOT)
        (wheel,) = (root / "dist").glob("*.whl")
        venv = root / "venv"
        _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root)
        python = venv / "bin" / "python"
        pip: list[str | Path] = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
        pip += ["--no-deps", "--no-index"]
        _run(*pip, wheel, cwd=root)
        site = Path(
            _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=root).strip()
        )
        _link_runtime_dependencies(site)
        where = Path(_run(python, "-c", "import inspector; print(inspector.__file__)", cwd=root).strip())
        if not where.is_relative_to(site) or not any(site.glob("sessions/engine/__pycache__/_http.*.pyc")):
            raise RuntimeError(f"the installed copy is not the wheel's, or has no bytecode: {where}")
        sees_tests = "import importlib.util as u; print(u.find_spec('pytest') is not None)"
        if _run(python, "-c", sees_tests, cwd=root).strip() != "False":
            raise RuntimeError("the installed copy sees the test tools")
        yield venv / "bin"
    finally:
        shutil.rmtree(root, ignore_errors=True)
