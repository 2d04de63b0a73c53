"""The checks a config's types cannot make: keys appended with `+` that no schema has, numbers
out of range, and what selects epochs and hyperparameters (never a test metric). Each refusal is
one line naming the key and what is valid."""

from __future__ import annotations

import dataclasses
import math

from omegaconf import DictConfig, ListConfig, OmegaConf

from experiments.config.choices import MONITORED, OPTIMIZABLE, TEST_METRICS, DeviceName
from experiments.config.schemas import is_users_data
from experiments.config.store import config_groups, group_options
from experiments.core.errors import ExperimentError
from experiments.core.hints import no_such_key
from experiments.core.text import abridged


def validate(cfg: DictConfig, processes: int = 1) -> None:
    """Refuse, in one line naming the key and what is valid, what composing let through.

    Shared by training and evaluation configs (a section a config lacks is skipped);
    `trainer.batch_size` is the global batch, shared by the `processes` of a distributed run.
    """
    refuse_unchosen_groups(cfg)
    _refuse_unknown_keys(cfg, "")
    # (eval.py's model is none but for a class of one's own it is told to build)
    if cfg.get("model") is not None and OmegaConf.select(cfg, "model._target_") is None:
        raise ExperimentError(
            "model=custom needs model._target_=<module>.<name>, the class or function that builds "
            "your model, e.g. model._target_=my_models.Net (docs/configs.md)"
        )
    # (a model of one's own, whose YAML may lack a name)
    if cfg.get("model") is not None and OmegaConf.select(cfg, "model.name") is None:
        raise ExperimentError(
            "the model config has no name:, which names the model in records and reports; add "
            "name: <its name> to its YAML file (docs/configs.md)"
        )
    if "trainer" in cfg:
        trainer = cfg.trainer
        _at_least_one(
            "trainer",
            trainer,
            "epochs",
            "batch_size",
            "log_interval",
            "checkpoint_every",
            "accumulate_batches",
        )
        _at_least_one_or_null("trainer", trainer, "threads", "limit_train_batches")
        _check_eval_limit(trainer, "trainer.limit_eval_images", "trainer.limit_eval_fraction")
        if trainer.compile and cfg.device.name == DeviceName.dp:
            raise ExperimentError(
                f"trainer.compile={trainer.compile} cannot compile device=dp's DataParallel (it "
                "copies the model to every GPU at every step); use device=ddp"
            )
        if trainer.channels_last and cfg.device.name == DeviceName.dp:
            raise ExperimentError(
                "trainer.channels_last=true cannot hold under device=dp: DataParallel copies the "
                "model to its other GPUs at every step in the default memory format; use "
                "device=ddp, which keeps channels-last on every GPU, or trainer.channels_last=null"
            )
        if trainer.cudnn_benchmark and trainer.deterministic:
            raise ExperimentError(
                "trainer.cudnn_benchmark=true lets cuDNN choose its algorithms by timing them, "
                "which trainer.deterministic=true rules out; set one of them false"
            )
        if not 0 <= trainer.seed < 2**64:  # what torch's generators take
            raise ExperimentError(
                f"trainer.seed={trainer.seed} must be a whole number from 0 to 2**64 - 1 "
                f"({2**64 - 1})"
            )
        target = trainer.target_accuracy
        if target is not None and not 0 < target <= 1:
            raise ExperimentError(
                f"trainer.target_accuracy={target} is a fraction of the images, in (0, 1] "
                "(e.g. 0.5 for 50%), or null"
            )
        _check_selection(cfg)
        _check_optimization(cfg)
        if trainer.batch_size % processes:
            raise ExperimentError(
                f"trainer.batch_size={trainer.batch_size} is the batch of all {processes} "
                f"processes together; make it a multiple of {processes}"
            )
    if "limit_images" in cfg:  # an evaluation
        _at_least_one("", cfg, "batch_size")
        _check_eval_limit(cfg, "limit_images", "limit_fraction")
        if cfg.device.name == DeviceName.ddp:
            raise ExperimentError(
                "device=ddp trains under torchrun; eval.py evaluates in one process: use "
                "device=cuda, device=dp or device=cpu"
            )
    if cfg.get("dataset") is not None:
        _check_dataset(cfg.dataset)
    visible = cfg.device.visible or []
    if any(gpu < 0 for gpu in visible):
        raise ExperimentError(
            f"device.visible={list(visible)} names a negative GPU; GPUs are numbered from 0"
        )


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


