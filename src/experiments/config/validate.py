"""The checks a config's types cannot make: keys appended with `+` that no schema has, numbers
out of range, and what selects epochs and hyperparameters (never a test metric). Each refusal is
one line naming the key and what is valid.

A check is a function of the composed config that returns its line, or None: most are one field's
(`FieldCheck`), kept in tables by section, which `validate` runs in order."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from experiments.config.choices import DeviceName
from experiments.config.metric_names import (
    CLASSIFICATION_TASK,
    ON_TEST,
    TaskMetrics,
    metrics_of,
)
from experiments.config.schemas import is_table
from experiments.config.store import config_groups, group_options
from experiments.core.errors import ExperimentError
from experiments.core.hints import no_such_key
from experiments.core.text import abridged

Check = Callable[[DictConfig], str | None]
"""A check of a composed config: the one line that refuses it, or None."""


def validate(cfg: DictConfig, processes: int = 1) -> None:
    """Refuse, in one line naming the key and what is valid, what composing let through.

    Shared by training and evaluation configs (a section a config lacks is skipped);
    `trainer.batch_size` is the global batch, shared by the `processes` of a distributed run.
    """
    refuse_unchosen_groups(cfg)
    _refuse_unknown_keys(cfg, "")
    shared_batch = functools.partial(_batch_not_shared_evenly, processes=processes)
    # (which configs a row's checks apply to, its checks), in the order their refusals are told
    rows: tuple[tuple[bool, tuple[Check, ...]], ...] = (
        # (eval.py's model is none but for a class of one's own it is told to build)
        (cfg.get("model") is not None, MODEL_CHECKS),
        (cfg.get("task") is not None, (_own_task_without_target,)),
        ("trainer" in cfg, (*TRAINING_CHECKS, shared_batch)),
        ("limit_images" in cfg, EVALUATION_CHECKS),  # an evaluation
        (cfg.get("dataset") is not None, DATASET_CHECKS),
        (True, DEVICE_CHECKS),
        ("tracker" in cfg, TRACKER_CHECKS),
    )
    for applies, checks in rows:
        if not applies:
            continue
        for check in checks:
            refusal = check(cfg)
            if refusal is not None:
                raise ExperimentError(refusal)


def refuse_unchosen_groups(cfg: DictConfig) -> None:
    """`~model` takes the group's choice out of the defaults list, leaving its section unset,
    which nothing after composing could tell but by failing where it is first read."""
    for group in config_groups():
        if OmegaConf.is_missing(cfg, group):  # (False for a section the config lacks)
            raise ExperimentError(
                f"no {group} chosen (~{group} takes its choice away); choose one with "
                f"{group}=<option>: {', '.join(abridged(group_options(group)))}"
            )


def _refuse_unknown_keys(node: DictConfig, path: str) -> None:
    """Hydra lets `+section.key=value` append a key to any section; refuse one its schema lacks."""
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return  # a free-form section (a data source's arguments, a model of the user's own)
    known = [entry.name for entry in dataclasses.fields(schema)]
    for key in node:
        name = f"{path}.{key}" if path else str(key)
        if key not in known:
            raise ExperimentError(no_such_key(f"+{name}", name, known))
        # An interpolation is left unresolved: it may name a field derived later (a model's
        # num_classes from an image folder's classes).
        if OmegaConf.is_missing(node, key) or OmegaConf.is_interpolation(node, key):
            continue
        if isinstance(node[key], DictConfig):
            _refuse_unknown_keys(node[key], name)


_ABSENT = object()


@dataclasses.dataclass(frozen=True)
class FieldCheck:
    """A check of one field: `{key}={value} {says}` where `valid(value)` is false. A field the
    config lacks (a schedule without it, data not of the user's own) is not checked."""

    key: str  # as the user types it
    valid: Callable[[Any], bool]
    says: str  # what is valid

    def __call__(self, cfg: DictConfig) -> str | None:
        value = OmegaConf.select(cfg, self.key, default=_ABSENT)
        if value is _ABSENT or self.valid(value):
            return None
        return f"{self.key}={value} {self.says}"


def _image_channels(cfg: DictConfig) -> str | None:
    """An image is grey or RGB; a CSV file's rows have as many "channels" as features."""
    dataset = cfg.get("dataset")
    if dataset is None or is_table(dataset) or dataset.get("channels") in (None, 1, 3):
        return None
    return f"dataset.channels={dataset.channels} must be 1 (grey) or 3 (RGB)"


def _whole_from_one(key: str) -> FieldCheck:
    return FieldCheck(key, lambda number: number >= 1, "must be a whole number >= 1")


def _from_one_or_null(key: str) -> FieldCheck:
    return FieldCheck(key, lambda number: number is None or number >= 1, "must be >= 1, or null")


def _evaluation_limit_checks(images_key: str, fraction_key: str) -> tuple[Check, ...]:
    """The evaluation is limited to a number of images, or a fraction of each split, or neither;
    `images_key` and `fraction_key` as the user types them (`trainer.limit_eval_images`, eval.py's
    `limit_images`)."""
    return (
        functools.partial(
            _evaluation_limited_twice, images_key=images_key, fraction_key=fraction_key
        ),
        FieldCheck(
            images_key,
            lambda images: images is None or images >= 1,
            "must be a number of images >= 1, or null; a fraction of the images is "
            f"{fraction_key}=0.2",
        ),
        FieldCheck(
            fraction_key,
            lambda fraction: fraction is None or 0 < fraction <= 1,
            "is a fraction of the images, in (0, 1] (e.g. 0.2), or null; a number of images is "
            f"{images_key}=N",
        ),
    )


def _evaluation_limited_twice(cfg: DictConfig, images_key: str, fraction_key: str) -> str | None:
    images, fraction = OmegaConf.select(cfg, images_key), OmegaConf.select(cfg, fraction_key)
    if images is None or fraction is None:
        return None
    return (
        f"{images_key}={images} and {fraction_key}={fraction} both limit the evaluation; "
        "set one of them (a number of images, or a fraction of the images)"
    )


# The model.


def _own_class_named(section: str, what: str, example: str, docs: str) -> Check:
    """The check that `<section>=custom` names the class of the user's own."""

    def check(cfg: DictConfig) -> str | None:
        if OmegaConf.select(cfg, f"{section}._target_") is not None:
            return None
        return (
            f"{section}=custom needs {section}._target_=<module>.<name>, {what}, e.g. "
            f"{section}._target_={example} ({docs})"
        )

    return check


_own_model_without_target = _own_class_named(
    "model", "the class or function that builds your model", "my_models.Net", "docs/configs.md"
)
_own_task_without_target = _own_class_named(
    "task", "the class of your task", "my_tasks.Task", "docs/tasks.md"
)


def _model_without_name(cfg: DictConfig) -> str | None:
    """(A model of one's own, whose YAML may lack a name.)"""
    if OmegaConf.select(cfg, "model.name") is not None:
        return None
    return (
        "the model config has no name:, which names the model in records and reports; add "
        "name: <its name> to its YAML file (docs/configs.md)"
    )


MODEL_CHECKS: tuple[Check, ...] = (_own_model_without_target, _model_without_name)


# Training: the trainer, what selects epochs and hyperparameters, and the optimization.


def _compile_under_dp(cfg: DictConfig) -> str | None:
    if not (cfg.trainer.compile and cfg.device.name == DeviceName.dp):
        return None
    return (
        f"trainer.compile={cfg.trainer.compile} cannot compile device=dp's DataParallel (it "
        "copies the model to every GPU at every step); use device=ddp"
    )


def _channels_last_under_dp(cfg: DictConfig) -> str | None:
    if not (cfg.trainer.channels_last and cfg.device.name == DeviceName.dp):
        return None
    return (
        "trainer.channels_last=true cannot hold under device=dp: DataParallel copies the "
        "model to its other GPUs at every step in the default memory format; use "
        "device=ddp, which keeps channels-last on every GPU, or trainer.channels_last=null"
    )


def _benchmark_with_determinism(cfg: DictConfig) -> str | None:
    if not (cfg.trainer.cudnn_benchmark and cfg.trainer.deterministic):
        return None
    return (
        "trainer.cudnn_benchmark=true lets cuDNN choose its algorithms by timing them, "
        "which trainer.deterministic=true rules out; set one of them false"
    )


WHY_NOT_TEST = (
    "the test split would then no longer measure the model on images nothing was chosen by"
)


def _monitor_on_test(cfg: DictConfig) -> str | None:
    """Validation metrics select epochs and hyperparameters; test metrics never do."""
    monitor, measures = cfg.trainer.monitor, metrics_of(cfg)
    on_test = ON_TEST | set(measures.on_test() if measures else ())
    if monitor not in on_test:
        return None
    monitored = " or ".join(measures.monitored()) if measures else "a validation metric"
    return (
        f"trainer.monitor={monitor} would pick the epoch on the test split: "
        f"{WHY_NOT_TEST}; monitor {monitored} (with dataset.val_fraction=0.1)"
    )


# (A task of one's own's metrics are known once the run has built it: `metric_names.metrics_of`
# is None before, and these checks are made again then.)


def _monitor_unknown(cfg: DictConfig) -> str | None:
    monitor, measures = cfg.trainer.monitor, metrics_of(cfg)
    if monitor is None or measures is None or monitor in ON_TEST:
        return None
    monitored = measures.monitored()
    if monitor in monitored or monitor in measures.on_test():
        return None
    return (
        f"trainer.monitor={monitor} is not a metric {_task_text(cfg)} can monitor; choose "
        f"{' or '.join(monitored)}"
    )


def _target_twice(cfg: DictConfig) -> str | None:
    trainer = cfg.trainer
    if trainer.target_accuracy is None or trainer.target_value is None:
        return None
    return (
        f"trainer.target_accuracy={trainer.target_accuracy} and trainer.target_value="
        f"{trainer.target_value} both set a target; keep one"
    )


def _target_unknown(cfg: DictConfig) -> str | None:
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
            f"trainer.target_metric={metric} is not a metric {_task_text(cfg)} measures; "
            f"choose {' or '.join(names)}"
        )
    if metric is not None and trainer.target_value is None:
        return f"trainer.target_metric={metric} needs trainer.target_value=<the value to reach>"
    return None


