"""The package's shape: no module imports another that (through any chain) imports it back,
every module imports, and no function is too long to read in one sitting. The layers themselves
are import-linter's contract (`lint-imports`, in pyproject.toml and .ci/run)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import experiments

# The most lines a function or method of the package may have, its def line to its last
# (decorators left out): a longer one is split along the story it tells.
LONGEST_FUNCTION = 60


def test_no_module_imports_in_a_circle() -> None:
    # import-linter's graph builder (a dev dependency; a GPU machine running only the gpu tests
    # may not have it).
    grimp = pytest.importorskip("grimp")
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


@pytest.mark.slow
def test_no_function_is_over_60_lines() -> None:
    package = Path(experiments.__file__).parent
    too_long = [
        f"{path.relative_to(package.parent.parent)}:{line} {name} ({length} lines)"
        for path in sorted(package.rglob("*.py"))
        for line, name, length in functions_over(path.read_text(encoding="utf-8"))
    ]
    assert not too_long, f"over {LONGEST_FUNCTION} lines: {', '.join(too_long)}"


def test_a_function_is_measured_from_its_def_line_to_its_last() -> None:
    # 61 lines from def to return, under two decorators that do not count; a method as long.
    body = ["    total = 1"] * 59 + ["    return total"]
    lines = ["@decorated", "@twice", "def long():", *body, "", "def short():", "    pass", ""]
    lines += ["class Holder:", "    async def long(self):", *(f"    {line}" for line in body)]
    source = "\n".join(lines)
    assert functions_over(source) == [(3, "long", 61), (69, "long", 61)]
    assert functions_over(source, limit=61) == []


def functions_over(source: str, limit: int = LONGEST_FUNCTION) -> list[tuple[int, str, int]]:
    """Each function and method (nested ones too) in `source` of more than `limit` lines, from
    its def line to its last: (def line, name, lines)."""
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return [
        (node.lineno, node.name, length)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, functions) and (length := node.end_lineno - node.lineno + 1) > limit
    ]