def _at_least_one(section: str, node: DictConfig, *keys: str) -> None:
    for key in keys:
        if node[key] < 1:
            name = f"{section}.{key}" if section else key
            raise ExperimentError(f"{name}={node[key]} must be a whole number >= 1")


def _at_least_one_or_null(section: str, node: DictConfig, *keys: str) -> None:
    for key in keys:
        if node[key] is not None and node[key] < 1:
            name = f"{section}.{key}" if section else key
            raise ExperimentError(f"{name}={node[key]} must be >= 1, or null")


def _check_eval_limit(node: DictConfig, images_key: str, fraction_key: str) -> None:
    """A number of images, or a fraction of each split, or neither; `images_key` and
    `fraction_key` as the user types them (`trainer.limit_eval_images`, eval.py's
    `limit_images`)."""
    images = node[images_key.rpartition(".")[2]]
    fraction = node[fraction_key.rpartition(".")[2]]
    if images is not None and fraction is not None:
        raise ExperimentError(
            f"{images_key}={images} and {fraction_key}={fraction} both limit the evaluation; "
            "set one of them (a number of images, or a fraction of the images)"
        )
    if images is not None and images < 1:
        raise ExperimentError(
            f"{images_key}={images} must be a number of images >= 1, or null; a fraction of the "
            f"images is {fraction_key}=0.2"
        )
    if fraction is not None and not 0 < fraction <= 1:
        raise ExperimentError(
            f"{fraction_key}={fraction} is a fraction of the images, in (0, 1] (e.g. 0.2), or "
            f"null; a number of images is {images_key}=N"
        )


WHY_NOT_TEST = (
    "the test split would then no longer measure the model on images nothing was chosen by"
)


def check_optimized_metric(metric: str | None) -> None:
    """What a run returns to a sweeper is a validation (or training) number, never a test one.
    (Also checked when a sweep starts, before its first trial.)"""
    if metric in TEST_METRICS:
        raise ExperimentError(
            f"optimized_metric={metric} would choose hyperparameters on the test split: "
            f"{WHY_NOT_TEST}; optimize {', '.join(OPTIMIZABLE)}"
        )
    if metric is not None and metric not in OPTIMIZABLE:
        raise ExperimentError(
            f"optimized_metric={metric} is not a metric a run reports; choose "
            f"{', '.join(OPTIMIZABLE)}"
        )


def _check_selection(cfg: DictConfig) -> None:
    """Validation metrics select epochs and hyperparameters; test metrics never do."""
    trainer = cfg.trainer
    if trainer.monitor in TEST_METRICS:
        raise ExperimentError(
            f"trainer.monitor={trainer.monitor} would pick the epoch on the test split: "
            f"{WHY_NOT_TEST}; monitor {' or '.join(MONITORED)} (with dataset.val_fraction=0.1)"
        )
    if trainer.monitor not in MONITORED:
        raise ExperimentError(
            f"trainer.monitor={trainer.monitor} is not a metric it can monitor; choose "
            f"{' or '.join(MONITORED)}"
        )
    check_optimized_metric(cfg.optimized_metric)
    _at_least_one_or_null("trainer.early_stopping", trainer.early_stopping, "patience")
    if trainer.early_stopping.min_delta < 0:
        raise ExperimentError(
            f"trainer.early_stopping.min_delta={trainer.early_stopping.min_delta} must be >= 0"
        )


# The largest float32: the optimizer's step computes in the parameters' float32, where a larger
# number overflows, at the first step, once the data is loaded and the model built.
FLOAT32_MAX = 3.4028234663852886e38


def _refuse_beyond_float32(section: str, node: DictConfig) -> None:
    """A number of the optimizer's or the schedule's (in a list too) that float32 cannot hold."""
    for key, value in node.items():
        for number in value if isinstance(value, ListConfig) else [value]:
            if isinstance(number, (int, float)) and not abs(number) <= FLOAT32_MAX:
                raise ExperimentError(
                    f"{section}.{key}={value} is beyond float32, which the optimizer's step "
                    f"computes in (at most {FLOAT32_MAX:.4g}): it would overflow at the first "
                    "step; give a number within it"
                )