def _task_text(cfg: DictConfig) -> str:
    """ "it", or "task=regression" for a task other than the default."""
    name = cfg.task.name
    return "it" if name == CLASSIFICATION_TASK else f"task={name}"


def check_optimized_metric(metric: str | None, measures: TaskMetrics | None) -> None:
    """What a run returns to a sweeper is a validation (or training) number, never a test one.
    (Also checked when a sweep starts, before its first trial.)"""
    refusal = _unoptimizable(metric, measures)
    if refusal is not None:
        raise ExperimentError(refusal)


def _unoptimizable(metric: str | None, measures: TaskMetrics | None) -> str | None:
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


def _optimized_metric_unoptimizable(cfg: DictConfig) -> str | None:
    return _unoptimizable(cfg.optimized_metric, metrics_of(cfg))


# The largest float32: the optimizer's step computes in the parameters' float32, where a larger
# number overflows, at the first step, once the data is loaded and the model built.
FLOAT32_MAX = 3.4028234663852886e38


def _beyond_float32(cfg: DictConfig, section: str) -> str | None:
    """A number of the optimizer's or the schedule's (in a list too) that float32 cannot hold."""
    for key, value in cfg[section].items():
        for number in value if isinstance(value, ListConfig) else [value]:
            if isinstance(number, (int, float)) and not abs(number) <= FLOAT32_MAX:
                return (
                    f"{section}.{key}={value} is beyond float32, which the optimizer's step "
                    f"computes in (at most {FLOAT32_MAX:.4g}): it would overflow at the first "
                    "step; give a number within it"
                )
    return None


