"""validate's table of checks: a field out of its range is refused in one line, NaN (which
compares as neither below nor above a bound) said to be not a number, an infinity infinite."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf

from experiments.config.training_checks import beyond_float32
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from helpers import assert_field_refused, compose_config


@pytest.mark.parametrize(
    ("overrides", "key", "said"),
    [
        (["trainer.early_stopping.min_delta=nan"], "trainer.early_stopping.min_delta", "nan"),
        (
            ["dataset=image_folder", "dataset.root=/data", "dataset.cache_max_gb=nan"],
            "dataset.cache_max_gb",
            "nan",
        ),
        (["dataset=csv", "dataset.test_fraction=nan"], "dataset.test_fraction", "nan"),
        (["scheduler.warmup_epochs=nan"], "scheduler.warmup_epochs", "nan"),
        (["trainer.early_stopping.min_delta=-inf"], "trainer.early_stopping.min_delta", "-inf"),
        (["optimizer.lr=inf"], "optimizer.lr", "inf"),
        (
            ["trainer.target_metric=accuracy", "trainer.target_value=nan"],
            "trainer.target_value",
            "nan",
        ),
        # A timeout of inf would wait for ever (threading's waits refuse it: OverflowError).
        (["device.timeout=inf"], "device.timeout", "inf"),
        (
            ["dataset=image_folder", "dataset.root=/data", "dataset.cache_timeout=inf"],
            "dataset.cache_timeout",
            "inf",
        ),
        (["tracker=mlflow", "tracker.mlflow.timeout=inf"], "tracker.mlflow.timeout", "inf"),
    ],
)
def test_nan_and_infinities_are_refused_as_such_where_a_bound_is(
    overrides: list[str], key: str, said: str
) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    told = str(refused.value)
    assert_field_refused(told, key, said)
    unbounded = "is not a number" if said == "nan" else "is infinite"
    assert told.startswith(f"{key}={said} {unbounded}: it must be "), told


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        # A field of the schedule's that only float32's bound holds.
        (
            ["scheduler=step", "scheduler.gamma=nan"],
            "scheduler.gamma=nan is not a number; give a finite number",
        ),
        (
            ["scheduler=onecycle", "scheduler.max_lr=-inf"],
            "scheduler.max_lr=-inf is infinite; give a finite number",
        ),
    ],
)
def test_a_schedules_number_without_a_rule_is_held_to_float32(
    overrides: list[str], line: str
) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert str(refused.value) == line


@pytest.mark.parametrize(
    ("number", "said"),
    [
        (math.nan, "holds nan, which is not a number; give finite numbers"),
        (-math.inf, "holds -inf, which is infinite; give finite numbers"),
        (1e39, "is beyond float32, which the optimizer's step computes in (at most 3.403e+38)"),
    ],
)
def test_a_list_of_a_schedule_of_ones_own_is_checked_number_by_number(
    number: float, said: str
) -> None:
    # (A schedule's YAML of one's own, without a schema, may hold any list.)
    cfg = OmegaConf.create({"scheduler": {"name": "mine", "points": [0.5, number]}})
    assert beyond_float32(cfg, "scheduler").startswith(f"scheduler.points=[0.5, {number}] {said}")


@pytest.mark.parametrize(
    ("overrides", "key", "typed"),
    [
        (["optimizer=rmsprop", "optimizer.momentum=-1"], "optimizer.momentum", "-1.0"),
        (["optimizer=sgd_momentum", "optimizer.momentum=1"], "optimizer.momentum", "1.0"),
        (["optimizer=rmsprop", "optimizer.alpha=1.5"], "optimizer.alpha", "1.5"),
        (["optimizer=rmsprop", "optimizer.eps=0"], "optimizer.eps", "0.0"),
        (["optimizer=adam", "optimizer.betas=[0.9,1]"], "optimizer.betas", "[0.9, 1.0]"),
        (["optimizer=adam", "optimizer.betas=[0.9]"], "optimizer.betas", "[0.9]"),
        (
            ["optimizer=adamw", "optimizer.betas=[-0.1,0.999,0.5]"],
            "optimizer.betas",
            "[-0.1, 0.999, 0.5]",
        ),
    ],
)
def test_an_optimizers_fields_torch_would_refuse_are_refused_naming_the_key(
    overrides: list[str], key: str, typed: str
) -> None:
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config(*overrides))
    assert_field_refused(str(refused.value), key, typed)


def test_a_field_the_config_lacks_is_not_checked() -> None:
    # The cache's fields are those of data of one's own; the one-cycle schedule's pct_start is
    # not the step schedule's.
    validate(compose_config("dataset=cifar10", "scheduler=step"))
    with pytest.raises(ExperimentError, match=r"^scheduler.pct_start=1.0 must be in \(0, 1\)"):
        validate(compose_config("scheduler=onecycle", "scheduler.pct_start=1.0"))


def test_a_shipped_tasks_metrics_are_its_classs() -> None:
    # What a shipped task measures is declared once, by its class; its config declares none.
    validate(compose_config("task=regression", "dataset=csv", "model=mlp"))
    with pytest.raises(ExperimentError) as refused:
        validate(compose_config("task.metrics={accuracy: min}"))
    assert str(refused.value) == (
        "task.metrics={accuracy: min} is not what task=classification "
        "measures: accuracy: max, top5_accuracy: max"
    )
    with pytest.raises(ExperimentError, match="is not what task=regression measures: rmse: min"):
        validate(compose_config("task=regression", "task.metrics={rmse: min}"))
    # Top-5 accuracy may be left out (as runs from before it measured none).
    validate(compose_config("task.metrics={accuracy: max}"))
    validate(compose_config("task.metrics={accuracy: max, top5_accuracy: max}"))


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
