"""Typed schemas for every config group, registered in Hydra's ConfigStore.

Each YAML option starts from its schema (e.g. `defaults: [/model_schema@_here_]`), so
a wrong type or an unknown key fails when Hydra composes the config, with Hydra's own message.
This module must not import torch: `python train.py --cfg job` and `--help` stay fast.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import MISSING, DictConfig, OmegaConf

from experiments.errors import ExperimentError
from experiments.sweep import job_folder_name

# `device=cuda:N` is an option of the device group for every index up to this; beyond it,
# `device=cuda device.index=N` asks for the same thing.
CUDA_OPTIONS = 16


@dataclass
class ModelConfig:
    name: str = MISSING
    _target_: str = MISSING
    in_channels: int = MISSING
    image_size: int = MISSING
    num_classes: int = MISSING


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
    channels: int = MISSING
    image_size: int = MISSING
    num_classes: int = MISSING
    # Class names in label order; null names them by number.
    classes: list[str] | None = None
    # Per-channel normalization: x = (pixel / 255 - mean) / std.
    mean: list[float] = MISSING
    std: list[float] = MISSING
    # What loads the images: a `_target_` returning the train and test `Split`s.
    source: Any = MISSING
    # Where the whole uint8 dataset waits for batches: host (pinned, for a GPU) or device.
    preload: str = "host"
    # Batch-wise augmentation of the training images, on the device (off by default).
    augment: AugmentConfig = field(default_factory=AugmentConfig)


@dataclass
class TorchvisionDatasetConfig(DatasetConfig):
    root: str = "data"
    download: bool = False


@dataclass
class SyntheticDatasetConfig(DatasetConfig):
    train_size: int = 2048
    test_size: int = 512
    # Seed of the generated images, separate from the training seed so they stay fixed.
    data_seed: int = 0


@dataclass
class DeviceConfig:
    # cpu | cuda | auto | dp | ddp (a torch-style "cuda:N" is read as cuda with index N)
    name: str = MISSING
    # With `cuda`: the GPU's index (null: the current CUDA device). `device=cuda:N` sets it.
    index: int | None = None
    # GPUs for `dp` (null: every visible GPU; batches go to the first), or for `ddp` (process
    # with LOCAL_RANK r takes ids[r]; null: GPU r).
    ids: list[int] | None = None
    # Sets CUDA_VISIBLE_DEVICES (in PCI bus order) before CUDA starts, e.g. [2, 3].
    visible: list[str] | None = None
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
    # 32, bf16 (autocast) or fp16 (autocast with gradient scaling; CUDA only).
    precision: str = "32"
    # Model and input in channels-last memory format; null: on the CPU, where it measured much
    # faster (bench/RESULTS.md), and off on GPUs, where it is not measured here.
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


@dataclass
class TrainSchema:
    model: ModelConfig = MISSING
    dataset: DatasetConfig = MISSING
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    optimizer: OptimizerConfig = MISSING
    trainer: TrainerConfig = MISSING
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
    limit_batches: int | None = None


def register_configs(started: datetime, tag: str) -> None:
    """Register the schemas, the `cuda:N` device options and the folder-name resolvers.

    `started` and `tag` name the run folder (`${started:<strftime format>}`, `${unique:}`); all
    processes of a distributed run are given the same.
    """
    store = ConfigStore.instance()
    # Outside any group, so they are not offered as options (`--help` lists groups).
    schemas = {
        "train_schema": TrainSchema,
        "eval_schema": EvalSchema,
        "model_schema": ModelConfig,
        "mlp_schema": MLPConfig,
        "dataset_schema": DatasetConfig,
        "torchvision_dataset_schema": TorchvisionDatasetConfig,
        "synthetic_dataset_schema": SyntheticDatasetConfig,
        "device_schema": DeviceConfig,
        "placement_schema": PlacementConfig,
        "sgd_schema": SGDConfig,
        "adam_schema": AdamConfig,
        "trainer_schema": TrainerConfig,
    }
    for name, node in schemas.items():
        store.store(name=name, node=node)
    for index in range(CUDA_OPTIONS):
        store.store(group="device", name=f"cuda:{index}", node=DeviceConfig("cuda", index))
    OmegaConf.register_new_resolver("started", started.strftime, replace=True)
    OmegaConf.register_new_resolver("unique", lambda: tag, replace=True)
    OmegaConf.register_new_resolver("sweep_job", job_folder_name, replace=True)


def new_tag() -> str:
    """The random part of a run folder's name: runs started in the same second never share one."""
    return secrets.token_hex(4)


def build(node: DictConfig, **kwargs: Any) -> Any:
    """Instantiate a node's `_target_` with its fields, except `name` (which only labels it).

    An error raised by the target itself comes out as it was raised, not wrapped by Hydra.
    """
    fields = OmegaConf.to_container(node, resolve=True)
    assert isinstance(fields, dict)
    fields.pop("name", None)
    try:
        return instantiate(fields, **kwargs)
    except InstantiationException as error:
        if error.__cause__ is None:
            raise
        raise error.__cause__ from None


def check_trainer(trainer: TrainerConfig, processes: int = 1) -> None:
    """Refuse trainer settings that cannot run, naming the field and what it needs.

    `trainer.batch_size` is the global batch: the `processes` of a distributed run share it.
    """
    for key in ("epochs", "batch_size", "log_interval", "checkpoint_every"):
        if getattr(trainer, key) < 1:
            raise ExperimentError(
                f"trainer.{key}={getattr(trainer, key)} must be a whole number >= 1"
            )
    for key in ("threads", "limit_train_batches", "limit_eval_batches"):
        limit = getattr(trainer, key)
        if limit is not None and limit < 1:
            raise ExperimentError(f"trainer.{key}={limit} must be >= 1, or null")
    if trainer.batch_size % processes:
        raise ExperimentError(
            f"trainer.batch_size={trainer.batch_size} is the batch of all {processes} processes "
            f"together; make it a multiple of {processes}"
        )
