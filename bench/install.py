"""A normal (non-editable) install of the checkout, as users get one: its wheel, installed by pip.

The wheel is built from the checkout by the project's build backend (hatchling, in the test venv:
nothing is downloaded) and installed by pip (``--no-deps --no-index``) into a fresh virtual
environment; pip compiles the bytecode as it installs, as it does for users. The dependencies are
this venv's: the new environment reaches them through a path entry after its own site-packages (a
``.pth`` file), so the project's own code comes from the wheel alone (checked), with no editable
finder and no source tree on ``sys.path``. Run what it installs with ``clean_env()``: a
``PYTHONPATH`` (set when benchmarking a worktree) would put the source tree first again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
        (site / "bench-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        where = Path(_run(python, "-c", "import inspector; print(inspector.__file__)", cwd=root).strip())
        if not where.is_relative_to(site) or not any(site.glob("sessions/engine/__pycache__/_http.*.pyc")):
            raise RuntimeError(f"the installed copy is not the wheel's, or has no bytecode: {where}")
        yield venv / "bin"
    finally:
        shutil.rmtree(root, ignore_errors=True)
