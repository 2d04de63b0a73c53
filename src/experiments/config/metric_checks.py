"""What selects a run's epochs and hyperparameters, and what it measures, checked against the
task's metrics before anything is built: a monitor or target the task has, never a test metric,
and a task of one's own that declares each metric's better way (`config.validate`'s checks)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from experiments.config.choices import Mode
from experiments.config.metric_names import LOSS, VAL, on_test
from experiments.config.optimized import WHY_NOT_TEST, unoptimizable
from experiments.config.store import default_option
from experiments.config.task_metrics import declared_by, metrics_of, task_class


def task_metrics_not_declared(cfg: DictConfig) -> str | None:
    """A task of one's own declares its metrics, each max or min; a shipped task's are its
    class's, which says what else its config may declare."""
    task = cfg.task
    example = "task.metrics='{mae: min, r2: max}'"
    if task.get("metrics") is not None and not isinstance(task.metrics, DictConfig):
        return f"task.metrics={task.metrics} must give each metric's better way: {example}"
    given = declared_by(task) or {}
    given.pop(LOSS.name, None)  # (measured last, whether named or not)
    shipped = task_class(task)
    if shipped is not None:
        if not given or given in [m.ways() for m in (shipped.measured, *shipped.narrower)]:
            return None
        measured = ways(shipped.measured.ways())
        return f"task.metrics={{{ways(given)}}} is not what task={task.name} measures: {measured}"
    if not given:
        return (
            f"task={task.name} declares no metrics: give each one's better way, the first "
            f"leading, {example}, and its class a method of each name (docs/tasks.md)"
        )
    wrong = [f"task.metrics.{name}={way}" for name, way in given.items() if way not in WAYS]
    return f"{wrong[0]}: a metric's way is max or min" if wrong else None


def ways(metrics: dict[str, str]) -> str:
    return ", ".join(f"{name}: {way}" for name, way in metrics.items())


WAYS = (str(Mode.max), str(Mode.min))


def monitor_on_test(cfg: DictConfig) -> str | None:
    """Validation metrics select epochs and hyperparameters; test metrics never do."""
    monitor = cfg.trainer.monitor
    if not on_test(monitor):
        return None
    measures = metrics_of(cfg)
    monitored = " or ".join(measures.monitored()) if measures else "a validation metric"
    return (
        f"trainer.monitor={monitor} would pick the epoch on the test split: "
        f"{WHY_NOT_TEST}; monitor {monitored} (with dataset.val_fraction=0.1)"
    )


def monitor_unknown(cfg: DictConfig) -> str | None:
    monitor, measures = cfg.trainer.monitor, metrics_of(cfg)
    if monitor is None or measures is None or on_test(monitor):
        return None
    monitored = measures.monitored()
    if monitor in monitored:
        return None
    return (
        f"trainer.monitor={monitor} is not a metric {task_text(cfg)} can monitor"
        f"{unmeasured(cfg, monitor)}; choose {' or '.join(monitored)}"
    )


def unmeasured(cfg: DictConfig, monitor: str) -> str:
    """Why the task's class leaves the metric `monitor` names unmeasured with this dataset
    (top-5 accuracy among few classes), in brackets; "" where it never measures it."""
    shipped, prefix = task_class(cfg.task), f"{VAL}_"
    why = shipped.unmeasured.get(monitor.removeprefix(prefix)) if shipped else None
    if why is None or not monitor.startswith(prefix):
        return ""
    classes = OmegaConf.select(cfg, "dataset.num_classes", default=None)
    has = f"has {classes}" if classes is not None else "leaves their number to its data"
    return f" ({why}; dataset {cfg.dataset.name} {has})"


def target_twice(cfg: DictConfig) -> str | None:
    trainer = cfg.trainer
    if trainer.target_accuracy is None or trainer.target_value is None:
        return None
    return (
        f"trainer.target_accuracy={trainer.target_accuracy} and trainer.target_value="
        f"{trainer.target_value} both set a target; keep one"
    )


def target_unknown(cfg: DictConfig) -> str | None:
    """A target's metric is one of the task's; target_accuracy is a classifier's."""
    trainer, measures = cfg.trainer, metrics_of(cfg)
    if measures is None:
        return None
    names = [metric.name for metric in measures.evaluated]
    if trainer.target_accuracy is not None and "accuracy" not in names:
        return (
            f"trainer.target_accuracy={trainer.target_accuracy}: task={cfg.task.name} measures "
            f"no accuracy; use trainer.target_metric (one of {', '.join(names)}) and "
            "trainer.target_value"
        )
    metric = trainer.target_metric
    if metric is not None and metric not in names:
        return (
            f"trainer.target_metric={metric} is not a metric {task_text(cfg)} measures; "
            f"choose {' or '.join(names)}"
        )
    if metric is not None and trainer.target_value is None:
        return f"trainer.target_metric={metric} needs trainer.target_value=<the value to reach>"
    return None


def task_text(cfg: DictConfig) -> str:
    """ "it" for the default task, else "task=<its option>"."""
    name = cfg.task.name
    return "it" if name == default_option("task") else f"task={name}"


def optimized_metric_unoptimizable(cfg: DictConfig) -> str | None:
    return unoptimizable(cfg.optimized_metric, metrics_of(cfg))
