"""The benchmark scripts import: they run rarely, so a moved name would otherwise go unseen."""

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize("script", sorted(path.stem for path in BENCH.glob("*.py")))
def test_a_benchmark_script_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if script == "lightning_peer":  # its own requirements: bench/requirements-lightning.txt
        pytest.importorskip("lightning")
    monkeypatch.syspath_prepend(str(BENCH))
    module = importlib.import_module(script)
    assert module.__file__ == str(BENCH / f"{script}.py")
    sys.modules.pop(script)
