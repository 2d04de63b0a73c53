"""Time to a target (trainer.target_value; trainer.target_accuracy): the training seconds,
compilation included, until a metric of the validation (or test) split first reached a target."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from omegaconf import DictConfig

from experiments.config.choices import Mode
from experiments.config.metric_names import ACCURACY, Metric, TaskMetrics
from experiments.training.history import EpochRow


class _Target(TypedDict):
    target: float
    split: str  # "val" or "test"
    epoch: int | None  # None: not reached
    seconds: float | None


class TimeToAccuracy(_Target, total=False):
    """results.json's `time_to_accuracy` (older runs' lack `metric`, meaning accuracy)."""

    includes_compile_seconds: bool
    metric: str
    better: str  # max or min: reached at or above the target, or at or below


def target(trainer: DictConfig, measures: TaskMetrics) -> tuple[Metric, float] | None:
    """The metric of the task (`measures`) a run times itself to, and the value (None: none)."""
    if trainer.target_accuracy is not None:
        return ACCURACY, trainer.target_accuracy
    if trainer.target_value is None:
        return None
    named = {metric.name: metric for metric in measures.evaluated}
    return named.get(trainer.target_metric, measures.headline), trainer.target_value


def reached(
    history: Sequence[EpochRow],
    goal: float,
    split: str,
    compiled: bool = False,
    metric: Metric = ACCURACY,
) -> TimeToAccuracy:
    """The first epoch that reached `goal`, and the training seconds until its end (None: none)."""
    epoch, seconds, total = None, None, 0.0
    for row in history:
        total += row["train_seconds"]
        value = row[metric.key(split)]
        if value >= goal if metric.better == Mode.max else value <= goal:
            epoch, seconds = row["epoch"], total
            break
    return TimeToAccuracy(
        target=goal,
        split=split,
        epoch=epoch,
        seconds=seconds,
        includes_compile_seconds=compiled,
        metric=metric.name,
        better=str(metric.better),
    )


def goal_text(goal: float, split: str, metric: str, better: str = "max") -> str:
    """ "50% val accuracy", "val rmse <= 60" (a metric `better` low), "val r2 >= 0.4"."""
    if metric == ACCURACY.name:
        return f"{100 * goal:g}% {split} accuracy"
    return f"{split} {metric} {'<=' if better == Mode.min else '>='} {goal:g}"


def text(record: TimeToAccuracy) -> str:
    """ "50% val accuracy after 12.3 s of training (epoch 3)", or "... not reached"."""
    metric, better = record.get("metric", ACCURACY.name), record.get("better", "max")
    goal = goal_text(record["target"], record["split"], metric, better)
    if record["seconds"] is None:
        return f"{goal} not reached"
    compiled = ", compilation included" if record.get("includes_compile_seconds") else ""
    return f"{goal} after {record['seconds']:.1f} s of training{compiled} (epoch {record['epoch']})"
