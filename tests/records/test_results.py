"""results.json through a job's life (records.results): what a phase learns is written once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.records.recorded import EpochRecord, SetupRecord, finish_record
from experiments.records.results import Results
from experiments.training.tasks import Classification, Regression


def recorded(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_what_a_phase_learns_is_written_once_at_its_end(tmp_path: Path) -> None:
    with Results(tmp_path, {}) as results:
        assert recorded(tmp_path)["status"] == "running"
        with results.phase():
            results.add(SetupRecord, device={"used": "cpu"})
            results.add(SetupRecord, channels_last=False)
            assert "device" not in recorded(tmp_path)  # not yet
        assert recorded(tmp_path)["device"] == {"used": "cpu"}
        assert recorded(tmp_path)["channels_last"] is False
        results.add(EpochRecord, epochs_completed=1)  # outside a phase: at once
        assert recorded(tmp_path)["epochs_completed"] == 1


def test_a_failure_within_a_phase_is_recorded_with_what_it_had_learned(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError), Results(tmp_path, {}) as results, results.phase():
        results.add(SetupRecord, device={"used": "cpu"})
        raise ExperimentError("data.root=nowhere: no such folder")
    record = recorded(tmp_path)
    assert (record["status"], record["reason"]) == ("failed", "data.root=nowhere: no such folder")
    assert record["device"] == {"used": "cpu"}


def test_numbers_that_are_not_finite_are_written_as_null_in_strict_json(tmp_path: Path) -> None:
    """json.dumps writes NaN and Infinity by default, which strict JSON readers refuse."""
    with Results(tmp_path, {}) as results:
        results.finish(
            "completed", None, finish_record(Regression.measured), test_r2=math.nan, val_r2=math.inf
        )

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is no JSON")

    record = json.loads((tmp_path / "results.json").read_text(), parse_constant=refuse)
    assert (record["test_r2"], record["val_r2"]) == (None, None)


def test_each_phase_writes_its_typed_record_and_a_task_its_own_numbers(tmp_path: Path) -> None:
    with Results(tmp_path, {}) as results:
        with pytest.raises(TypeError, match=r"^SetupRecord has no epoch_count$"):
            results.add(SetupRecord, epoch_count=1)
        with pytest.raises(TypeError, match=r"^EpochRecord: epochs_completed is text"):
            results.add(EpochRecord, epochs_completed="1")
        # A regression's numbers are keyed by its metrics: it has no accuracy to write.
        with pytest.raises(TypeError, match=r"^Finished has no test_accuracy$"):
            results.finish("completed", None, finish_record(Regression.measured), test_accuracy=0.5)
        assert "test_accuracy" not in recorded(tmp_path)
        results.finish("completed", None, finish_record(Classification.measured), test_accuracy=0.5)
    assert recorded(tmp_path)["test_accuracy"] == 0.5
