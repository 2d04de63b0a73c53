"""The names of the numbers a run measures, spelled here once: an epoch row's keys (metrics.jsonl,
the checkpoint's history), results.json's, TensorBoard's tags, and what trainer.monitor and
optimized_metric may name. Here, below every layer that reads them: the config's checks refuse
a name before any run starts.

A metric is measured on a split: `accuracy` on the validation split is `val_accuracy` in rows
and results.json, `val/accuracy` in TensorBoard. A task's metrics (`TaskMetrics`) say what it
measures on the validation and test splits, which way each is better (trainer.monitor_mode=auto
follows it), and which one its results lead with, as the task's config declares them (its
schema's defaults in `config.schemas`, for a shipped task).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf.errors import OmegaConfBaseException

from experiments.config.choices import Mode
from experiments.config.schemas import (
    ClassificationTaskConfig,
    RegressionTaskConfig,
    SegmentationTaskConfig,
)

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


@dataclass(frozen=True)
class TaskMetrics:
    """What a task measures on the validation and test splits after each epoch, the one its
    results lead with first (the `headline`: results.json repeats it at the final epoch,
    `final_key`), its loss among them."""

    evaluated: tuple[Metric, ...]

    @property
    def headline(self) -> Metric:
        return self.evaluated[0]

    def named(self, name: str) -> Metric:
        return next(metric for metric in self.evaluated if metric.name == name)

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

    def among(self, classes: int | None) -> TaskMetrics:
        """What it measures of data of `classes` classes (None: not known yet): top-5 accuracy
        only among `TOP5_LEAST_CLASSES` or more, where five guesses leave most classes out (among
        five or fewer, every image is in them)."""
        if classes is not None and classes >= TOP5_LEAST_CLASSES:
            return self
        return TaskMetrics(tuple(metric for metric in self.evaluated if metric != TOP5_ACCURACY))

    def monitored(self) -> tuple[str, ...]:
        """What trainer.monitor may select on: its metrics on the validation split."""
        return tuple(self.on(VAL))

    def optimizable(self) -> tuple[str, ...]:
        """What a run may return to a sweeper."""
        return (*self.monitored(), TRAIN_LOSS, TRAIN_IMAGES_PER_SECOND)

    def on_test(self) -> tuple[str, ...]:
        """Its numbers on the test split, which select nothing."""
        return (*self.on(TEST), self.final_key(TEST))


# Every task's, measured after its own metrics.
LOSS = Metric("loss", Mode.min)
# The metrics that are a fraction of a split (of its images, of its pixels), said in percent.
PERCENT = frozenset({"accuracy", "top5_accuracy", "miou", "pixel_accuracy"})
# Top-5 accuracy (torchvision's reference and timm's train.py report it beside accuracy): the
# share of images whose class is among the model's `TOP_K` highest logits, measured with
# `TOP5_LEAST_CLASSES` classes or more.
TOP_K = 5
TOP5_ACCURACY = Metric("top5_accuracy", Mode.max, percent=True)
TOP5_LEAST_CLASSES = 10


def declared(metrics: Mapping[str, Any]) -> TaskMetrics:
    """The metrics a task's config declares, {"mae": "min", ...} (the first leading), with its
    loss last."""
    named = [
        Metric(str(name), Mode(str(better)), percent=name in PERCENT)
        for name, better in metrics.items()
        if name != LOSS.name
    ]
    return TaskMetrics((*named, LOSS))


# The shipped tasks' metrics by the task's name (`task=regression`), as their schemas declare
# them: for the checks made on the command line, before a config is composed, and for the
# records of runs whose config is older than the declaration.
SHIPPED_TASKS = (ClassificationTaskConfig, RegressionTaskConfig, SegmentationTaskConfig)
TASK_METRICS = {task.name: declared(task().metrics) for task in SHIPPED_TASKS}
CLASSIFICATION_TASK = ClassificationTaskConfig.name  # the default
CLASSIFICATION = TASK_METRICS[CLASSIFICATION_TASK]
REGRESSION = TASK_METRICS[RegressionTaskConfig.name]
SEGMENTATION = TASK_METRICS[SegmentationTaskConfig.name]
# The metrics the code reads by name.
ACCURACY = CLASSIFICATION.named("accuracy")
# A classifier's without top-5 accuracy: what runs of versions before it measured.
CLASSIFICATION_BEFORE_TOP5 = CLASSIFICATION.among(None)
RMSE, MAE, R2 = (REGRESSION.named(name) for name in ("rmse", "mae", "r2"))
MIOU, PIXEL_ACCURACY = (SEGMENTATION.named(name) for name in ("miou", "pixel_accuracy"))


def metrics_of(config: Any) -> TaskMetrics | None:
    """The metrics of a run's task as its config declares them (`config`: the run's config), of
    its dataset's classes (`TaskMetrics.among`: a classifier's top-5 accuracy only among 10 or
    more, as its config gives them). A config from before the task group was a classifier's;
    one from before tasks declared their metrics has a shipped task's by its name, and a task
    of one's own's in results.json (None here)."""
    task = config.get("task")
    if not task:
        return CLASSIFICATION_BEFORE_TOP5
    if metrics := task.get("metrics"):
        measures = declared(metrics)
    else:
        measures = TASK_METRICS.get(task["name"])
    if task["name"] == CLASSIFICATION_TASK and measures is not None:
        return measures.among(_classes(config))
    return measures


def _classes(config: Any) -> int | None:
    """The number of classes a run's config gives its dataset; None where it leaves it to the
    data, or has no dataset."""
    try:
        classes = (config.get("dataset") or {}).get("num_classes")
    except OmegaConfBaseException:  # (MISSING, or an interpolation the data fills in)
        return None
    return classes if isinstance(classes, int) else None


# The keys the classification code reads by name: a key per split and metric.
TRAIN_LOSS = LOSS.key(TRAIN)
VAL_LOSS = LOSS.key(VAL)
TEST_LOSS, TEST_ACCURACY = LOSS.key(TEST), ACCURACY.key(TEST)
# results.json's training speed (`records.speed`), a number a sweep may optimize too.
TRAIN_IMAGES_PER_SECOND = "train_images_per_second"

# What no task's trainer.monitor or optimized_metric may name: a test number.
ON_TEST = {key for measures in TASK_METRICS.values() for key in measures.on_test()}
