"""Typed schemas for every config group, registered in Hydra's ConfigStore, and the checks their
types cannot make.

Each YAML option starts from its schema (e.g. `defaults: [/model_schema@_here_]`) and holds only
what differs from it, so a default lives in one place, and a wrong type, an unknown key or a value
outside a closed choice (an Enum) fails while Hydra composes the config, before any run folder
exists. `validate` refuses the rest: keys appended with `+` that no schema has, and numbers out of
range. This module must not import torch: `python train.py --cfg job` and `--help` stay fast.
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import II, MISSING, DictConfig, OmegaConf

from experiments.errors import ExperimentError
from experiments.sweep import job_folder_name

# The configs: conf/ in a checkout (an editable install maps the package there), or the copy an
# installed wheel carries.
CONFIG_PACKAGE = "experiments.conf"

# What trainer.monitor may select on, and what a run may return to a sweeper.
MONITORED = ("val_accuracy", "val_loss")
OPTIMIZABLE = (*MONITORED, "train_loss", "train_images_per_second")
TEST_METRICS = ("test_accuracy", "test_loss", "final_test_accuracy")

# `device=cuda:N` is an option of the device group for every index up to this; beyond it,
# `device=cuda device.index=N` asks for the same thing.
CUDA_OPTIONS = 16


class Choice(str, Enum):
    """A closed choice: equal to its name, and printed as it (in messages, JSON and YAML)."""

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class DeviceName(Choice):
    auto = "auto"  # CUDA if the machine has it, else the CPU
    cpu = "cpu"
    cuda = "cuda"  # one GPU: device.index, or the current one
    dp = "dp"  # nn.DataParallel over device.ids
    ddp = "ddp"  # DistributedDataParallel, a process per device, under torchrun


class Precision(Choice):
    fp32 = "fp32"
    bf16 = "bf16"  # autocast to bfloat16
    fp16 = "fp16"  # autocast to float16, with gradient scaling (CUDA only)


class Preload(Choice):
    host = "host"  # pinned host memory for a GPU; a copy per batch
    device = "device"  # the whole uint8 dataset on the device, copied there once


class Mode(Choice):
    auto = "auto"  # max for an accuracy, min for a loss
    max = "max"
    min = "min"


class Interval(Choice):
    epoch = "epoch"  # the learning rate changes after every epoch
    step = "step"  # after every optimizer step


class Loader(Choice):
    auto = "auto"  # memory when the decoded images fit dataset.cache_max_gb, else stream
    memory = "memory"  # decoded once (through the cache) into one uint8 array; batches cut from it
    stream = "stream"  # DataLoader workers decode the images of every batch, every epoch


@dataclass
class ModelConfig:
    name: str = MISSING
    _target_: str = MISSING
    # Sized from the dataset, so every model runs on every dataset its layers can take.
    in_channels: int = II("dataset.channels")
    image_size: int = II("dataset.image_size")
    num_classes: int = II("dataset.num_classes")


@dataclass
class MLPConfig(ModelConfig):
    hidden_sizes: list[int] = MISSING


@dataclass
class AugmentConfig:
    # Random crop after padding each side by this many pixels (0: no crop).
    crop_padding: int = 0
    # Random horizontal flip of half the images.
    flip: bool = False


@dataclass
class DatasetConfig:
    name: str = MISSING
    # Null only where the data tells (UserDatasetConfig).
    channels: int | None = MISSING
    image_size: int | None = MISSING
    num_classes: int | None = MISSING
    # Class names in label order; null names them by number.
    classes: list[str] | None = None
    # Per-channel normalization: x = (pixel / 255 - mean) / std; one value serves every channel.
    mean: list[float] | None = field(default_factory=lambda: [0.5])
    std: list[float] | None = field(default_factory=lambda: [0.5])
    # What loads the images: a `_target_` returning the train and test splits, as `Split`s of
    # whole tensors or as torch Datasets (see UserDatasetConfig).
    source: Any = MISSING
    # Where the whole uint8 dataset waits for batches.
    preload: Preload = Preload.host
    # Batch-wise augmentation of the training images, on the device (off by default).
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    # Share of the training images held out for validation, the same share of every class (0:
    # train on all of them). A dataset with a validation split of its own (an image folder's
    # val/) uses that instead.
    val_fraction: float = 0.0
    # Seed of the held-out images, apart from the training seed, so every run of a sweep
    # validates on the same ones.
    val_seed: int = 0


@dataclass
class TorchvisionDatasetConfig(DatasetConfig):
    # Where torchvision finds (or, with download, fetches) the files; relative to the working
    # directory.
    root: str = "data"
    download: bool = False


@dataclass
class UserDatasetConfig(DatasetConfig):
    """Data of the user's own (dataset=image_folder, dataset=custom): a source returning torch
    Datasets of (image, label). What is left null is derived from the data: the image shape from
    the first training image, the classes from the train Dataset's `classes`, mean and std from
    the training images (computed once, cached, and recorded)."""

    channels: int | None = None
    image_size: int | None = None
    num_classes: int | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    loader: Loader = Loader.auto
    # DataLoader worker processes decoding images (null: one per core this process may use, at
    # most 8, shared among the processes of a torchrun run on this machine).
    workers: int | None = None
    # Keep the decoded images in cache_dir (memory-mapped), so only the first run decodes them.
    cache: bool = True
    # Relative to the working directory.
    cache_dir: str = "data/cache"
    # loader=auto decodes into memory up to this size (all splits together), streams beyond it.
    cache_max_gb: float = 4.0


@dataclass
class ImageFolderDatasetConfig(UserDatasetConfig):
    # DIR/train/<class>/*, DIR/test/<class>/* and optionally DIR/val/<class>/*; relative to the
    # working directory.
    root: str = MISSING
    # Every image is converted (grey <-> RGB), resized and center-cropped to this.
    channels: int | None = 3
    image_size: int | None = 32


@dataclass
class SyntheticDatasetConfig(DatasetConfig):
    channels: int = 3
    image_size: int = 32
    num_classes: int = 10
    train_size: int = 2048
    test_size: int = 512
    # Seed of the generated images, separate from the training seed so they stay fixed.
    data_seed: int = 0


@dataclass
class DeviceConfig:
    name: DeviceName = MISSING
    # With `cuda`: the GPU's index (null: the current one, or a free one in a parallel sweep).
    # `device=cuda:N` sets it.
    index: int | None = None
    # GPUs for `dp` (null: every GPU; batches go to the first), or for `ddp` (the process with
    # LOCAL_RANK r takes ids[r]; null: GPU r).
    ids: list[int] | None = None
    # The GPUs this process may use, e.g. [2, 3]: CUDA_VISIBLE_DEVICES before CUDA starts, the
    # GPUs numbered from 0 after. Counted among those a scheduler's CUDA_VISIBLE_DEVICES allows.
    visible: list[int] | None = None
    # With `ddp`: seconds before joining the processes, or any collective, gives up.
    timeout: float = 300.0


@dataclass
class PlacementConfig:
    name: str = MISSING
    _target_: str = MISSING


@dataclass
class OptimizerConfig:
    name: str = MISSING
    _target_: str = MISSING
    # Built with the model's parameters at run time.
    _partial_: bool = True
    lr: float = MISSING
    weight_decay: float = 0.0


@dataclass
class SGDConfig(OptimizerConfig):
    _target_: str = "torch.optim.SGD"
    momentum: float = 0.0


@dataclass
class AdamConfig(OptimizerConfig):
    _target_: str = "torch.optim.Adam"
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])


@dataclass
class SchedulerConfig:
    """A learning-rate schedule: `_target_` is built with the optimizer and the number of times
    it will be stepped in the whole run (epochs, or optimizer steps)."""

    name: str = MISSING
    _target_: str = MISSING
    _partial_: bool = True
    interval: Interval = Interval.epoch


@dataclass
class StepSchedulerConfig(SchedulerConfig):
    # Where the learning rate is multiplied by gamma, as shares of the run.
    milestones: list[float] = field(default_factory=lambda: [0.5, 0.75])
    gamma: float = 0.1


@dataclass
class CosineSchedulerConfig(SchedulerConfig):
    interval: Interval = Interval.step
    # The learning rate at the end of the run.
    min_lr: float = 0.0


@dataclass
class WarmupCosineSchedulerConfig(CosineSchedulerConfig):
    # Share of the run spent rising linearly from lr * start_factor to lr.
    warmup_fraction: float = 0.1
    start_factor: float = 0.01


@dataclass
class OneCycleSchedulerConfig(SchedulerConfig):
    interval: Interval = Interval.step
    # The peak (null: the optimizer's lr; one cycle is often run with a peak several times the
    # lr a constant schedule could take, e.g. 0.1 for Tudui with sgd_momentum).
    max_lr: float | None = None
    # Share of the run spent rising to max_lr.
    pct_start: float = 0.3


@dataclass
class EarlyStoppingConfig:
    # Stop when trainer.monitor has not improved by more than min_delta for this many epochs
    # (null: never). Needs a validation split.
    patience: int | None = None
    min_delta: float = 0.0


@dataclass
class TrainerConfig:
    epochs: int = 10
    # The batch of one optimizer step (of all processes together under torchrun).
    batch_size: int = 64
    seed: int = 0
    # Only deterministic algorithms (and cuBLAS's fixed workspace): slower on some GPU ops.
    deterministic: bool = False
    # Save checkpoints/last.pt every this many epochs (and always after the last).
    checkpoint_every: int = 1
    # CPU threads torch may use (null: torch's default, one per core); 1 suits parallel sweeps.
    threads: int | None = None
    precision: Precision = Precision.fp32
    # Model and input in channels-last memory format; null: on the CPU, where it measured much
    # faster (docs/speed.md), and off on GPUs, where it is not measured here.
    channels_last: bool | None = None
    # torch.compile the model with this backend (e.g. inductor; null: eager).
    compile: str | None = None
    # Let glibc's malloc keep freed memory for reuse (Linux): much faster on the CPU.
    keep_freed_memory: bool = True
    # Training steps between logged losses (console, metrics.jsonl, TensorBoard).
    log_interval: int = 20
    # Stop each epoch's training / evaluation after this many batches (null: all).
    limit_train_batches: int | None = None
    limit_eval_batches: int | None = None
    # The validation metric that selects the run's epoch (checkpoints/best.pt); with mode auto,
    # the highest accuracy or the lowest loss. Never a test metric.
    monitor: str = "val_accuracy"
    monitor_mode: Mode = Mode.auto
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    # Clip the gradients' total norm to this before each step (null: no clipping).
    gradient_clip: float | None = None
    # Label smoothing of the training loss (validation and test losses are plain cross-entropy).
    label_smoothing: float = 0.0
    # At the end, draw the test split's confusion matrix at the selected epoch (TensorBoard and
    # confusion_matrix.png; up to 100 classes). Its counts are in the checkpoint either way.
    confusion_matrix: bool = True


@dataclass
class TrainSchema:
    # Any: a model of the user's own may bring fields of its own (the shipped ones are typed).
    model: Any = MISSING
    dataset: DatasetConfig = MISSING
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    optimizer: OptimizerConfig = MISSING
    scheduler: SchedulerConfig = MISSING
    trainer: TrainerConfig = MISSING
    # What a run returns to a sweeper (hparams_search=optuna optimizes it, minimizing a loss):
    # val_accuracy or val_loss at the selected epoch, the final train_loss, or the run's
    # train_images_per_second (null: nothing).
    optimized_metric: str | None = None
    # A run folder to continue from its last checkpoint, in that folder (resume=<run folder>).
    resume: str | None = None
    # The run folder this run repeats (replay=<run folder>): its overrides, a new folder.
    replay: str | None = None


@dataclass
class EvalSchema:
    # A run folder (its checkpoints/last.pt) or a checkpoint file.
    ckpt: str = MISSING
    # None: the dataset the checkpoint was trained on.
    dataset: DatasetConfig | None = None
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    batch_size: int = 256
    # Stop after this many test batches (null: the whole test split).
    limit_batches: int | None = None


# The schemas by the name an option's defaults list gives them (`/model_schema@_here_`).
SCHEMAS: dict[str, type] = {
    "train_schema": TrainSchema,
    "eval_schema": EvalSchema,
    "model_schema": ModelConfig,
    "mlp_schema": MLPConfig,
    "dataset_schema": DatasetConfig,
    "torchvision_dataset_schema": TorchvisionDatasetConfig,
    "user_dataset_schema": UserDatasetConfig,
    "image_folder_dataset_schema": ImageFolderDatasetConfig,
    "synthetic_dataset_schema": SyntheticDatasetConfig,
    "device_schema": DeviceConfig,
    "placement_schema": PlacementConfig,
    "sgd_schema": SGDConfig,
    "adam_schema": AdamConfig,
    "scheduler_schema": SchedulerConfig,
    "step_scheduler_schema": StepSchedulerConfig,
    "cosine_scheduler_schema": CosineSchedulerConfig,
    "warmup_cosine_scheduler_schema": WarmupCosineSchedulerConfig,
    "onecycle_scheduler_schema": OneCycleSchedulerConfig,
    "trainer_schema": TrainerConfig,
}


def register_configs(started: datetime, tag: str) -> None:
    """Register the schemas, the `cuda:N` device options and the folder-name resolvers.

    `started` and `tag` name the run folder (`${started:<strftime format>}`, `${unique:}`); all
    processes of a distributed run are given the same.
    """
    store = ConfigStore.instance()
    # Outside any group, so they are not offered as options (`--help` lists groups).
    for name, node in SCHEMAS.items():
        store.store(name=name, node=node)
    for index in range(CUDA_OPTIONS):
        store.store(group="device", name=f"cuda:{index}", node=DeviceConfig(DeviceName.cuda, index))
    OmegaConf.register_new_resolver("started", started.strftime, replace=True)
    OmegaConf.register_new_resolver("unique", lambda: tag, replace=True)
    OmegaConf.register_new_resolver("sweep_job", job_folder_name, replace=True)
    OmegaConf.register_new_resolver("direction_of", direction_of, replace=True)


def direction_of(metric: str) -> str:
    """Resolver for a sweeper's direction: down for a loss, up for the rest."""
    return "minimize" if metric.endswith("loss") else "maximize"


