"""The names of the numbers a run measures, spelled here once, below every layer that reads them:
`accuracy` on the validation split is `val_accuracy` in rows, `val/accuracy` in TensorBoard."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from experiments.config.choices import Mode

TRAIN, VAL, TEST = "train", "val", "test"


def metric_key(split: str, name: str) -> str:
    return f"{split}_{name}"


def on_test(key: str | None) -> bool:
    """Whether `key` is a number of the test split (final_test_rmse), which selects nothing."""
    return key is not None and key.startswith((f"{TEST}_", f"final_{TEST}_"))


@dataclass(frozen=True)
class Metric:
    """A number an evaluation measures, which way is `better`, and whether it reads as a percent."""

    name: str
    better: Mode  # max or min
    percent: bool = False

    def text(self, value: float) -> str:
        """The value as the console says it: 38.6%, 2.3031 (a loss), 0.8571."""
        return f"{100 * value:.1f}%" if self.percent else f"{value:.4f}"

    def key(self, split: str) -> str:
        return metric_key(split, self.name)

    def tag(self, split: str) -> str:
        return f"{split}/{self.name}"


@dataclass(frozen=True)
class TaskMetrics:
    """What a task measures on val and test, its `headline` first and its loss among them."""

    evaluated: tuple[Metric, ...]
    per_class: str = "accuracy"

    @property
    def headline(self) -> Metric:
        return self.evaluated[0]

    def metrics_on(self, split: str) -> dict[str, Metric]:
        """By key: {"val_accuracy": ACCURACY, "val_loss": LOSS}."""
        return {metric.key(split): metric for metric in self.evaluated}

    def better_ways(self) -> dict[str, str]:
        """As a config declares them, its loss aside: {"mae": "min"}."""
        return {metric.name: str(metric.better) for metric in self.evaluated if metric != LOSS}

    def final_key(self, split: str) -> str:
        """results.json's key of the headline at the final epoch: final_test_accuracy."""
        return f"final_{self.headline.key(split)}"

    def monitored(self) -> tuple[str, ...]:
        """What trainer.monitor may select on."""
        return tuple(self.metrics_on(VAL))

    def optimizable(self) -> tuple[str, ...]:
        return (*self.monitored(), TRAIN_LOSS, TRAIN_IMAGES_PER_SECOND)

    def on_test(self) -> tuple[str, ...]:
        return (*self.metrics_on(TEST), self.final_key(TEST))


LOSS = Metric("loss", Mode.min)
ACCURACY = Metric("accuracy", Mode.max, percent=True)
BEFORE_TASKS = TaskMetrics((ACCURACY, LOSS))  # what versions before the task group measured


def declared(metrics: Mapping[str, Any], percent: frozenset[str] = frozenset()) -> TaskMetrics:
    """The metrics a task's config declares ({"mae": "min"}, the first leading), its loss last."""
    named = [
        Metric(str(name), Mode(str(better)), percent=name in percent)
        for name, better in metrics.items()
        if name != LOSS.name
    ]
    return TaskMetrics((*named, LOSS))


TRAIN_LOSS = LOSS.key(TRAIN)
VAL_LOSS = LOSS.key(VAL)
TEST_LOSS = LOSS.key(TEST)
TRAIN_IMAGES_PER_SECOND = "train_images_per_second"  # results.json's speed (`records.speed`)
