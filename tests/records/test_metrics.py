"""metrics.jsonl as a killed run leaves it: a torn last line is the row it was writing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.core.errors import ExperimentError
from experiments.records.metrics import MetricsWriter
from experiments.report.run_records import epochs


def _rows(*rows: dict[str, object]) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


EPOCH_1 = {"kind": "epoch", "epoch": 1, "global_step": 4, "test_accuracy": 0.5}
HISTORY = [{key: value for key, value in EPOCH_1.items() if key != "kind"}]
STEP_2 = {"kind": "step", "epoch": 2, "step": 1, "train_loss": 2.0}


def test_a_torn_last_line_is_dropped_on_resume_and_in_the_report(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    # SIGKILLed mid-write: the row of epoch 2's second step stopped part-way.
    path.write_text(_rows(EPOCH_1, STEP_2) + '{"kind": "step", "epo')
    assert epochs(tmp_path) == [EPOCH_1]
    with MetricsWriter(tmp_path, writes=True) as metrics_writer:
        metrics_writer.resume_after(1, steps_per_epoch=4, history=HISTORY)
    assert path.read_text() == _rows(EPOCH_1)


def test_a_damaged_line_before_the_last_is_named(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(_rows(EPOCH_1) + "not json\n" + _rows(STEP_2))
    with (
        pytest.raises(ExperimentError) as error,
        MetricsWriter(tmp_path, writes=True) as metrics_writer,
    ):
        metrics_writer.resume_after(1, steps_per_epoch=4, history=HISTORY)
    assert str(error.value) == (
        f"{path} line 2 is not a JSON row (Expecting value); each line holds one, and only "
        "the last may be cut short (by a killed run)"
    )