def new_tag() -> str:
    """The random part of a run folder's name: runs started in the same second never share one."""
    return secrets.token_hex(4)


def build(node: DictConfig, *, leave_out: tuple[str, ...] = (), **kwargs: Any) -> Any:
    """Instantiate a node's `_target_` with its fields, except `name` (which only labels it) and
    those in `leave_out` (which tell the caller how to use what is built).

    An error raised by the target itself comes out as it was raised, not wrapped by Hydra.
    """
    fields = plain(node)
    for key in ("name", *leave_out):
        fields.pop(key, None)
    try:
        return instantiate(fields, **kwargs)
    except InstantiationException as error:
        if error.__cause__ is None:
            raise
        raise error.__cause__ from None


def plain(node: DictConfig) -> dict[str, Any]:
    """A config as plain data (Enums as their names), for JSON, checkpoints and instantiate."""
    container = OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    assert isinstance(container, dict)
    return container


def validate(cfg: DictConfig, processes: int = 1) -> None:
    """Refuse, in one line naming the key and what is valid, what composing let through.

    Shared by training and evaluation configs (a section a config lacks is skipped);
    `trainer.batch_size` is the global batch, shared by the `processes` of a distributed run.
    """
    _refuse_unknown_keys(cfg, "")
    if "trainer" in cfg:
        trainer = cfg.trainer
        _at_least_one(
            "trainer", trainer, "epochs", "batch_size", "log_interval", "checkpoint_every"
        )
        _at_least_one_or_null(
            "trainer", trainer, "threads", "limit_train_batches", "limit_eval_batches"
        )
        if trainer.compile and cfg.device.name == DeviceName.dp:
            raise ExperimentError(
                f"trainer.compile={trainer.compile} cannot compile device=dp's DataParallel (it "
                "copies the model to every GPU at every step); use device=ddp"
            )
        _check_selection(cfg)
        _check_optimization(cfg)
        if trainer.batch_size % processes:
            raise ExperimentError(
                f"trainer.batch_size={trainer.batch_size} is the batch of all {processes} "
                f"processes together; make it a multiple of {processes}"
            )
    if "limit_batches" in cfg:  # an evaluation
        _at_least_one("", cfg, "batch_size")
        _at_least_one_or_null("", cfg, "limit_batches")
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


