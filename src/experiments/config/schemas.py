"""Typed schemas of every config group: each YAML option holds what differs from its schema, and
a wrong type, key or choice fails while Hydra composes, before any run folder exists."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import II, MISSING, DictConfig

from experiments.config.checks import Number, Numbers, checked, one_of, settings, text, texts
from experiments.config.choices import (
    AUTO_BATCH,
    AugmentPolicy,
    AutoBatch,
    DeviceName,
    Interval,
    Loader,
    Mode,
    Precision,
    Preload,
)

FROM_ONE, FROM_ZERO = Number(">= 1", whole=True), Number(">= 0", whole=True)
SHARE = Number("[0, 1)")
SECONDS = Number("> 0", unit="seconds")
SEED = Number(f"[0, {2**64 - 1}]", whole=True)  # what torch's generators take
# More images than any split the project reads: a larger batch is a slip, else drawn and held whole.
LARGEST_BATCH = 2**24
BATCH = Number(f"[1, {LARGEST_BATCH}]", whole=True)
# RandAugment's ops (`data.policies.RANDAUGMENT`): more rounds than ops only repeat ops.
RANDAUGMENT_OPS = 14
# Beta(1000, 1000) is all but an even mix already; Python's Beta never ends from 9e307 on.
MOST_MIXING_ALPHA = 1000.0
MIXING = Number(
    f"[0, {MOST_MIXING_ALPHA:g}]", means="Beta(alpha, alpha) draws the shares (0: off; e.g. 0.2)"
)
# (A share of 1 or more never lets a step go.)
MOMENTUM = SHARE.but(means="the share of the last step kept in the next (0: none; e.g. 0.9)")


@dataclass
class ModelConfig:
    name: str = checked(MISSING, text())
    _target_: str = MISSING
    # Sized from the dataset, so every model runs on every dataset its layers can take.
    in_channels: int = II("dataset.channels")
    image_size: int = II("dataset.image_size")
    num_classes: int = II("dataset.num_classes")
    weights: str | None = None  # a state dict file to start from (null: untrained)
    weights_partial: bool = False  # true: load the tensors that fit, the rest as built


@dataclass
class MLPConfig(ModelConfig):
    hidden_sizes: list[int] = MISSING


@dataclass
class UNetConfig(ModelConfig):
    base_channels: int = 16  # of the first level; each level down doubles them
    depth: int = 2  # levels down: the image size must divide by 2**depth


@dataclass
class TorchvisionModelConfig(ModelConfig):
    arch: str = "resnet18"  # any name of torchvision.models.list_models(module=torchvision.models)


@dataclass
class TimmModelConfig(ModelConfig):
    arch: str = "resnet18"  # any name of timm.list_models() (pip install 'experiments[timm]')
    pretrained: bool = False  # timm's default weights, from the Hugging Face Hub (or its cache)


@dataclass
class AugmentConfig:
    crop_padding: int = checked(0, FROM_ZERO)  # random crop after padding each side (0: none)
    flip: bool = False  # random horizontal flip of half the images
    policy: AugmentPolicy | None = None  # per image (null: none)
    num_ops: int = checked(
        2, Number(f"[1, {RANDAUGMENT_OPS}]", whole=True, means="at most RandAugment's ops")
    )
    magnitude: int = checked(9, Number("[0, 30]", whole=True, means="a step of RandAugment's 31"))
    erasing: float = checked(0.0, Number("[0, 1]"))  # the chance of erasing a random rectangle
    mixup_alpha: float = checked(0.0, MIXING)
    cutmix_alpha: float = checked(0.0, MIXING)  # with mixup too: one of the two per batch


@dataclass
class DatasetConfig:
    name: str = checked(MISSING, text())
    channels: int | None = MISSING  # null only where the data tells (UserDatasetConfig)
    image_size: int | None = checked(MISSING, FROM_ONE.or_null())
    num_classes: int | None = checked(MISSING, FROM_ONE.or_null())
    classes: list[str] | None = checked(None, texts("the classes' names, in label order").or_null())
    # x = (pixel / 255 - mean) / std per channel; one value serves every channel.
    mean: list[float] | None = checked(rule=Numbers().or_null(), factory=lambda: [0.5])
    std: list[float] | None = checked(
        rule=Numbers(Number("> 0"), means="pixels are divided by them").or_null(),
        factory=lambda: [0.5],
    )
    # A `_target_` returning the train and test splits (`Split`s of tensors, or torch Datasets).
    source: Any = MISSING
    preload: Preload = Preload.host
    augment: AugmentConfig = field(default_factory=AugmentConfig)  # batch-wise, on the device
    # Held out of every class alike for validation; a dataset's own val/ split is used instead.
    val_fraction: float = checked(
        0.0, SHARE.but(means="the share of the training images held out for validation")
    )
    val_seed: int = 0  # apart from the training seed: every run of a sweep validates alike


@dataclass
class TorchvisionDatasetConfig(DatasetConfig):
    root: str = "data"  # where torchvision finds (or downloads) the files
    download: bool = False


@dataclass
class UserDatasetConfig(DatasetConfig):
    """Data of the user's own (image_folder, custom): what is left null is derived from the data."""

    channels: int | None = None
    image_size: int | None = None
    num_classes: int | None = None
    mean: list[float] | None = None
    std: list[float] | None = None
    loader: Loader = Loader.auto
    # DataLoader workers (null: one per usable core, at most 8, shared among torchrun's processes).
    workers: int | None = checked(None, FROM_ZERO.or_null())
    cache: bool = True  # keep the decoded images in cache_dir (memory-mapped)
    cache_dir: str = "data/cache"
    # loader=auto decodes into memory up to this size (all splits together), streams beyond it.
    cache_max_gb: float = checked(4.0, Number(">= 0", unit="GiB"))
    # (A builder stopped or hung would hold it for ever; a big folder's first build takes minutes.)
    cache_timeout: float = checked(
        3600.0,
        SECONDS.but(means="how long to wait for another process building the same cache entry"),
    )


