"""A run refused before it has a batch leaves a results.json that says so, and the report reads
it as the tool wrote it: `failed`, and why, never `unreadable`. results.json's `batch_size` is
null until trainer.batch_size=auto's search ends (and in a run refused for its batch), then the
batch trained with."""

from __future__ import annotations

from pathlib import Path
from typing import get_type_hints

import pytest

from experiments.core.typed import mismatch
from experiments.records.recorded import (
    EpochRecord,
    FinishRecord,
    ResultsFile,
    SetupRecord,
    StartRecord,
)
from experiments.report.command import main
from helpers import results, train_cli

PHASES = (StartRecord, SetupRecord, EpochRecord, FinishRecord)


@pytest.mark.parametrize("phase", PHASES, ids=lambda phase: phase.__name__)
def test_the_reader_takes_each_phases_fields_as_that_phase_writes_them(phase: type) -> None:
    read = get_type_hints(ResultsFile)
    for key, written in get_type_hints(phase).items():
        # A value of the written type is one of the read type: null where the phase writes null.
        for example in (None, 64, 2.5, "text", True):
            if mismatch(example, written, "phase") is None:
                assert mismatch(example, read[key], "read") is None, (key, example)


# (the command line's value, the line that refuses it)
REFUSED = {
    "auto, epochs 0": (
        ("trainer.batch_size=auto", "trainer.epochs=0"),
        "trainer.epochs=0 must be a whole number >= 1",
    ),
    "lots": (("trainer.batch_size=lots",), "trainer.batch_size=lots must be a whole number from 1"),
    "true": (("trainer.batch_size=true",), "trainer.batch_size=true must be a whole number from 1"),
}


@pytest.fixture(scope="module")
def refused(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Each refused run's folder, and the last line it printed."""
    cwd = tmp_path_factory.mktemp("refused")
    runs = {}
    for name, (overrides, _) in REFUSED.items():
        run_dir = cwd / "outputs" / name.replace(", ", "_")
        done = train_cli(cwd, *overrides, f"hydra.run.dir={run_dir}")
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        runs[name] = (run_dir, done.last_line)
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("name", REFUSED)
def test_a_run_refused_before_it_has_a_batch_records_failed_and_why(
    refused: dict[str, tuple[Path, str]], name: str
) -> None:
    run_dir, last_line = refused[name]
    said = REFUSED[name][1]
    assert said in last_line
    recorded = results(run_dir)
    assert recorded["status"] == "failed"
    assert said in recorded["reason"]
    assert recorded["batch_size"] is None


@pytest.mark.slow
def test_the_report_reads_them_as_failed_with_their_reason(
    refused: dict[str, tuple[Path, str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outputs = next(iter(refused.values()))[0].parent
    monkeypatch.chdir(outputs.parent)
    capsys.readouterr()
    assert main([outputs.name]) == 0
    said = capsys.readouterr().err
    assert f"{len(REFUSED)} failed" in said
    assert "unreadable" not in said
    for _, line in REFUSED.values():
        assert line in said