def _refuse_unknown_keys(node: DictConfig, path: str) -> None:
    """Hydra lets `+section.key=value` append a key to any section; refuse one its schema lacks."""
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return  # a free-form section (a data source's arguments, a model of the user's own)
    known = [entry.name for entry in dataclasses.fields(schema)]
    for key in node:
        name = f"{path}.{key}" if path else str(key)
        if key not in known:
            section = f"'{path}'" if path else "the config"
            raise ExperimentError(
                f"+{name}: {section} has no key '{key}'; its keys are {', '.join(known)}"
            )
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


def _check_optimization(cfg: DictConfig) -> None:
    """The loss, the gradients and the learning-rate schedule."""
    trainer = cfg.trainer
    if trainer.gradient_clip is not None and trainer.gradient_clip <= 0:
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
    if "loader" in dataset:  # data of the user's own
        if dataset.workers is not None and dataset.workers < 0:
            raise ExperimentError(f"dataset.workers={dataset.workers} must be >= 0, or null")
        if dataset.cache_max_gb < 0:
            raise ExperimentError(f"dataset.cache_max_gb={dataset.cache_max_gb} must be >= 0")
    for key in ("mean", "std"):
        if dataset[key] is None:
            continue  # computed from the training images
        values = list(dataset[key])
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