@dataclass
class ImageFolderDatasetConfig(UserDatasetConfig):
    root: str = MISSING  # DIR/train/<class>/*, DIR/test/<class>/*, optionally DIR/val/<class>/*
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
    data_seed: int = 0  # apart from the training seed, so the images stay fixed


@dataclass
class CsvDatasetConfig(DatasetConfig):
    """A CSV of numbers to predict: every column but `target` a feature, a 1x1 image's channel."""

    path: str | None = None  # null: the shipped diabetes sample (experiments/sample_data/diabetes/)
    target: str = "progression"
    test_fraction: float = checked(
        0.2, Number("(0, 1)", means="the share of the rows drawn for the test split")
    )
    split_seed: int = 0
    channels: int | None = None
    image_size: int | None = 1
    num_classes: int | None = 1
    mean: list[float] | None = None
    std: list[float] | None = None
    target_mean: list[float] | None = None
    target_std: list[float] | None = None


@dataclass
class DeviceConfig:
    name: DeviceName = MISSING
    # cuda's GPU (null: the current one, or a free one in a parallel sweep); device=cuda:N sets it.
    index: int | None = None
    # dp's GPUs (null: all; batches go to the first); ddp's: LOCAL_RANK r takes ids[r] (null: r).
    ids: list[int] | None = None
    # CUDA_VISIBLE_DEVICES before CUDA starts (among those a scheduler allows), numbered from 0.
    visible: list[int] | None = checked(
        None, Numbers(FROM_ZERO, means="GPUs are numbered from 0").or_null()
    )
    # ddp's processes in all (null: as many as torchrun or srun started). A SLURM sweep's job
    # asks for them, so that a sweep can vary them: device.processes=1,2,4.
    processes: int | None = checked(
        None,
        FROM_ONE.but(means="processes training the model together").or_null(
            "as many as torchrun or srun started"
        ),
    )
    timeout: float = checked(
        300.0, SECONDS.but(means="how long joining the processes, or any collective, waits")
    )
    # A second peak for MFU beside the measured one: what tables that quote datasheets divide by.
    peak_flops: float | None = checked(
        None,
        Number(
            "> 0",
            unit="FLOP/s",
            means="one device's peak in the run's precision (an H100 SXM's in bf16: 9.895e14)",
        ).or_null("the GPU's datasheet's, where listed"),
    )


