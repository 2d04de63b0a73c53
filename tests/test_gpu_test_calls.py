"""Every call a `gpu`-marked test makes by a name of its module (a function or class of ours it
imports or defines, `checkpoints.load` through an imported module) fits that code's signature.
Method calls on objects (`metrics.resume_after(...)`) and the calls inside helpers are not seen;
arguments unpacked from a dict the test spells out (`options = {"device": ...}`, then
`Batches(split, **options)`) are seen through.

The `gpu` tests are skipped on machines without a GPU, where they are mostly written and changed:
a call that no longer fits its callee (`checkpoints.load(path, map_location=...)`, after `load`
lost that parameter) would fail only on a GPU machine. Here each such call is bound, without
running it, against the signature of what it calls: the callee is looked up in the test module's
own names (its imports and functions), and `inspect.Signature.bind` refuses an argument the
callee does not take, or a required one left out.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from helpers import ROOT

TESTS = ROOT / "tests"
# Code of our own: the package and the tests' helpers (not torch's, nor the standard library's).
OURS = (ROOT / "src", TESTS)


def test_every_call_of_our_code_in_gpu_tests_fits_its_signature() -> None:
    modules = [path for path in sorted(TESTS.rglob("test_*.py")) if _gpu_marked(_parsed(path))]
    assert modules, "no gpu-marked test found: the check would check nothing"
    misfits = [misfit for path in modules for misfit in calls_that_do_not_fit(path)]
    assert misfits == []


def test_a_call_with_a_parameter_its_callee_lost_is_found(tmp_path: Path) -> None:
    """The call that failed on every GPU, and its like: a keyword the callee lost, an argument
    too many, a required one missing; in a marked test, or anywhere in a module marked whole."""
    marked_test = tmp_path / "test_marked.py"
    marked_test.write_text(
        "import pytest\n"
        "from experiments.records import checkpoints\n"
        "from experiments.devices.plan import DevicePlan\n\n"
        "def test_on_the_cpu(path):\n"
        "    checkpoints.load(path, map_location='cpu')  # runs everywhere: it fails by itself\n\n"
        "@pytest.mark.gpu\n"
        "def test_on_a_gpu(path):\n"
        "    checkpoints.load(path, map_location='cuda:0')\n"
        "    checkpoints.load(path)\n"
        "    DevicePlan('cuda', 0, (0, 1), 'nccl', 'why', 'one too many')\n"
        "    options = {'map_location': 'cuda:0'}\n"
        "    checkpoints.load(path, **options)\n"
        "    written = dict(path=path, map_location='cpu')\n"
        "    checkpoints.load(**written)\n"
        "    others = {'path': path}\n"
        "    others = {'map_location': 'cpu'}\n"
        "    checkpoints.load(**others)  # assigned twice: which is not known, so not checked\n"
    )
    marked_module = tmp_path / "test_module.py"
    marked_module.write_text(
        "import pytest\n"
        "from experiments.records import checkpoints\n\n"
        "pytestmark = [pytest.mark.gpu]\n\n"
        "def saved_state(path):\n"
        "    return checkpoints.save(path)\n"
    )
    assert calls_that_do_not_fit(marked_test) == [
        "test_marked.py:10: checkpoints.load: got an unexpected keyword argument 'map_location'",
        "test_marked.py:12: DevicePlan: too many positional arguments",
        "test_marked.py:14: checkpoints.load: got an unexpected keyword argument 'map_location'",
        "test_marked.py:16: checkpoints.load: got an unexpected keyword argument 'map_location'",
    ]
    assert calls_that_do_not_fit(marked_module) == [
        "test_module.py:7: checkpoints.save: missing a required argument: 'checkpoint'"
    ]


def calls_that_do_not_fit(path: Path) -> list[str]:
    """`file:line: callee: why` for each call of our code, in the gpu-marked parts of the test
    module at `path`, that its callee's signature refuses."""
    module = _imported(path)
    misfits = []
    for part in _gpu_marked(_parsed(path)):
        spelled_out = _dicts_spelled_out(part)
        for call in ast.walk(part):
            if not isinstance(call, ast.Call):
                continue
            callee = _callee(call.func, module)
            if callee is None:
                continue
            why = _refusal(inspect.signature(callee), call, spelled_out)
            if why is not None:
                misfits.append(f"{path.name}:{call.lineno}: {ast.unparse(call.func)}: {why}")
    return misfits