def _batch_not_shared_evenly(cfg: DictConfig, processes: int) -> str | None:
    batch_size = cfg.trainer.batch_size
    if batch_size % processes == 0:
        return None
    return (
        f"trainer.batch_size={batch_size} is the batch of all {processes} "
        f"processes together; make it a multiple of {processes}"
    )


TRAINING_CHECKS: tuple[Check, ...] = (
    _whole_from_one("trainer.epochs"),
    _whole_from_one("trainer.batch_size"),
    _whole_from_one("trainer.log_interval"),
    _whole_from_one("trainer.checkpoint_every"),
    _whole_from_one("trainer.accumulate_batches"),
    _from_one_or_null("trainer.threads"),
    _from_one_or_null("trainer.limit_train_batches"),
    *_evaluation_limit_checks("trainer.limit_eval_images", "trainer.limit_eval_fraction"),
    _compile_under_dp,
    _channels_last_under_dp,
    _benchmark_with_determinism,
    FieldCheck(
        "trainer.seed",
        lambda seed: 0 <= seed < 2**64,  # what torch's generators take
        f"must be a whole number from 0 to 2**64 - 1 ({2**64 - 1})",
    ),
    FieldCheck(
        "trainer.target_accuracy",
        lambda target: target is None or 0 < target <= 1,
        "is a fraction of the images, in (0, 1] (e.g. 0.5 for 50%), or null",
    ),
    _target_twice,
    _target_unknown,
    _monitor_on_test,
    _monitor_unknown,
    _optimized_metric_unoptimizable,
    _from_one_or_null("trainer.early_stopping.patience"),
    FieldCheck("trainer.early_stopping.min_delta", lambda delta: delta >= 0, "must be >= 0"),
    FieldCheck(
        "optimizer.lr", lambda lr: math.isfinite(lr) and lr >= 0, "must be a finite number >= 0"
    ),
    functools.partial(_beyond_float32, section="optimizer"),
    functools.partial(_beyond_float32, section="scheduler"),
    FieldCheck(
        "trainer.gradient_clip",
        lambda norm: norm is None or norm > 0,
        "must be > 0 (a gradient norm), or null",
    ),
    FieldCheck(
        "trainer.label_smoothing", lambda smoothing: 0 <= smoothing < 1, "must be in [0, 1)"
    ),
    FieldCheck(
        "scheduler.milestones",
        lambda shares: all(0 < share <= 1 for share in shares),
        "are shares of the run, each in (0, 1]",
    ),
    FieldCheck("scheduler.pct_start", lambda share: 0 < share < 1, "must be in (0, 1)"),
    FieldCheck("scheduler.warmup_fraction", lambda share: 0 <= share < 1, "must be in [0, 1)"),
)


