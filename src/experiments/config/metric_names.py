"""The names of the numbers a run measures, spelled here once: an epoch row's keys (metrics.jsonl,
the checkpoint's history), results.json's, TensorBoard's tags, and what trainer.monitor and
optimized_metric may name. Here, below every layer that reads them: the config's checks refuse
a name before any run starts.

A metric is measured on a split: `accuracy` on the validation split is `val_accuracy` in rows
and results.json, `val/accuracy` in TensorBoard. A task's metrics (`TaskMetrics`) say what it
measures on the validation and test splits, which way each is better (trainer.monitor_mode=auto
follows it), and which one its results lead with: image classification's (`CLASSIFICATION`),
regression's (`REGRESSION`) and segmentation's (`SEGMENTATION`).
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


LOSS = Metric("loss", Mode.min)
ACCURACY = Metric("accuracy", Mode.max, percent=True)


@dataclass(frozen=True)
class TaskMetrics:
    """What a task measures on the validation and test splits after each epoch, the one its
    results lead with first (the `headline`: results.json repeats it at the final epoch,
    `final_key`), its loss among them."""

    evaluated: tuple[Metric, ...]

    @property
    def headline(self) -> Metric:
        return self.evaluated[0]

    def on(self, split: str) -> dict[str, Metric]:
        """Its metrics on `split`, by their keys: {"val_accuracy": ACCURACY, "val_loss": LOSS}."""
        return {metric.key(split): metric for metric in self.evaluated}

    def final_key(self, split: str) -> str:
        """results.json's key of the headline on `split` at the final epoch, beside the selected
        epoch's: final_test_accuracy."""
        return f"final_{self.headline.key(split)}"

    @property
    def per_class(self) -> str:
        """What its per-class numbers are the accuracy of: "accuracy", "pixel accuracy"."""
        return "pixel accuracy" if PIXEL_ACCURACY in self.evaluated else "accuracy"

    def monitored(self) -> tuple[str, ...]:
        """What trainer.monitor may select on: its metrics on the validation split."""
        return tuple(self.on(VAL))

    def optimizable(self) -> tuple[str, ...]:
        """What a run may return to a sweeper."""
        return (*self.monitored(), TRAIN_LOSS, TRAIN_IMAGES_PER_SECOND)

    def on_test(self) -> tuple[str, ...]:
        """Its numbers on the test split, which select nothing."""
        return (*self.on(TEST), self.final_key(TEST))


CLASSIFICATION = TaskMetrics((ACCURACY, LOSS))
# In the target's own units (RMSE, MAE); R² the share of its variance explained. The loss is the
# mean squared error of the standardized target (`training.tasks.Regression`).
RMSE, MAE, R2 = Metric("rmse", Mode.min), Metric("mae", Mode.min), Metric("r2", Mode.max)
REGRESSION = TaskMetrics((RMSE, MAE, R2, LOSS))
# Over every pixel of a split: the mean over classes of intersection over union (of the classes
# present in the masks or the predictions), and the share of pixels labelled right.
MIOU = Metric("miou", Mode.max, percent=True)
PIXEL_ACCURACY = Metric("pixel_accuracy", Mode.max, percent=True)
SEGMENTATION = TaskMetrics((MIOU, PIXEL_ACCURACY, LOSS))
# The shipped tasks' metrics, by the task's name (`task=regression`), for the checks made before
# a task is built.
CLASSIFICATION_TASK = "classification"  # the default
TASK_METRICS = {
    CLASSIFICATION_TASK: CLASSIFICATION,
    "regression": REGRESSION,
    "segmentation": SEGMENTATION,
}


def declared(metrics: Mapping[str, str]) -> TaskMetrics:
    """The metrics a task of one's own declares, {"mae": "min", ...} (the first leading), with
    its loss last."""
    named = [Metric(name, Mode(better)) for name, better in metrics.items() if name != LOSS.name]
    return TaskMetrics((*named, LOSS))


def metrics_of(config: Any) -> TaskMetrics | None:
    """The metrics of a run's task (`config`: the run's config; one from before the task group
    has none, and was a classifier's); a task of one's own's once the run has built it and
    written them into its config (None before)."""
    task = config.get("task")
    if not task:
        return CLASSIFICATION
    if task["name"] in TASK_METRICS:
        return TASK_METRICS[task["name"]]
    own = task.get("metrics")
    return declared(own) if own else None


# The keys the classification code reads by name: a key per split and metric.
TRAIN_LOSS = LOSS.key(TRAIN)
VAL_LOSS = LOSS.key(VAL)
TEST_LOSS, TEST_ACCURACY = LOSS.key(TEST), ACCURACY.key(TEST)
# results.json's training speed (`records.speed`), a number a sweep may optimize too.
TRAIN_IMAGES_PER_SECOND = "train_images_per_second"

# What no task's trainer.monitor or optimized_metric may name: a test number.
ON_TEST = {key for measures in TASK_METRICS.values() for key in measures.on_test()}
