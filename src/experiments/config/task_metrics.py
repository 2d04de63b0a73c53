"""The metrics of a config's task: a shipped task's class, imported by its `_target_` (never an
unshipped one read from a file), or a task of one's own's `task.metrics`."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from hydra.utils import get_class
from omegaconf.errors import OmegaConfBaseException

from experiments.config.metric_names import BEFORE_TASKS, TaskMetrics, declared
from experiments.config.trust import is_shipped, shipped_targets

TASK = "task"


def task_class(task: Any) -> Any:
    """The shipped `training.tasks.Task` class a `task` config builds; None for one's own."""
    target = task.get("_target_") if isinstance(task, Mapping) else None
    if not isinstance(target, str) or not is_shipped(target, TASK):
        return None
    return get_class(target)


def declared_by(task: Any) -> dict[str, str] | None:
    metrics = task.get("metrics")
    if not isinstance(metrics, Mapping):
        return None
    return {str(name): str(way) for name, way in metrics.items()}


def metrics_of(config: Any) -> TaskMetrics | None:
    """Its class's for its dataset's classes, or one's own task's (None: in results.json)."""
    task = config.get(TASK)
    if not task:
        return BEFORE_TASKS
    shipped = task_class(task)
    if shipped is not None:
        return shipped.measures(declared_by(task), _classes(config))
    own = declared_by(task)
    return declared(own, percent_names()) if own else None


@cache
def percent_names() -> frozenset[str]:
    """The metrics the shipped tasks' classes read as a percent, whichever task declares one."""
    return frozenset(
        metric.name
        for target in shipped_targets().get(TASK, ())
        for metric in get_class(target).measured.evaluated
        if metric.percent
    )


def _classes(config: Any) -> int | None:
    try:
        classes = (config.get("dataset") or {}).get("num_classes")
    except OmegaConfBaseException:  # (MISSING, or an interpolation the data fills in)
        return None
    return classes if isinstance(classes, int) else None
