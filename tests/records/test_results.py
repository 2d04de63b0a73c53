"""results.json through a job's life (records.results): what a phase learns is written once."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.records.results import Results


def recorded(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_what_a_phase_learns_is_written_once_at_its_end(tmp_path: Path) -> None:
    with Results(tmp_path, {}) as results:
        assert recorded(tmp_path)["status"] == "running"
        with results.phase():
            results.add(device={"used": "cpu"})
            results.add(channels_last=False)
            assert "device" not in recorded(tmp_path)  # not yet
        assert recorded(tmp_path)["device"] == {"used": "cpu"}
        assert recorded(tmp_path)["channels_last"] is False
        results.add(epochs_completed=1)  # outside a phase: at once
        assert recorded(tmp_path)["epochs_completed"] == 1


def test_a_failure_within_a_phase_is_recorded_with_what_it_had_learned(tmp_path: Path) -> None:
    with pytest.raises(ExperimentError), Results(tmp_path, {}) as results, results.phase():
        results.add(device={"used": "cpu"})
        raise ExperimentError("data.root=nowhere: no such folder")
    record = recorded(tmp_path)
    assert (record["status"], record["reason"]) == ("failed", "data.root=nowhere: no such folder")
    assert record["device"] == {"used": "cpu"}


def test_numbers_that_are_not_finite_are_written_as_null_in_strict_json(tmp_path: Path) -> None:
    """json.dumps writes NaN and Infinity by default, which strict JSON readers refuse."""
    with Results(tmp_path, {}) as results:
        results.finish("completed", None, test_r2=math.nan, epoch_seconds=[1.5, math.inf])

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is no JSON")

    record = json.loads((tmp_path / "results.json").read_text(), parse_constant=refuse)
    assert (record["test_r2"], record["epoch_seconds"]) == (None, [1.5, None])
