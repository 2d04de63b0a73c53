"""What a hyperparameter search optimizes (`optimized_metric`): a number a run reports, never a
test one. Checked on the command line, before a search's first trial, and in every run's
config."""

from __future__ import annotations

from experiments.config.metric_names import ON_TEST, TaskMetrics
from experiments.core.errors import ExperimentError

WHY_NOT_TEST = (
    "the test split would then no longer measure the model on images nothing was chosen by"
)


def check_optimized_metric(metric: str | None, measures: TaskMetrics | None) -> None:
    """What a run returns to a sweeper is a validation (or training) number, never a test one.
    (Also checked when a sweep starts, before its first trial.)"""
    refusal = unoptimizable(metric, measures)
    if refusal is not None:
        raise ExperimentError(refusal)


def unoptimizable(metric: str | None, measures: TaskMetrics | None) -> str | None:
    """The line that refuses to optimize `metric` of a task that measures `measures` (None: a
    task of one's own, not built yet), or None."""
    if measures is None:
        return None
    optimizable = measures.optimizable()
    if metric in ON_TEST or metric in measures.on_test():
        return (
            f"optimized_metric={metric} would choose hyperparameters on the test split: "
            f"{WHY_NOT_TEST}; optimize {', '.join(optimizable)}"
        )
    if metric is not None and metric not in optimizable:
        return (
            f"optimized_metric={metric} is not a metric a run reports; choose "
            f"{', '.join(optimizable)}"
        )
    return None