def _check_optimization(cfg: DictConfig) -> None:
    """The loss, the gradients and the learning-rate schedule."""
    trainer = cfg.trainer
    lr = cfg.optimizer.lr
    if not (math.isfinite(lr) and lr >= 0):
        raise ExperimentError(f"optimizer.lr={lr} must be a finite number >= 0")
    _refuse_beyond_float32("optimizer", cfg.optimizer)
    _refuse_beyond_float32("scheduler", cfg.scheduler)
    if trainer.gradient_clip is not None and not trainer.gradient_clip > 0:
        raise ExperimentError(
            f"trainer.gradient_clip={trainer.gradient_clip} must be > 0 (a gradient norm), or null"
        )
    if not 0 <= trainer.label_smoothing < 1:
        raise ExperimentError(
            f"trainer.label_smoothing={trainer.label_smoothing} must be in [0, 1)"
        )
    scheduler = cfg.scheduler
    milestones = list(scheduler.get("milestones", []))
    if not all(0 < share <= 1 for share in milestones):
        raise ExperimentError(
            f"scheduler.milestones={milestones} are shares of the run, each in (0, 1]"
        )
    if not 0 < scheduler.get("pct_start", 0.5) < 1:
        raise ExperimentError(f"scheduler.pct_start={scheduler.pct_start} must be in (0, 1)")
    if not 0 <= scheduler.get("warmup_fraction", 0) < 1:
        raise ExperimentError(
            f"scheduler.warmup_fraction={scheduler.warmup_fraction} must be in [0, 1)"
        )


def _check_dataset(dataset: DictConfig) -> None:
    if not 0 <= dataset.val_fraction < 1:
        raise ExperimentError(
            f"dataset.val_fraction={dataset.val_fraction} must be in [0, 1): the share of the "
            "training images held out for validation"
        )
    if OmegaConf.is_missing(dataset, "root"):  # an image folder without its folder
        raise ExperimentError(
            f"dataset={dataset.name} needs dataset.root=<folder>, holding train/<class>/* and "
            "test/<class>/* (docs/own-data.md)"
        )
    if OmegaConf.is_missing(dataset.source, "_target_"):
        raise ExperimentError(
            f"dataset={dataset.name} needs dataset.source._target_=<module>.<function>, a "
            "function returning (train, test) torch Datasets (docs/own-data.md)"
        )
    if dataset.channels not in (None, 1, 3):
        raise ExperimentError(f"dataset.channels={dataset.channels} must be 1 (grey) or 3 (RGB)")
    _at_least_one_or_null("dataset", dataset, "image_size")
    if is_users_data(dataset):
        if dataset.workers is not None and dataset.workers < 0:
            raise ExperimentError(f"dataset.workers={dataset.workers} must be >= 0, or null")
        if dataset.cache_max_gb < 0:
            raise ExperimentError(f"dataset.cache_max_gb={dataset.cache_max_gb} must be >= 0")
        if not dataset.cache_timeout > 0:
            raise ExperimentError(
                f"dataset.cache_timeout={dataset.cache_timeout} must be > 0 (seconds to wait for "
                "another process building the same cache entry)"
            )
    for key in ("mean", "std"):
        if dataset[key] is None:
            continue  # computed from the training images
        values = list(dataset[key])
        if not all(math.isfinite(value) for value in values) or (
            key == "std" and not all(value > 0 for value in values)
        ):
            valid = "numbers > 0 (pixels are divided by them)" if key == "std" else "finite numbers"
            raise ExperimentError(f"dataset.{key}={values} must hold {valid}")
        if len(values) not in (1, dataset.channels or len(values)):
            raise ExperimentError(
                f"dataset.{key}={values} needs 1 or {dataset.channels} values (one per channel)"
            )
    if (
        dataset.classes is not None
        and dataset.num_classes is not None
        and len(dataset.classes) != dataset.num_classes
    ):
        raise ExperimentError(
            f"dataset.classes names {len(dataset.classes)} classes, "
            f"but dataset.num_classes={dataset.num_classes}"
        )
    if dataset.augment.crop_padding < 0:
        raise ExperimentError(
            f"dataset.augment.crop_padding={dataset.augment.crop_padding} must be >= 0"
        )
