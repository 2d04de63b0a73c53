"""A training run's settings that do not fit together, or with its task's metrics."""

from __future__ import annotations

from omegaconf import DictConfig, ListConfig, OmegaConf

from experiments.config.checks import not_finite
from experiments.config.choices import AUTO_BATCH, AutoBatch, DeviceName, Interval, Mode
from experiments.config.metric_names import LOSS, VAL, on_test
from experiments.config.optimized import WHY_NOT_TEST, unoptimizable
from experiments.config.schemas import EmaConfig, TrainerConfig
from experiments.config.store import default_option
from experiments.config.task_metrics import declared_by, metrics_of, task_class


def nesterov_without_momentum(cfg: DictConfig) -> str | None:
    optimizer = cfg.optimizer
    if not optimizer.get("nesterov") or optimizer.get("momentum", 0) > 0:
        return None
    return (
        f"optimizer.nesterov=true needs momentum: optimizer.momentum={optimizer.momentum} "
        "(e.g. optimizer=sgd_momentum, or optimizer.momentum=0.9)"
    )


def warmup_of_a_rising_schedule(cfg: DictConfig) -> str | None:
    """warmup_cosine and onecycle rise over a share of the run already."""
    scheduler = cfg.scheduler
    if not scheduler.get("warmup_epochs"):
        return None
    for own in ("warmup_fraction", "pct_start"):
        if own in scheduler:
            return (
                f"scheduler.warmup_epochs={scheduler.warmup_epochs} warms up scheduler="
                f"{scheduler.name}, which rises over scheduler.{own} of the run already: take "
                "one (scheduler=cosine scheduler.warmup_epochs=N warms up a cosine)"
            )
    return None


def warmup_longer_than_the_run(cfg: DictConfig) -> str | None:
    epochs, warmup = cfg.trainer.epochs, cfg.scheduler.get("warmup_epochs", 0)
    if warmup < epochs:
        return None
    return (
        f"scheduler.warmup_epochs={warmup} must be less than trainer.epochs={epochs} (the "
        "schedule runs after the warm-up)"
    )


def warmup_between_epoch_steps(cfg: DictConfig) -> str | None:
    scheduler = cfg.scheduler
    warmup = scheduler.get("warmup_epochs", 0)
    if scheduler.interval != Interval.epoch or float(warmup).is_integer():
        return None
    return (
        f"scheduler.warmup_epochs={warmup} with scheduler.interval=epoch: the lr changes once an "
        "epoch; give whole epochs, or scheduler.interval=step"
    )


def benchmark_with_determinism(cfg: DictConfig) -> str | None:
    if not (cfg.trainer.cudnn_benchmark and cfg.trainer.deterministic):
        return None
    return (
        "trainer.cudnn_benchmark=true lets cuDNN choose its algorithms by timing them, "
        "which trainer.deterministic=true rules out; set one of them false"
    )


# The optimizer's step computes in the parameters' float32: a larger number overflows at once.
FLOAT32_MAX = 3.4028234663852886e38


def beyond_float32(cfg: DictConfig, section: str) -> str | None:
    """A number of the optimizer's or the schedule's (in a list too) that float32 cannot hold."""
    for key, value in cfg[section].items():
        for number in value if isinstance(value, ListConfig) else [value]:
            if isinstance(number, (int, float)) and not abs(number) <= FLOAT32_MAX:
                held = f"{section}.{key}={value}"
                unbounded = not_finite(number)
                if unbounded is not None and number is value:
                    return f"{held} {unbounded}; give a finite number"
                if unbounded is not None:
                    return f"{held} holds {number}, which {unbounded}; give finite numbers"
                return (
                    f"{held} is beyond float32, which the optimizer's step computes in (at most "
                    f"{FLOAT32_MAX:.4g}): it would overflow at the first step; give a number "
                    "within it"
                )
    return None


def batch_not_shared_evenly(cfg: DictConfig, processes: int) -> str | None:
    batch_size = cfg.trainer.batch_size
    if batch_size == AUTO_BATCH:
        if processes == 1 and cfg.device.name != DeviceName.dp:
            return None
        shared = f"{processes} processes" if processes > 1 else "device=dp's GPUs"
        return (
            f"trainer.batch_size=auto searches the largest batch of one device, and {shared} "
            "share each batch; give trainer.batch_size a number (the search's on one device, "
            "times the devices, is a start)"
        )
    if batch_size % processes == 0:
        return None
    return (
        f"trainer.batch_size={batch_size} is the batch of all {processes} "
        f"processes together; make it a multiple of {processes}"
    )


