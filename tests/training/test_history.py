"""The types of a run's rows (`training.history.EpochRow`, `records.recorded.finish_record`) against
the rows a run writes and those an old run wrote, and the metric names that key them
(`config.metric_names`): in metrics.jsonl, in TensorBoard, and in what selection decides by."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from experiments.config.metric_names import TEST, VAL
from experiments.config.task_metrics import metrics_of
from experiments.core.typed import mismatch
from experiments.records import checkpoints
from experiments.records.csv_file import CsvFile
from experiments.records.metrics import MetricsWriter
from experiments.records.recorded import finish_record, task_numbers
from experiments.records.results import training_summary
from experiments.records.tensorboard import TensorBoard
from experiments.report.run_records import epochs
from experiments.training.history import EpochRow, validated
from experiments.training.loop import EvaluationResult, TrainingResult
from experiments.training.selection import Monitor
from experiments.training.tasks import Classification, Regression

CLASSES = ["cat", "dog"]
# What a classifier measures of two classes: no top-5 accuracy.
MEASURED = Classification.measures(None, len(CLASSES))
EVERY_KEY = EpochRow.__required_keys__ | EpochRow.__optional_keys__


def _evaluation(loss: float, accuracy: float) -> EvaluationResult:
    return EvaluationResult(loss, {"accuracy": accuracy}, 0.25, [[1, 0], [1, 0]], [accuracy, None])


def _training() -> TrainingResult:
    return TrainingResult(
        loss=2.25,
        images=256,
        seconds=0.5,
        wait_seconds=0.125,
        copy_seconds=0.0,
        compute_seconds=0.25,
        lr=0.01,
        warm_up=[(64, 0.25)],
    )


@pytest.mark.parametrize("validation", [True, False], ids=["validation", "none"])
def test_an_epoch_row_is_an_epoch_row_and_each_tracker_holds_its_metrics(
    tmp_path: Path, validation: bool
) -> None:
    val = _evaluation(2.0, 0.5) if validation else None
    trackers = {"tensorboard": TensorBoard(tmp_path), "csv": CsvFile(tmp_path)}
    with MetricsWriter(tmp_path, writes=True, trackers=trackers) as metrics_writer:
        row = metrics_writer.epoch(1, 4, _training(), _evaluation(2.125, 0.375), val, CLASSES)
    assert EpochRow.__required_keys__ <= row.keys() <= EVERY_KEY
    assert validated([row]) is validation
    (written,) = epochs(tmp_path)  # metrics.jsonl's row: the same, with its kind and time
    assert written == {"kind": "epoch", **row, "time": written["time"]}
    splits = (VAL, TEST) if validation else (TEST,)
    logged = {
        metric.tag(split): row[metric.key(split)]
        for split in splits
        for metric in MEASURED.evaluated
    }
    assert logged == {
        "test/accuracy": 0.375,
        "test/loss": 2.125,
        **({"val/accuracy": 0.5, "val/loss": 2.0} if validation else {}),
    }
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    assert set(events.Tags()["scalars"]) == {*logged, "perf/images_per_second"}
    assert {tag: events.Scalars(tag)[0].value for tag in logged} == logged
    with (tmp_path / "metrics.csv").open(newline="") as file:
        (csv_row,) = csv.DictReader(file)
    assert csv_row.keys() == {"step", *logged, "perf/images_per_second"}
    assert {tag: float(csv_row[tag]) for tag in logged} == logged


def test_a_summary_has_the_keys_its_type_declares(tmp_path: Path) -> None:
    with MetricsWriter(tmp_path, writes=False) as metrics_writer:
        history = [
            metrics_writer.epoch(
                epoch, 4 * epoch, _training(), _evaluation(2.0, 0.25), val, CLASSES
            )
            for epoch, val in [(1, _evaluation(1.5, 0.5)), (2, _evaluation(1.75, 0.25))]
        ]
    monitor = Monitor.from_config(trained_with({"monitor": "val_loss", "monitor_mode": "auto"}))
    summary = training_summary(history, monitor, MEASURED)
    finished = finish_record(MEASURED)
    assert mismatch(summary, finished, "summary") is None
    assert summary.keys() <= finished.__optional_keys__
    assert task_numbers(MEASURED).__required_keys__ <= summary.keys()
    # val_loss is better low: epoch 1 is selected, the final epoch's accuracy beside it.
    assert (summary["selected_epoch"], summary["selected_by"]) == (1, "val_loss (min)")
    assert (summary["val_accuracy"], summary["final_val_accuracy"]) == (0.5, 0.25)


def trained_with(trainer: dict[str, str | None], task: str | None = None) -> DictConfig:
    """A run's config as a monitor reads it: its trainer, and its task, a shipped one's option
    (a run of a version before the task group has none)."""
    target = f"experiments.training.tasks.{(task or '').title()}"
    return OmegaConf.create(
        {"trainer": trainer, **({"task": {"name": task, "_target_": target}} if task else {})}
    )


def test_the_monitor_is_better_the_way_its_metric_is() -> None:
    modes = {
        key: Monitor.from_config(trained_with({"monitor": key, "monitor_mode": "auto"})).mode
        for key in MEASURED.metrics_on(VAL)
    }
    assert modes == {"val_accuracy": "max", "val_loss": "min"}
    modes = {
        key: Monitor.from_config(
            trained_with({"monitor": key, "monitor_mode": "auto"}, "regression")
        ).mode
        for key in Regression.measured.metrics_on(VAL)
    }
    assert modes == {"val_rmse": "min", "val_mae": "min", "val_r2": "max", "val_loss": "min"}


def test_by_default_the_monitor_is_the_tasks_first_metric_on_validation() -> None:
    default = {"monitor": None, "monitor_mode": "auto"}
    assert str(Monitor.from_config(trained_with(default, "classification"))) == "val_accuracy (max)"
    assert str(Monitor.from_config(trained_with(default, "regression"))) == "val_rmse (min)"
    assert str(Monitor.from_config(trained_with(default))) == "val_accuracy (max)"


def test_an_old_runs_rows_load_and_sum_up_to_its_recorded_numbers(old_run: Path) -> None:
    """The run folder of tests/records/test_old_runs.py, whose rows have no warm-up or host load:
    its checkpoint's history and metrics.jsonl are epoch rows, and summed up again they give the
    numbers its results.json recorded."""
    history = checkpoints.load(old_run / checkpoints.LAST)["history"]
    for row in [*history, *epochs(old_run)]:
        assert EpochRow.__required_keys__ <= row.keys() <= EVERY_KEY | {"kind", "time"}
    recorded = json.loads((old_run / "results.json").read_text())
    config = OmegaConf.load(old_run / ".hydra" / "config.yaml")
    measures = metrics_of(config)
    assert measures is not None
    summary = training_summary(history, Monitor.from_config(config), measures)
    kept = {key: value for key, value in summary.items() if key in recorded}
    assert {"val_accuracy", "test_accuracy", "final_test_accuracy", "train_loss"} <= kept.keys()
    assert kept == {key: recorded[key] for key in kept}