@dataclass
class PlacementConfig:
    name: str = MISSING
    _target_: str = MISSING


@dataclass
class OptimizerConfig:
    name: str = MISSING
    _target_: str = MISSING
    _partial_: bool = True  # built with the model's parameters at run time
    lr: float = checked(MISSING, Number(">= 0"))
    weight_decay: float = checked(0.0, Number(">= 0"))
    # Normalization layers' and biases' decay (null: weight_decay; 0 as torchvision's recipes).
    norm_weight_decay: float | None = checked(
        None, Number(">= 0").or_null("optimizer.weight_decay")
    )
    bias_weight_decay: float | None = checked(
        None, Number(">= 0").or_null("optimizer.weight_decay")
    )
    # The step fused into one kernel: null on GPUs, true on the CPU too (torch 2.4+), false never.
    fused: bool | None = None


@dataclass
class SGDConfig(OptimizerConfig):
    _target_: str = "torch.optim.SGD"
    momentum: float = checked(0.0, MOMENTUM)
    nesterov: bool = False  # needs momentum > 0


@dataclass
class AdamConfig(OptimizerConfig):
    _target_: str = "torch.optim.Adam"
    # (A beta of 1 would never take a gradient in.)
    betas: list[float] = checked(
        rule=Numbers(
            SHARE,
            count=2,
            means="the shares of the averages of the gradients and of their squares kept at each "
            "step (e.g. [0.9, 0.999])",
        ),
        factory=lambda: [0.9, 0.999],
    )


@dataclass
class AdamWConfig(AdamConfig):
    _target_: str = "torch.optim.AdamW"
    weight_decay: float = 0.01


@dataclass
class RMSpropConfig(OptimizerConfig):
    _target_: str = "torch.optim.RMSprop"
    alpha: float = checked(
        0.99, SHARE.but(means="the share of the average of the squared gradients kept (e.g. 0.99)")
    )
    # (0 would divide a gradient of 0 by 0.)
    eps: float = checked(
        1e-8, Number("> 0", means="added to the divisor of every step (e.g. 1e-08)")
    )
    momentum: float = checked(0.0, MOMENTUM)


@dataclass
class SchedulerConfig:
    """`_target_` is built with the optimizer and the number of times it is stepped in the run."""

    name: str = checked(MISSING, text())
    _target_: str = MISSING
    _partial_: bool = True
    interval: Interval = Interval.epoch
    # A linear rise from lr * start_factor to lr before the schedule (a share of an epoch: step).
    warmup_epochs: float = checked(0.0, Number(">= 0", unit="epochs", means="its length (0: none)"))
    start_factor: float = checked(
        0.01, Number("(0, 1]", means="the share of the lr the warm-up starts from")
    )


@dataclass
class StepSchedulerConfig(SchedulerConfig):
    milestones: list[float] = checked(
        rule=Numbers(Number("(0, 1]"), means="shares of the run"), factory=lambda: [0.5, 0.75]
    )
    gamma: float = 0.1  # the lr's factor at each milestone


@dataclass
class CosineSchedulerConfig(SchedulerConfig):
    interval: Interval = Interval.step
    min_lr: float = 0.0  # at the end of the run


@dataclass
class WarmupCosineSchedulerConfig(CosineSchedulerConfig):
    warmup_fraction: float = checked(0.1, SHARE.but(means="the share of the run spent warming up"))


@dataclass
class OneCycleSchedulerConfig(SchedulerConfig):
    interval: Interval = Interval.step
    max_lr: float | None = None  # the peak (null: the optimizer's lr)
    pct_start: float = checked(
        0.3, Number("(0, 1)", means="the share of the run spent rising to max_lr")
    )


