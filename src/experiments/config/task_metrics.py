"""The metrics of a config's task, for the checks made before anything is built and for the
readers of a run's config (selection, resume, the report).

This layer sits below the tasks, so it asks a shipped task's class through its `_target_`
(`hydra.utils.get_class`: imported, never built) what it measures of data of so many classes;
only a target the project ships is asked (`trust.is_shipped`), so a name read from a file is
never imported here. A task of one's own's config declares its metrics (`task.metrics`).
"""

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
    """The class a `task` config node (or its plain data) builds, where the project ships it (a
    `training.tasks.Task`: its `measured`, `narrower`, `unmeasured` and `measures`); None for a
    task of one's own."""
    target = task.get("_target_") if isinstance(task, Mapping) else None
    if not isinstance(target, str) or not is_shipped(target, TASK):
        return None
    return get_class(target)


def declared_by(task: Any) -> dict[str, str] | None:
    """What a task's config declares it measures ({"mae": "min"}), or None."""
    metrics = task.get("metrics")
    if not isinstance(metrics, Mapping):
        return None
    return {str(name): str(way) for name, way in metrics.items()}


def metrics_of(config: Any) -> TaskMetrics | None:
    """What a run's task measures (`config`: the run's config): its class's of its dataset's
    classes, as far as the config gives them, or a task of one's own's config's declaration
    (None where it declares none: results.json holds those of older runs). A config from
    before the task group measured `BEFORE_TASKS`."""
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
    """The metrics read as a percent, whichever task declares one: those the shipped tasks'
    classes say are (an accuracy)."""
    return frozenset(
        metric.name
        for target in shipped_targets().get(TASK, ())
        for metric in get_class(target).measured.evaluated
        if metric.percent
    )


def _classes(config: Any) -> int | None:
    """The number of classes a run's config gives its dataset; None where it leaves it to the
    data, or has no dataset."""
    try:
        classes = (config.get("dataset") or {}).get("num_classes")
    except OmegaConfBaseException:  # (MISSING, or an interpolation the data fills in)
        return None
    return classes if isinstance(classes, int) else None