# Evaluation (eval.py).


def _evaluation_under_ddp(cfg: DictConfig) -> str | None:
    if cfg.device.name != DeviceName.ddp:
        return None
    return (
        "device=ddp trains under torchrun; eval.py evaluates in one process: use "
        "device=cuda, device=dp or device=cpu"
    )


EVALUATION_CHECKS: tuple[Check, ...] = (
    _whole_from_one("batch_size"),
    *_evaluation_limit_checks("limit_images", "limit_fraction"),
    _evaluation_under_ddp,
)


# The dataset.


def _image_folder_without_root(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg.dataset, "root"):
        return None
    return (
        f"dataset={cfg.dataset.name} needs dataset.root=<folder>, holding train/<class>/* and "
        "test/<class>/* (docs/own-data.md)"
    )


def _source_without_target(cfg: DictConfig) -> str | None:
    if not OmegaConf.is_missing(cfg.dataset.source, "_target_"):
        return None
    return (
        f"dataset={cfg.dataset.name} needs dataset.source._target_=<module>.<function>, a "
        "function returning (train, test) torch Datasets (docs/own-data.md)"
    )


def _statistic_not_per_channel(cfg: DictConfig, key: str) -> str | None:
    """dataset.mean or dataset.std (null: computed from the training images)."""
    given, channels = cfg.dataset[key], cfg.dataset.channels
    if given is None or len(given) in (1, channels or len(given)):
        return None
    return f"dataset.{key}={list(given)} needs 1 or {channels} values (one per channel)"


def _classes_miscounted(cfg: DictConfig) -> str | None:
    classes, num_classes = cfg.dataset.classes, cfg.dataset.num_classes
    if classes is None or num_classes is None or len(classes) == num_classes:
        return None
    return f"dataset.classes names {len(classes)} classes, but dataset.num_classes={num_classes}"


DATASET_CHECKS: tuple[Check, ...] = (
    FieldCheck(
        "dataset.val_fraction",
        lambda share: 0 <= share < 1,
        "must be in [0, 1): the share of the training images held out for validation",
    ),
    FieldCheck(
        "dataset.test_fraction",
        lambda share: 0 < share < 1,
        "must be a number between 0 and 1: the share of the rows drawn for the test split",
    ),
    _image_folder_without_root,
    _source_without_target,
    _image_channels,
    _from_one_or_null("dataset.image_size"),
    # Fields of data of the user's own only (`is_users_data`).
    FieldCheck(
        "dataset.workers",
        lambda workers: workers is None or workers >= 0,
        "must be >= 0, or null",
    ),
    FieldCheck("dataset.cache_max_gb", lambda gigabytes: gigabytes >= 0, "must be >= 0"),
    FieldCheck(
        "dataset.cache_timeout",
        lambda seconds: seconds > 0,
        "must be > 0 (seconds to wait for another process building the same cache entry)",
    ),
    FieldCheck(
        "dataset.mean",
        lambda means: means is None or all(math.isfinite(mean) for mean in means),
        "must hold finite numbers",
    ),
    functools.partial(_statistic_not_per_channel, key="mean"),
    FieldCheck(
        "dataset.std",
        lambda stds: stds is None or all(math.isfinite(std) and std > 0 for std in stds),
        "must hold numbers > 0 (pixels are divided by them)",
    ),
    functools.partial(_statistic_not_per_channel, key="std"),
    _classes_miscounted,
    FieldCheck("dataset.augment.crop_padding", lambda padding: padding >= 0, "must be >= 0"),
)


def _negative_gpu(cfg: DictConfig) -> str | None:
    visible = list(cfg.device.visible or [])
    if all(gpu >= 0 for gpu in visible):
        return None
    return f"device.visible={visible} names a negative GPU; GPUs are numbered from 0"


DEVICE_CHECKS: tuple[Check, ...] = (_negative_gpu,)


TRACKER_CHECKS: tuple[Check, ...] = tuple(
    FieldCheck(
        f"tracker.{tracker}.timeout",
        lambda seconds: seconds > 0,
        f"must be > 0 (seconds a run waits on one call to {name} before going on without it)",
    )
    for tracker, name in (("mlflow", "MLflow"), ("wandb", "W&B"))
)