@dataclass
class TrackerConfig:
    """A tracker's class (`experiments.records.tracker`), given the run folder."""

    _target_: str = MISSING


@dataclass
class TensorBoardTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.tensorboard.TensorBoard"


@dataclass
class CsvTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.csv_file.CsvFile"


# A tracker call's wait before a run goes on without it: MLflow's new store on a busy host fits.
TRACKER_TIMEOUT = 30.0


@dataclass
class MlflowTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.mlflow_run.MlflowRun"
    tracking_uri: str | None = None  # null: MLFLOW_TRACKING_URI, else outputs/mlflow.db
    experiment: str = "runs"  # of runs outside a sweep (a sweep's is named by its folder)
    timeout: float = checked(
        TRACKER_TIMEOUT,
        SECONDS.but(means="how long a run waits on MLflow before going on without it"),
    )


@dataclass
class WandbTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.wandb_run.WandbRun"
    project: str = "experiments"
    entity: str | None = None  # null: the account's default
    timeout: float = checked(
        TRACKER_TIMEOUT, SECONDS.but(means="how long a run waits on W&B before going on without it")
    )


@dataclass
class CustomTaskConfig:
    """task=custom task._target_=my_tasks.Task (docs/tasks.md); a shipped task's is free-form."""

    name: str = "custom"
    _target_: str = MISSING
    # What it measures on val and test, each with its better way, the first leading:
    # task.metrics='{mae: min, within_25: max}'. (Any: Hydra refuses a typed dict's new keys.)
    metrics: Any = MISSING


@dataclass
class EarlyStoppingConfig:
    # Stop once trainer.monitor has not improved by more than min_delta for this many epochs.
    patience: int | None = checked(None, FROM_ONE.or_null())
    min_delta: float = checked(0.0, Number(">= 0"))


@dataclass
class EmaConfig:
    # An average of the weights used in the model's stead (training.ema): the share kept a step.
    decay: float | None = checked(
        None,
        Number("(0, 1)", means="the share kept at each optimizer step (e.g. 0.9999)").or_null(
            "no average"
        ),
    )
    every: int = checked(1, FROM_ONE)  # optimizer steps between updates
    # Steps over which the decay rises from 0, so the average leaves the initial weights.
    warmup_steps: int = checked(0, FROM_ZERO)


# Limits of the evaluation to a number of images of each split, or a share of each.
IMAGES = Number(">= 1", whole=True, unit="images").or_null()
SPLIT = Number("(0, 1]").or_null()


