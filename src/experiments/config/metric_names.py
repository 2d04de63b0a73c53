"""The names of the numbers a run measures, spelled here once: an epoch row's keys (metrics.jsonl,
the checkpoint's history), results.json's, TensorBoard's tags, and what trainer.monitor and
optimized_metric may name. Here, below every layer that reads them: the config's checks refuse
a name before any run starts.

A metric is measured on a split: `accuracy` on the validation split is `val_accuracy` in rows
and results.json, `val/accuracy` in TensorBoard. A task's metrics (`TaskMetrics`) say what it
measures on the validation and test splits, which way each is better (trainer.monitor_mode=auto
follows it), and which one its results lead with. A shipped task's class declares its own
(`experiments.training.tasks`), a task of one's own's config (`task.metrics`); which of them a
config's task measures is `config.task_metrics`' to say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from experiments.config.choices import Mode

# The splits a metric is measured on: the training split (its loss, as it trains), validation
# and test.
TRAIN, VAL, TEST = "train", "val", "test"


def metric_key(split: str, name: str) -> str:
    """A metric's key on `split` in an epoch row and results.json: val_accuracy."""
    return f"{split}_{name}"


def on_test(key: str | None) -> bool:
    """Whether `key` is a number of the test split (test_accuracy, final_test_rmse), which
    selects nothing, whatever the task."""
    return key is not None and key.startswith((f"{TEST}_", f"final_{TEST}_"))


@dataclass(frozen=True)
class Metric:
    """A number an evaluation measures: its `name`, which way is `better`, and whether it is a
    fraction that reads best as a `percent` (accuracy: 38.6%)."""

    name: str
    better: Mode  # max or min
    percent: bool = False

    def text(self, value: float) -> str:
        """The value as the console says it: 38.6%, 2.3031 (a loss), 0.8571."""
        return f"{100 * value:.1f}%" if self.percent else f"{value:.4f}"

    def key(self, split: str) -> str:
        """Its key on `split` in an epoch row and results.json: val_accuracy."""
        return metric_key(split, self.name)

    def tag(self, split: str) -> str:
        """Its TensorBoard tag on `split`, grouped by split: val/accuracy."""
        return f"{split}/{self.name}"


@dataclass(frozen=True)
class TaskMetrics:
    """What a task measures on the validation and test splits after each epoch, the one its
    results lead with first (the `headline`: results.json repeats it at the final epoch,
    `final_key`), its loss among them; and what its per-class numbers are the accuracy of
    ("accuracy", or what its task says)."""

    evaluated: tuple[Metric, ...]
    per_class: str = "accuracy"

    @property
    def headline(self) -> Metric:
        return self.evaluated[0]

    def metrics_on(self, split: str) -> dict[str, Metric]:
        """Its metrics on `split`, by their keys: {"val_accuracy": ACCURACY, "val_loss": LOSS}."""
        return {metric.key(split): metric for metric in self.evaluated}

    def better_ways(self) -> dict[str, str]:
        """Each metric's better way, its loss aside, as a config declares them: {"mae": "min"}."""
        return {metric.name: str(metric.better) for metric in self.evaluated if metric != LOSS}

    def final_key(self, split: str) -> str:
        """results.json's key of the headline on `split` at the final epoch, beside the selected
        epoch's: final_test_accuracy."""
        return f"final_{self.headline.key(split)}"

    def monitored(self) -> tuple[str, ...]:
        """What trainer.monitor may select on: its metrics on the validation split."""
        return tuple(self.metrics_on(VAL))

    def optimizable(self) -> tuple[str, ...]:
        """What a run may return to a sweeper."""
        return (*self.monitored(), TRAIN_LOSS, TRAIN_IMAGES_PER_SECOND)

    def on_test(self) -> tuple[str, ...]:
        """Its numbers on the test split, which select nothing."""
        return (*self.metrics_on(TEST), self.final_key(TEST))


# Every task's, measured after its own metrics.
LOSS = Metric("loss", Mode.min)
# What trainer.target_accuracy is a target of, and what runs of versions before the task group
# measured (their config has no task).
ACCURACY = Metric("accuracy", Mode.max, percent=True)
BEFORE_TASKS = TaskMetrics((ACCURACY, LOSS))


def declared(metrics: Mapping[str, Any], percent: frozenset[str] = frozenset()) -> TaskMetrics:
    """The metrics a task's config declares, {"mae": "min", ...} (the first leading), with its
    loss last; those named in `percent` read as a percent."""
    named = [
        Metric(str(name), Mode(str(better)), percent=name in percent)
        for name, better in metrics.items()
        if name != LOSS.name
    ]
    return TaskMetrics((*named, LOSS))


# The keys the code reads by name: a key per split and metric.
TRAIN_LOSS = LOSS.key(TRAIN)
VAL_LOSS = LOSS.key(VAL)
TEST_LOSS = LOSS.key(TEST)
# results.json's training speed (`records.speed`), a number a sweep may optimize too.
TRAIN_IMAGES_PER_SECOND = "train_images_per_second"
