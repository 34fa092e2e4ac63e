"""The architecture's own guardrails: no import cycle anywhere, no module too long to read.

The layer contracts live in pyproject.toml ([tool.importlinter], run by tests/run); these are what a
contract cannot say. grimp (import-linter's graph) sees every import statement: function-level and
``TYPE_CHECKING`` ones too, so a cycle hidden inside a function still counts.
"""

from __future__ import annotations

from pathlib import Path

import grimp
from support.paths import REPO

MAX_LINES = 800


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(module: str) -> None:
        nonlocal counter
        index[module] = low[module] = counter
        counter += 1
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_the_project_has_no_import_cycle() -> None:
    graph = grimp.build_graph("sessions", "inspector", include_external_packages=False, cache_dir=None)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "loop"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from loop import b\n")
    (package / "b.py").write_text("def late():\n    from loop import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("loop", cache_dir=None)
    assert _cycles(graph) == [["loop.a", "loop.b"]]


def test_no_module_is_over_800_lines() -> None:
    sources = [*REPO.glob("sessions/**/*.py"), *REPO.glob("inspector/**/*.py")]
    long = {
        str(path.relative_to(REPO)): n
        for path in sources
        if "migrations" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