@dataclass
class TrainerConfig:
    epochs: int = checked(10, FROM_ONE)
    # One optimizer step's batch (all processes together), or auto: a power of two that trains on
    # the device, chosen by auto_batch from those its search timed. A saved config's: the batch
    # trained.
    batch_size: Any = checked(
        64,
        BATCH.or_(AUTO_BATCH, "a batch its search on the device chooses, by trainer.auto_batch"),
        saved=BATCH.but(means="the batch its run trained with (its search's, for auto)"),
    )
    # (A CPU swaps rather than fails: the search needs a bound of peak resident memory.)
    memory_budget_gb: float = checked(
        4.0, Number("> 0", unit="GiB", means="the process's peak memory the CPU's search allows")
    )
    auto_batch: AutoBatch = AutoBatch.knee
    auto_batch_halvings: int = checked(0, FROM_ZERO)  # (auto_batch=largest's)
    auto_batch_min_steps: int = checked(
        20, FROM_ONE.but(means="the fewest optimizer steps an epoch auto_batch=knee's batch leaves")
    )
    seed: int = checked(0, SEED)
    deterministic: bool = False  # only deterministic algorithms: slower on some GPU ops
    cudnn_benchmark: bool = False  # not with deterministic; off until measured on a GPU
    checkpoint_every: int = checked(1, FROM_ONE)  # epochs between checkpoints/last.pt saves
    threads: int | None = checked(None, FROM_ONE.or_null())  # torch's CPU threads (null: cores)
    precision: Precision = Precision.fp32
    channels_last: bool | None = None  # null: on the CPU only (docs/speed.md)
    compile: str | None = None  # torch.compile's backend (e.g. inductor; null: eager)
    # Inductor's mode (null: its default); compiling stays out of images/s (compile_seconds).
    compile_mode: str | None = None
    keep_freed_memory: bool = True  # let glibc's malloc keep freed memory (Linux)
    log_interval: int = checked(20, FROM_ONE)  # training steps between logged losses
    # Stop each epoch's training after this many steps (null: all).
    limit_train_batches: int | None = checked(None, FROM_ONE.or_null())
    # Train on the same N batches every epoch (debug=overfit): a right model drives the loss to 0.
    overfit_batches: int | None = checked(None, FROM_ONE.or_null())
    # Evaluate on this many images of each split, or this share (null: all), whatever the batch.
    limit_eval_images: int | None = checked(
        None, IMAGES.but(means="a share is trainer.limit_eval_fraction=0.2")
    )
    limit_eval_fraction: float | None = checked(
        None, SPLIT.but(means="a number is trainer.limit_eval_images=N")
    )
    # The validation metric that selects the epoch (checkpoints/best.pt); null: the task's first.
    monitor: str | None = checked(None, text("the name of a validation metric").or_null())
    monitor_mode: Mode = checked(Mode.auto, one_of([mode.name for mode in Mode]))
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    gradient_clip: float | None = checked(
        None, Number("> 0", means="the gradients' largest norm").or_null("no clipping")
    )
    label_smoothing: float = checked(0.0, SHARE)  # of the training loss only
    confusion_matrix: bool = True  # the test split's at the selected epoch (up to 100 classes)
    stop_on_divergence: bool = True  # fail the run once the training loss is not finite
    # Record the training seconds until the task's metric (null: its first) first reaches
    # target_value on the validation split (else test); target_accuracy=0.5 says it for accuracy.
    target_metric: str | None = None
    target_value: float | None = checked(
        None, Number(means="the value of trainer.target_metric to reach").or_null()
    )
    target_accuracy: float | None = checked(
        None, Number("(0, 1]", means="a share of the images (e.g. 0.5 for 50%)").or_null()
    )
    measure_peak_flops: bool = False  # measure the matmul peak (for MFU) afresh, not cached
    profile: bool = False  # torch.profiler over steps 3 to 5 of the first epoch, into profile/
    accumulate_batches: int = checked(1, FROM_ONE)  # batches added up per optimizer step
    sync_batchnorm: bool = False  # device=ddp on GPUs: SyncBatchNorm
    ema: EmaConfig = checked(
        rule=settings("the moving average's settings", EmaConfig), factory=EmaConfig
    )


@dataclass
class TrainSchema:
    model: Any = MISSING  # Any: a model of one's own may bring fields of its own
    dataset: DatasetConfig = MISSING
    task: Any = MISSING  # Any, as model
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    optimizer: OptimizerConfig = MISSING
    scheduler: SchedulerConfig = MISSING
    trainer: TrainerConfig = MISSING
    # Where the numbers go besides metrics.jsonl: tracker=[tensorboard,csv]; tracker=[] for none.
    tracker: dict[str, TrackerConfig] = field(default_factory=dict)
    # Callbacks of one's own by name: +callbacks.stop._target_=my.LossBelow (docs/callbacks.md).
    callbacks: dict[str, Any] = field(default_factory=dict)
    optimized_metric: str | None = None  # returned to a sweeper (val_loss, ...; null: nothing)
    resume: str | None = None  # a run folder to continue in, from its last checkpoint
    replay: str | None = None  # a run folder whose overrides run again, in a new folder