def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _gpu_marked(tree: ast.Module) -> list[ast.AST]:
    """What of a test module runs only on a GPU: all of it, if its `pytestmark` has `gpu`; else
    the functions and classes decorated with `pytest.mark.gpu`."""
    for statement in tree.body:
        if not isinstance(statement, ast.Assign):
            continue
        marks = any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in statement.targets)
        if marks and _names_the_gpu_mark(statement.value):
            return [tree]
    definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, definitions) and any(map(_names_the_gpu_mark, node.decorator_list))
    ]


def _names_the_gpu_mark(node: ast.AST) -> bool:
    return any(
        isinstance(part, ast.Attribute)
        and part.attr == "gpu"
        and ast.unparse(part.value) == "pytest.mark"
        for part in ast.walk(node)
    )


def _imported(path: Path) -> ModuleType:
    """The test module, imported afresh under a name of its own (pytest's copy is left alone)."""
    spec = importlib.util.spec_from_file_location(f"_calls_checked_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _callee(expression: ast.expr, module: ModuleType) -> Any:
    """What `name` or `name.attribute...` is in the module's namespace, if it is our code with a
    signature; None for anything else (a local variable, a call's result, torch)."""
    names = list(_dotted(expression))
    if not names or names[0] not in vars(module):
        return None
    found: Any = vars(module)[names[0]]
    for name in names[1:]:
        found = getattr(found, name, None)
    if not callable(found) or isinstance(found, ModuleType):
        return None
    try:
        source = Path(inspect.getsourcefile(found) or "")
    except TypeError:  # a builtin, or an instance of a class with __call__
        return None
    if not any(source.is_relative_to(root) for root in OURS):
        return None
    return found


def _dotted(expression: ast.expr) -> Iterator[str]:
    """The names of `a.b.c`, first to last (none for any other expression)."""
    if isinstance(expression, ast.Name):
        yield expression.id
    elif isinstance(expression, ast.Attribute):
        inner = list(_dotted(expression.value))
        if inner:
            yield from inner
            yield expression.attr


def _dicts_spelled_out(part: ast.AST) -> dict[str, list[str]]:
    """The keys of each dict assigned once to a name in `part` whose keys are all written out:
    `options = {"mean": ..., "std": ...}` or `options = dict(mean=..., std=...)`."""
    keys: dict[str, list[str] | None] = {}
    for statement in ast.walk(part):
        if not isinstance(statement, ast.Assign):
            continue
        for target in statement.targets:
            if isinstance(target, ast.Name):
                seen_before = target.id in keys
                keys[target.id] = None if seen_before else _written_out_keys(statement.value)
    return {name: found for name, found in keys.items() if found is not None}


def _written_out_keys(value: ast.expr) -> list[str] | None:
    if isinstance(value, ast.Dict):
        written = [key.value for key in value.keys if isinstance(key, ast.Constant)]
        strings = [key for key in written if isinstance(key, str)]
        return strings if len(strings) == len(value.keys) else None
    if isinstance(value, ast.Call) and ast.unparse(value.func) == "dict" and not value.args:
        named = [keyword.arg for keyword in value.keywords]
        return None if None in named else [name for name in named if name is not None]
    return None


def _refusal(
    signature: inspect.Signature, call: ast.Call, spelled_out: dict[str, list[str]]
) -> str | None:
    """Why `signature` refuses the call's arguments (None: it takes them). A `**name` whose dict
    is `spelled_out` gives its keys as named arguments; with any other `*args` or `**kwargs` at
    the call, how many arguments there are is not known: only the names given are checked."""
    named: list[str] = []
    unknown = False
    for keyword in call.keywords:
        if keyword.arg is not None:
            named.append(keyword.arg)
        elif isinstance(keyword.value, ast.Name) and keyword.value.id in spelled_out:
            named += spelled_out[keyword.value.id]
        else:
            unknown = True
    unpacked = unknown or any(isinstance(argument, ast.Starred) for argument in call.args)
    if unpacked:
        parameters = signature.parameters
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return None
        takes = {name for name, p in parameters.items() if p.kind is not p.POSITIONAL_ONLY}
        unknown = [name for name in named if name not in takes]
        return f"got an unexpected keyword argument '{unknown[0]}'" if unknown else None
    try:
        signature.bind(*call.args, **dict.fromkeys(named))
    except TypeError as error:
        return str(error)
    return None
