"""What a search optimizes (`optimized_metric`): a number a run reports, never a test one."""

from __future__ import annotations

from experiments.config.metric_names import (
    TRAIN_IMAGES_PER_SECOND,
    TRAIN_LOSS,
    VAL,
    TaskMetrics,
    on_test,
)
from experiments.core.errors import ExperimentError

WHY_NOT_TEST = (
    "the test split would then no longer measure the model on images nothing was chosen by"
)


def check_optimized_metric(metric: str | None, measures: TaskMetrics | None) -> None:
    refusal = unoptimizable(metric, measures)
    if refusal is not None:
        raise ExperimentError(refusal)


def unoptimizable(metric: str | None, measures: TaskMetrics | None) -> str | None:
    """The line refusing to optimize `metric` (`measures` None: not known yet), or None."""
    optimizable = ", ".join(
        measures.optimizable()
        if measures
        else (f"{VAL}_<metric>", TRAIN_LOSS, TRAIN_IMAGES_PER_SECOND)
    )
    if on_test(metric):
        return (
            f"optimized_metric={metric} would choose hyperparameters on the test split: "
            f"{WHY_NOT_TEST}; optimize {optimizable}"
        )
    if measures is not None and metric is not None and metric not in measures.optimizable():
        return f"optimized_metric={metric} is not a metric a run reports; choose {optimizable}"
    return None
