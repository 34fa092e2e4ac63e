"""Build hook: the top-level templates/ and static/ go into the built package as inspector/templates
and inspector/static, so an installed wheel carries them. Everything else is in pyproject.toml.

An editable install skips the copy: it reads them from the checkout (inspector/settings.py).
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RESOURCES = ("templates", "static")


class BuildPyWithResources(build_py):
    """build_py, then copy templates/ and static/ under inspector/ in the build directory."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in RESOURCES:
            if not Path(name).is_dir():
                raise SystemExit(f"{name}/ is missing: build from a checkout or a complete sdist")
            self.copy_tree(name, str(Path(self.build_lib) / "inspector" / name))


setup(cmdclass={"build_py": BuildPyWithResources})