def overfit_and_limit(cfg: DictConfig) -> str | None:
    trainer = cfg.trainer
    if trainer.overfit_batches is None or trainer.limit_train_batches is None:
        return None
    return (
        f"trainer.overfit_batches={trainer.overfit_batches} trains on those batches every "
        f"epoch, and trainer.limit_train_batches={trainer.limit_train_batches} on the first "
        "of a new shuffle: set one (the other null)"
    )


def a_batchs_worth_of_an_unsearched_batch(cfg: DictConfig) -> str | None:
    """The debug presets evaluate `${trainer.batch_size}` images, unknown before auto's search."""
    limit = OmegaConf.to_container(cfg.trainer, resolve=False).get("limit_eval_images")
    if cfg.trainer.batch_size != AUTO_BATCH or limit != "${trainer.batch_size}":
        return None
    return (
        f"trainer.limit_eval_images={limit} (a debug preset's: a batch's worth) has no size "
        f"while trainer.batch_size={AUTO_BATCH}: give trainer.batch_size=N, or "
        "trainer.limit_eval_images=N"
    )


# What each of trainer.batch_size=auto's settings does, said where it is given without auto.
AUTO_BATCH_SETTINGS = {
    "auto_batch": "chooses among the batches trainer.batch_size=auto finds",
    "auto_batch_halvings": "halves the batch trainer.batch_size=auto finds",
    "auto_batch_min_steps": "bounds the batch trainer.batch_size=auto chooses",
}


def auto_batch_settings_without_auto(cfg: DictConfig) -> str | None:
    trainer, defaults = cfg.trainer, TrainerConfig()
    if trainer.batch_size == AUTO_BATCH:
        return None
    for key, does in AUTO_BATCH_SETTINGS.items():
        if trainer[key] != getattr(defaults, key):
            return (
                f"trainer.{key}={trainer[key]} {does}, and trainer.batch_size="
                f"{trainer.batch_size}; add trainer.batch_size=auto"
            )
    return None


def halvings_of_the_knee(cfg: DictConfig) -> str | None:
    trainer = cfg.trainer
    if trainer.auto_batch_halvings == 0 or trainer.auto_batch != AutoBatch.knee:
        return None
    return (
        f"trainer.auto_batch_halvings={trainer.auto_batch_halvings} halves the largest batch "
        "that fits, and trainer.auto_batch=knee trains at the knee of the speeds measured; add "
        "trainer.auto_batch=largest"
    )


def average_settings_without_decay(cfg: DictConfig) -> str | None:
    ema = OmegaConf.select(cfg, "trainer.ema")
    if ema is None or ema.decay is not None:
        return None
    given = [
        f"trainer.ema.{key}={ema[key]}"
        for key in ("every", "warmup_steps")
        if ema[key] != getattr(EmaConfig(), key)
    ]
    if not given:
        return None
    verb = "sets" if len(given) == 1 else "set"
    return (
        f"{' and '.join(given)} {verb} how the average of the weights is kept, but "
        "trainer.ema.decay is null: none is kept; add trainer.ema.decay=0.9999"
    )


def task_metrics_not_declared(cfg: DictConfig) -> str | None:
    """A task of one's own declares its metrics, each max or min; a shipped task's class says."""
    task = cfg.task
    example = "task.metrics='{mae: min, r2: max}'"
    if task.get("metrics") is not None and not isinstance(task.metrics, DictConfig):
        return f"task.metrics={task.metrics} must give each metric's better way: {example}"
    given = declared_by(task) or {}
    given.pop(LOSS.name, None)  # (measured last, whether named or not)
    shipped = task_class(task)
    if shipped is not None:
        if not given or given in [m.better_ways() for m in (shipped.measured, *shipped.narrower)]:
            return None
        measured = ways(shipped.measured.better_ways())
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
    if monitor is None or measures is None or on_test(monitor) or monitor in measures.monitored():
        return None
    return (
        f"trainer.monitor={monitor} is not a metric {task_text(cfg)} can monitor"
        f"{unmeasured(cfg, monitor)}; choose {' or '.join(measures.monitored())}"
    )


def unmeasured(cfg: DictConfig, monitor: str) -> str:
    """Why the task leaves `monitor` unmeasured on this dataset (top-5 of few classes), or ""."""
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