@dataclass
class ServingConfig:
    """How eval.py benchmark=true serves the model while it is timed (`run.inference_benchmark`)."""

    # The batch throughput is measured at (null: the batch its run trained with).
    batch_size: int | None = checked(None, BATCH.or_null("the batch its run trained with"))
    # Timed calls at batch 1 (p99 needs 100 at least), after warmup_calls untimed ones.
    latency_calls: int = checked(100, Number(">= 100", whole=True, means="fewer leave p99 a guess"))
    warmup_calls: int = checked(10, FROM_ZERO)
    # Rounds (each figure's median, min, max): the latency calls split among them, then
    # throughput's, each of whole batches taking round_seconds at least.
    rounds: int = checked(5, FROM_ONE)
    round_seconds: float = checked(0.5, SECONDS)


@dataclass
class EvalSchema:
    ckpt: str = MISSING  # a run folder (its checkpoints/last.pt) or a checkpoint file
    # None: the checkpoint's; model=custom model._target_=<module>.<name> allows one's own class.
    model: Any = None
    task: Any = None  # None: the checkpoint's; task._target_= allows one's own class
    dataset: DatasetConfig | None = None  # None: the checkpoint's
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    batch_size: int = checked(256, FROM_ONE)
    # Test images, or a share of them; both null: those its run was tested on, on its dataset.
    limit_images: int | None = checked(None, IMAGES.but(means="a share is limit_fraction=0.2"))
    limit_fraction: float | None = checked(None, SPLIT.but(means="a number is limit_images=N"))
    # How the model computes, for the accuracy and the benchmark alike, as the trainer's keys.
    precision: Precision = Precision.fp32
    channels_last: bool | None = None
    compile: str | None = None
    compile_mode: str | None = None
    threads: int | None = checked(None, FROM_ONE.or_null())
    benchmark: bool = False  # also time the model (`serving`): latency, throughput, energy
    serving: ServingConfig = field(default_factory=ServingConfig)
    seed: int = checked(0, SEED)  # which test images the benchmark feeds
    tracker: dict[str, TrackerConfig] = field(default_factory=dict)


# The schemas by the name an option's defaults list gives them (`/model_schema@_here_`).
SCHEMAS: dict[str, type] = {
    "train_schema": TrainSchema,
    "eval_schema": EvalSchema,
    "model_schema": ModelConfig,
    "mlp_schema": MLPConfig,
    "unet_schema": UNetConfig,
    "torchvision_model_schema": TorchvisionModelConfig,
    "timm_model_schema": TimmModelConfig,
    "dataset_schema": DatasetConfig,
    "torchvision_dataset_schema": TorchvisionDatasetConfig,
    "user_dataset_schema": UserDatasetConfig,
    "image_folder_dataset_schema": ImageFolderDatasetConfig,
    "synthetic_dataset_schema": SyntheticDatasetConfig,
    "csv_dataset_schema": CsvDatasetConfig,
    "device_schema": DeviceConfig,
    "placement_schema": PlacementConfig,
    "sgd_schema": SGDConfig,
    "adam_schema": AdamConfig,
    "adamw_schema": AdamWConfig,
    "rmsprop_schema": RMSpropConfig,
    "scheduler_schema": SchedulerConfig,
    "step_scheduler_schema": StepSchedulerConfig,
    "cosine_scheduler_schema": CosineSchedulerConfig,
    "warmup_cosine_scheduler_schema": WarmupCosineSchedulerConfig,
    "onecycle_scheduler_schema": OneCycleSchedulerConfig,
    "trainer_schema": TrainerConfig,
    "custom_task_schema": CustomTaskConfig,
    "tensorboard_tracker_schema": TensorBoardTrackerConfig,
    "csv_tracker_schema": CsvTrackerConfig,
    "mlflow_tracker_schema": MlflowTrackerConfig,
    "wandb_tracker_schema": WandbTrackerConfig,
}


def is_users_data(dataset: DictConfig) -> bool:
    """Told by its fields, which a checkpoint's plain config keeps too."""
    return "loader" in dataset


def is_table(dataset: DictConfig) -> bool:
    """dataset=csv: rows of numbers, not images."""
    return "target" in dataset and "test_fraction" in dataset


def is_image_folder(dataset: DictConfig) -> bool:
    return is_users_data(dataset) and "root" in dataset
