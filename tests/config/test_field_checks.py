"""validate's table of checks: a field out of its range is refused in one line, NaN included
(which compares as neither below nor above a bound)."""

from __future__ import annotations

import pytest

from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from helpers import compose_config


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            ["trainer.early_stopping.min_delta=nan"],
            "trainer.early_stopping.min_delta=nan must be >= 0",
        ),
        (
            ["dataset=image_folder", "dataset.root=/data", "dataset.cache_max_gb=nan"],
            "dataset.cache_max_gb=nan must be >= 0",
        ),
        (
            ["dataset=csv", "dataset.test_fraction=nan"],
            "dataset.test_fraction=nan must be a number between 0 and 1: the share of the rows "
            "drawn for the test split",
        ),
    ],
)
def test_nan_is_refused_where_a_bound_is(overrides: list[str], line: str) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert str(refused.value) == line


@pytest.mark.slow
def test_a_field_the_config_lacks_is_not_checked() -> None:
    # The cache's fields are those of data of one's own; the one-cycle schedule's pct_start is
    # not the step schedule's.
    validate(compose_config("dataset=cifar10", "scheduler=step"))
    with pytest.raises(ExperimentError, match=r"^scheduler.pct_start=1.0 must be in \(0, 1\)$"):
        validate(compose_config("scheduler=onecycle", "scheduler.pct_start=1.0"))


def test_a_shipped_tasks_metrics_are_its_schemas() -> None:
    # What a task measures is declared once, in its config; its class computes those.
    validate(compose_config("task=regression", "dataset=csv", "model=mlp"))
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config("task.metrics.accuracy=min"))
    assert str(refused.value) == (
        "task.metrics={accuracy: min, top5_accuracy: max} is not what task=classification "
        "measures: accuracy: max, top5_accuracy: max"
    )
    # Top-5 accuracy may be left out (as runs from before it measured none).
    validate(compose_config("~task.metrics.top5_accuracy"))


@pytest.mark.parametrize(
    ("metrics", "line"),
    [
        (
            [],
            "task=custom declares no metrics: give each one's better way, the first leading, "
            "task.metrics='{mae: min, r2: max}', and its class a method of each name "
            "(docs/tasks.md)",
        ),
        (
            ["task.metrics=mae"],
            "task.metrics=mae must give each metric's better way: "
            "task.metrics='{mae: min, r2: max}'",
        ),
        (["task.metrics={mae: lowest}"], "task.metrics.mae=lowest: a metric's way is max or min"),
    ],
)
def test_a_task_of_ones_own_declares_its_metrics_each_max_or_min(
    metrics: list[str], line: str
) -> None:
    cfg = compose_config("task=custom", "task._target_=my_tasks.Task", *metrics)
    with pytest.raises(ExperimentError) as refused:
        validate(cfg)
    assert str(refused.value) == line
    validate(
        compose_config("task=custom", "task._target_=my_tasks.Task", "task.metrics={mae: min}")
    )
