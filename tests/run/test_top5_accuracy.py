"""Top-5 accuracy: measured by a classifier of 10 classes or more on the validation and test
splits, recorded with the other numbers (metrics.jsonl, results.json, TensorBoard, an
evaluation's results) and read back by the report, never selecting epochs unless
trainer.monitor names it; a task of fewer
classes has none, and cannot monitor it."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.config.metric_names import TEST
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.data import loading
from experiments.report.run_records import read_run
from experiments.run.setup import build_task
from experiments.training.selection import Monitor
from helpers import (
    QUICK,
    compose_config,
    eval_cli,
    metrics,
    read_events,
    results,
    trained_run,
)

TOP5 = ("val_top5_accuracy", "test_top5_accuracy")


def test_a_run_of_ten_classes_records_top5_accuracy_and_may_select_by_it(tmp_path: Path) -> None:
    run = trained_run(
        tmp_path,
        *QUICK,
        "model=lenet",
        "dataset.val_fraction=0.1",
        "trainer.monitor=val_top5_accuracy",
    )
    rows = metrics(run, "epoch")
    events = read_events(run)
    for row in rows:
        for split in ("val", "test"):
            top5, top1 = row[f"{split}_top5_accuracy"], row[f"{split}_accuracy"]
            assert top1 <= top5 <= 1
            logged = {event.step: event.value for event in events.Scalars(f"{split}/top5_accuracy")}
            assert logged[row["global_step"]] == pytest.approx(top5)
    recorded = results(run)
    assert recorded["selected_by"] == "val_top5_accuracy (max)"
    selected = rows[recorded["selected_epoch"] - 1]
    assert selected["val_top5_accuracy"] == max(row["val_top5_accuracy"] for row in rows)
    assert {key: recorded[key] for key in TOP5} == {key: selected[key] for key in TOP5}
    # The report reads it as the run measured it, selected by it.
    read = read_run(run)
    assert read.monitor is not None and read.monitor.metric == "val_top5_accuracy"
    assert "test_top5_accuracy" in read.measures.metrics_on(TEST)
    # Its checkpoint (the selected epoch's), evaluated, measures it too.
    (tmp_path / "eval").mkdir()
    evaluated = eval_cli(tmp_path / "eval", f"ckpt={run}", "device=cpu")
    assert evaluated.returncode == 0, evaluated.stderr
    assert results(evaluated.run_dir)["test_top5_accuracy"] == selected["test_top5_accuracy"]


def test_epochs_are_selected_by_accuracy_unless_the_monitor_says_otherwise() -> None:
    assert Monitor.from_config(compose_config()).metric == "val_accuracy"
    chosen = compose_config("trainer.monitor=val_top5_accuracy")
    validate(chosen)
    assert Monitor.from_config(chosen).metric == "val_top5_accuracy"


def test_a_task_of_two_classes_has_no_top5_accuracy() -> None:
    overrides = ("dataset=synthetic", "dataset.num_classes=2", "dataset.train_size=8")
    config = compose_config(*overrides)
    task = build_task(config.task, loading.load(config.dataset))
    assert [metric.name for metric in task.metrics.evaluated] == ["accuracy", "loss"]
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides, "trainer.monitor=val_top5_accuracy"))
    assert str(refused.value) == (
        "trainer.monitor=val_top5_accuracy is not a metric it can monitor (top-5 accuracy is "
        "measured among 10 classes or more; dataset synthetic has 2); choose val_accuracy or "
        "val_loss"
    )
