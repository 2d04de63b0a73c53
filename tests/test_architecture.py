"""The package's shape: no module imports another that (through any chain) imports it back, and
every module imports. The layers themselves are import-linter's contract (`lint-imports`, in
pyproject.toml and .ci/run)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import experiments

# import-linter's graph builder (a dev dependency; a GPU machine running only the gpu tests may
# not have it).
grimp = pytest.importorskip("grimp")


def test_no_module_imports_in_a_circle() -> None:
    graph = grimp.build_graph("experiments")
    imports = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    circles = []
    state: dict[str, str] = {}  # "open" while on the path, "done" once every import is seen

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(imports[module]):
            if state.get(imported) == "open":
                circles.append(" -> ".join([*path[path.index(imported) :], imported]))
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = "done"

    for module in sorted(graph.modules):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_every_module_imports() -> None:
    # lint-imports passes over an import of a module that does not exist; importing does not.
    modules = [
        info.name
        for info in pkgutil.walk_packages(experiments.__path__, "experiments.")
        if not info.name.endswith("__main__")  # (runs its command)
    ]
    assert len(modules) > 50
    for name in modules:
        importlib.import_module(name)
