"""Typed schemas for every config group: each YAML option starts from its schema (e.g.
`defaults: [/model_schema@_here_]`) and holds only what differs from it, so a default lives in
one place, and a wrong type, an unknown key or a value outside a closed choice fails while Hydra
composes the config, before any run folder exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import II, MISSING, DictConfig

from experiments.config.checks import Number, Numbers, checked, one_of, settings, text, texts
from experiments.config.choices import (
    AUTO_BATCH,
    AugmentPolicy,
    DeviceName,
    Interval,
    Loader,
    Mode,
    Precision,
    Preload,
)

# The rules several fields keep.
FROM_ONE, FROM_ZERO = Number(">= 1", whole=True), Number(">= 0", whole=True)
SHARE = Number("[0, 1)")
SECONDS = Number("> 0", unit="seconds")
SEED = Number(f"[0, {2**64 - 1}]", whole=True)  # what torch's generators take
# The largest batch a run trains or serves with: more images than a training split the project
# reads holds (a batch larger than its split trains on all of it), so a number beyond it is a
# slip, which would otherwise be drawn and held whole (a benchmark's inputs; 10**9 of them are
# 8 GB of indices alone).
LARGEST_BATCH = 2**24
BATCH = Number(f"[1, {LARGEST_BATCH}]", whole=True)
# RandAugment's ops (`data.policies.RANDAUGMENT`): an image's rounds each draw one of them, so more
# rounds than ops only repeat ops, at a round's cost each.
RANDAUGMENT_OPS = 14
# Mixup's and CutMix's largest alpha: Beta(1000, 1000) draws within 0.04 of an even mix 999 times
# in 1000, and a larger alpha nearer still; Python's draw from Beta never ends from half the float
# maximum (9e307) on.
MOST_MIXING_ALPHA = 1000.0
MIXING = Number(
    f"[0, {MOST_MIXING_ALPHA:g}]", means="Beta(alpha, alpha) draws the shares (0: off; e.g. 0.2)"
)
# A share of the last step kept in the next: one of 1 or more never lets a step go (the steps add
# up for good).
MOMENTUM = SHARE.but(means="the share of the last step kept in the next (0: none; e.g. 0.9)")
# Fewer timed calls than this leave p99 a guess: of 100, it lies between the two slowest.
LEAST_LATENCY_CALLS = 100


@dataclass
class ModelConfig:
    name: str = checked(MISSING, text())
    _target_: str = MISSING
    # Sized from the dataset, so every model runs on every dataset its layers can take.
    in_channels: int = II("dataset.channels")
    image_size: int = II("dataset.image_size")
    num_classes: int = II("dataset.num_classes")
    # A state dict file to start from (torch.save(model.state_dict(), PATH)); null: untrained.
    weights: str | None = None
    # true: load the weights' tensors that fit and leave the others as built (fine-tuning:
    # ImageNet weights with a new classifier for 10 classes); false: every tensor must fit.
    weights_partial: bool = False


@dataclass
class MLPConfig(ModelConfig):
    hidden_sizes: list[int] = MISSING


@dataclass
class UNetConfig(ModelConfig):
    # Channels of the first level; each level down doubles them.
    base_channels: int = 16
    # Levels down (and back up): the image size must divide by 2**depth.
    depth: int = 2


@dataclass
class TorchvisionModelConfig(ModelConfig):
    # Any name torchvision.models.list_models(module=torchvision.models) gives.
    arch: str = "resnet18"


@dataclass
class TimmModelConfig(ModelConfig):
    # Any name timm.list_models() gives (timm is an optional extra: pip install
    # 'experiments[timm]').
    arch: str = "resnet18"
    # Start a new run from timm's default weights for the architecture, fetched from the Hugging
    # Face Hub (or its cache); false: untrained, nothing fetched. (`weights` stays a file of one's
    # own, as every model's.)
    pretrained: bool = False


@dataclass
class AugmentConfig:
    # Random crop after padding each side by this many pixels (0: no crop).
    crop_padding: int = checked(0, FROM_ZERO)
    # Random horizontal flip of half the images.
    flip: bool = False
    # An automatic augmentation policy, per image (null: none).
    policy: AugmentPolicy | None = None
    # policy=randaugment's ops per image, and their magnitude (of 31 steps, 0 to 30).
    num_ops: int = checked(
        2, Number(f"[1, {RANDAUGMENT_OPS}]", whole=True, means="at most RandAugment's ops")
    )
    magnitude: int = checked(9, Number("[0, 30]", whole=True, means="a step of RandAugment's 31"))
    # The probability of erasing a random rectangle of each normalized image (0: never).
    erasing: float = checked(0.0, Number("[0, 1]"))
    # Mixup's and CutMix's Beta(alpha, alpha) (0: off); with both, one of the two per batch.
    mixup_alpha: float = checked(0.0, MIXING)
    cutmix_alpha: float = checked(0.0, MIXING)


@dataclass
class DatasetConfig:
    name: str = checked(MISSING, text())
    # Null only where the data tells (UserDatasetConfig).
    channels: int | None = MISSING
    image_size: int | None = checked(MISSING, FROM_ONE.or_null())
    num_classes: int | None = checked(MISSING, FROM_ONE.or_null())
    # Class names in label order; null names them by number.
    classes: list[str] | None = checked(None, texts("the classes' names, in label order").or_null())
    # Per-channel normalization: x = (pixel / 255 - mean) / std; one value serves every channel.
    mean: list[float] | None = checked(rule=Numbers().or_null(), factory=lambda: [0.5])
    std: list[float] | None = checked(
        rule=Numbers(Number("> 0"), means="pixels are divided by them").or_null(),
        factory=lambda: [0.5],
    )
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
    val_fraction: float = checked(
        0.0, SHARE.but(means="the share of the training images held out for validation")
    )
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
    workers: int | None = checked(None, FROM_ZERO.or_null())
    # Keep the decoded images in cache_dir (memory-mapped), so only the first run decodes them.
    cache: bool = True
    # Relative to the working directory.
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
class CsvDatasetConfig(DatasetConfig):
    """A CSV file of numbers (dataset=csv, of values to predict): each row an example, every
    column but `target` a feature. Its features are the "channels" of a 1x1 image, so the
    models that flatten their input take them; their mean and std, and the target's, are the
    training split's."""

    # null: the shipped diabetes sample (experiments/sample_data/diabetes/); relative to the
    # working directory.
    path: str | None = None
    target: str = "progression"
    # Share of the rows drawn (with split_seed) for the test split.
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
    # With `cuda`: the GPU's index (null: the current one, or a free one in a parallel sweep).
    # `device=cuda:N` sets it.
    index: int | None = None
    # GPUs for `dp` (null: every GPU; batches go to the first), or for `ddp` (the process with
    # LOCAL_RANK r takes ids[r]; null: GPU r).
    ids: list[int] | None = None
    # The GPUs this process may use, e.g. [2, 3]: CUDA_VISIBLE_DEVICES before CUDA starts, the
    # GPUs numbered from 0 after. Counted among those a scheduler's CUDA_VISIBLE_DEVICES allows.
    visible: list[int] | None = checked(
        None, Numbers(FROM_ZERO, means="GPUs are numbered from 0").or_null()
    )
    # With `ddp`.
    timeout: float = checked(
        300.0, SECONDS.but(means="how long joining the processes, or any collective, waits")
    )


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
    lr: float = checked(MISSING, Number(">= 0"))
    weight_decay: float = checked(0.0, Number(">= 0"))
    # The weight decay of normalization layers' weights and biases (BatchNorm, LayerNorm,
    # GroupNorm, ...), and of every other layer's biases; null: weight_decay. 0 leaves them out,
    # as torchvision's reference recipes do (--norm-weight-decay 0.0, --bias-weight-decay).
    norm_weight_decay: float | None = checked(
        None, Number(">= 0").or_null("optimizer.weight_decay")
    )
    bias_weight_decay: float | None = checked(
        None, Number(">= 0").or_null("optimizer.weight_decay")
    )
    # The step fused into one kernel (torch's Adam, AdamW, SGD, Adagrad): null fuses on GPUs,
    # where fp16's gradient scaler then never makes the host wait for the GPU; true fuses on the
    # CPU too (torch 2.4+); false never (docs/speed.md).
    fused: bool | None = None


@dataclass
class SGDConfig(OptimizerConfig):
    _target_: str = "torch.optim.SGD"
    momentum: float = checked(0.0, MOMENTUM)
    # Nesterov's momentum (needs momentum > 0), as the reference recipes' SGD.
    nesterov: bool = False


@dataclass
class AdamConfig(OptimizerConfig):
    _target_: str = "torch.optim.Adam"
    # An average kept whole (a beta of 1) never takes a gradient in.
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
    # Adam with the weight decay apart from the gradient (decoupled), torch's default decay.
    _target_: str = "torch.optim.AdamW"
    weight_decay: float = 0.01


@dataclass
class RMSpropConfig(OptimizerConfig):
    _target_: str = "torch.optim.RMSprop"
    # The moving average's smoothing constant of the squared gradients, and the term added to
    # their root (the reference recipes' MobileNet and EfficientNet: alpha 0.9, eps 0.0316).
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
    """A learning-rate schedule: `_target_` is built with the optimizer and the number of times
    it will be stepped in the whole run (epochs, or optimizer steps)."""

    name: str = checked(MISSING, text())
    _target_: str = MISSING
    _partial_: bool = True
    interval: Interval = Interval.epoch
    # Epochs of a linear rise from lr * start_factor to lr before the schedule, which then runs
    # over the rest of the run (0: none). Under interval=step, a share of an epoch is taken too.
    warmup_epochs: float = checked(0.0, Number(">= 0", unit="epochs", means="its length (0: none)"))
    start_factor: float = checked(
        0.01, Number("(0, 1]", means="the share of the lr the warm-up starts from")
    )


@dataclass
class StepSchedulerConfig(SchedulerConfig):
    # Where the learning rate is multiplied by gamma, as shares of the run.
    milestones: list[float] = checked(
        rule=Numbers(Number("(0, 1]"), means="shares of the run"), factory=lambda: [0.5, 0.75]
    )
    gamma: float = 0.1


@dataclass
class CosineSchedulerConfig(SchedulerConfig):
    interval: Interval = Interval.step
    # The learning rate at the end of the run.
    min_lr: float = 0.0


@dataclass
class WarmupCosineSchedulerConfig(CosineSchedulerConfig):
    # Share of the run spent rising linearly from lr * start_factor to lr (its warm-up, which
    # scheduler.warmup_epochs gives any other schedule in epochs).
    warmup_fraction: float = checked(0.1, SHARE.but(means="the share of the run spent warming up"))


@dataclass
class OneCycleSchedulerConfig(SchedulerConfig):
    interval: Interval = Interval.step
    # The peak (null: the optimizer's lr; one cycle is often run with a peak several times the
    # lr a constant schedule could take, e.g. 0.1 for Tudui with sgd_momentum).
    max_lr: float | None = None
    # Share of the run spent rising to max_lr.
    pct_start: float = checked(
        0.3, Number("(0, 1)", means="the share of the run spent rising to max_lr")
    )


@dataclass
class TrackerConfig:
    """A tracker of the `tracker` group (`experiments.records.tracker`): its class, given the
    run folder."""

    _target_: str = MISSING


@dataclass
class TensorBoardTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.tensorboard.TensorBoard"


@dataclass
class CsvTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.csv_file.CsvFile"


# How long a run waits on one call to a tracker's library (seconds) before it goes on without the
# tracker (`records.guard`): enough for MLflow to make a new SQLite store on a busy machine (6 s on
# two cores that four processes share, 16 s with ten) and for W&B to start online.
TRACKER_TIMEOUT = 30.0


@dataclass
class MlflowTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.mlflow_run.MlflowRun"
    # null: MLFLOW_TRACKING_URI, else a SQLite store in outputs/ (outputs/mlflow.db).
    tracking_uri: str | None = None
    # The experiment of runs outside a sweep (a sweep's jobs share one named by its folder).
    experiment: str = "runs"
    timeout: float = checked(
        TRACKER_TIMEOUT,
        SECONDS.but(means="how long a run waits on MLflow before going on without it"),
    )


@dataclass
class WandbTrackerConfig(TrackerConfig):
    _target_: str = "experiments.records.wandb_run.WandbRun"
    project: str = "experiments"
    # null: the account's default entity (user or team).
    entity: str | None = None
    # (One call: its start included.)
    timeout: float = checked(
        TRACKER_TIMEOUT, SECONDS.but(means="how long a run waits on W&B before going on without it")
    )


@dataclass
class CustomTaskConfig:
    """A task of one's own: task=custom task._target_=my_tasks.Task (docs/tasks.md): what a
    batch holds, the loss and the metrics (`experiments.training.tasks`). A shipped task's
    option is free-form, its class's arguments: its class declares its metrics."""

    name: str = "custom"
    _target_: str = MISSING
    # What it measures on the validation and test splits after each epoch, yours to declare,
    # task.metrics='{mae: min, within_25: max}', each with its better way, the first leading
    # (what trainer.monitor=auto selects by, the report's headline), its loss besides: its class
    # has a method of each name. (Any, not dict[str, Mode]: Hydra merges a dict typed on the
    # command line into a typed one, and refuses its new keys.)
    metrics: Any = MISSING


@dataclass
class EarlyStoppingConfig:
    # Stop when trainer.monitor has not improved by more than min_delta for this many epochs
    # (null: never). Needs a validation split.
    patience: int | None = checked(None, FROM_ONE.or_null())
    min_delta: float = checked(0.0, Number(">= 0"))


@dataclass
class EmaConfig:
    # Keep an exponential moving average of the model's weights and buffers (BatchNorm's
    # statistics), and evaluate, select and save it in the model's stead: the share of the
    # average kept at each optimizer step, in (0, 1), e.g. 0.9999 (about the last 10000 steps);
    # null: none. (experiments.training.ema; torchvision's --model-ema, timm's ModelEmaV3.)
    decay: float | None = checked(
        None,
        Number("(0, 1)", means="the share kept at each optimizer step (e.g. 0.9999)").or_null(
            "no average"
        ),
    )
    # Update the average every this many optimizer steps (keeping decay ** every of it).
    every: int = checked(1, FROM_ONE)
    # Raise the decay linearly from nearly 0 (a copy of the model) to decay over this many
    # optimizer steps, so that the average does not stay near the initial weights.
    warmup_steps: int = checked(0, FROM_ZERO)


# A limit of the evaluation to a number of images of each split, or to a share of each; the other
# limit is named.
IMAGES = Number(">= 1", whole=True, unit="images").or_null()
SPLIT = Number("(0, 1]").or_null()


@dataclass
class TrainerConfig:
    epochs: int = checked(10, FROM_ONE)
    # The batch of one optimizer step (of all processes together under torchrun), or auto: the
    # largest power of two that trains on the device (one real step per try: until a GPU runs
    # out of memory, or the process's peak memory passes memory_budget_gb on the CPU, or the
    # training split runs out), halved auto_batch_halvings times. The learning rate is as given.
    # (Any: a number or auto.) A saved config's is the batch its run trained with.
    batch_size: Any = checked(
        64,
        BATCH.or_(AUTO_BATCH, "the largest batch that trains on the device"),
        saved=BATCH.but(means="the batch its run trained with (its search's, for auto)"),
    )
    # The CPU's budget for batch_size=auto, in GiB of the process's peak resident memory (what
    # results.json records as peak_host_memory_mb): a CPU swaps rather than fails, so the search
    # needs a bound; 4 leaves most of a laptop's memory to the rest of it.
    memory_budget_gb: float = checked(
        4.0, Number("> 0", unit="GiB", means="the process's peak memory the CPU's search allows")
    )
    # With batch_size=auto, train at the largest batch halved this many times: a sweep over it
    # (experiment=batch_scaling) runs each device from a small batch up to its largest.
    auto_batch_halvings: int = checked(0, FROM_ZERO)
    seed: int = checked(0, SEED)
    # Only deterministic algorithms (and cuBLAS's fixed workspace): slower on some GPU ops.
    deterministic: bool = False
    # cuDNN times its convolution algorithms for each new input shape and keeps the fastest
    # (torch.backends.cudnn.benchmark); off, as in torch, until measured on a GPU (docs/speed.md,
    # bench/paired.py). Not with trainer.deterministic.
    cudnn_benchmark: bool = False
    # Save checkpoints/last.pt every this many epochs (and always after the last).
    checkpoint_every: int = checked(1, FROM_ONE)
    # CPU threads torch may use (null: torch's default, one per core); 1 suits parallel sweeps.
    threads: int | None = checked(None, FROM_ONE.or_null())
    precision: Precision = Precision.fp32
    # Model and input in channels-last memory format; null: on the CPU, where it measured much
    # faster (docs/speed.md), and off on GPUs, where it is not measured here.
    channels_last: bool | None = None
    # torch.compile the model with this backend (e.g. inductor; null: eager).
    compile: str | None = None
    # Inductor's mode (null: its default): reduce-overhead captures CUDA graphs (a GPU's fix for
    # launch-bound small models), max-autotune tries kernels and captures them, and
    # max-autotune-no-cudagraphs tries kernels alone (the CPU's). Compiling stays out of
    # images/s (results.json compile_seconds).
    compile_mode: str | None = None
    # Let glibc's malloc keep freed memory for reuse (Linux): much faster on the CPU.
    keep_freed_memory: bool = True
    # Training steps between logged losses (console, metrics.jsonl, TensorBoard).
    log_interval: int = checked(20, FROM_ONE)
    # Stop each epoch's training after this many batches (null: all): a number of steps,
    # whatever the batch size (with trainer.accumulate_batches=K, a K-th of it).
    limit_train_batches: int | None = checked(None, FROM_ONE.or_null())
    # Train on the same N batches every epoch (null: the whole split, shuffled anew): drawn once
    # by trainer.seed, in the same order each time (debug=overfit). A model and loss that are
    # right drive their loss toward 0 on them; one that cannot has a bug.
    overfit_batches: int | None = checked(None, FROM_ONE.or_null())
    # Evaluate (validation and test) on this many images of each split, or on this fraction of
    # each, e.g. 0.2 (null: all; set one of the two): the same images whatever the batch size,
    # and for every run of the same data (drawn by a fixed seed: experiments.data.subset).
    limit_eval_images: int | None = checked(
        None, IMAGES.but(means="a share is trainer.limit_eval_fraction=0.2")
    )
    limit_eval_fraction: float | None = checked(
        None, SPLIT.but(means="a number is trainer.limit_eval_images=N")
    )
    # The validation metric that selects the run's epoch (checkpoints/best.pt), null: the task's
    # first (val_accuracy, val_rmse); with mode auto, the best value the task's way (the highest
    # accuracy, the lowest loss). Never a test metric.
    monitor: str | None = checked(None, text("the name of a validation metric").or_null())
    monitor_mode: Mode = checked(Mode.auto, one_of([mode.name for mode in Mode]))
    early_stopping: EarlyStoppingConfig = field(default_factory=EarlyStoppingConfig)
    # Clip the gradients' total norm to this before each step (null: no clipping).
    gradient_clip: float | None = checked(
        None, Number("> 0", means="the gradients' largest norm").or_null("no clipping")
    )
    # Label smoothing of the training loss (validation and test losses are plain cross-entropy).
    label_smoothing: float = checked(0.0, SHARE)
    # At the end, draw the test split's confusion matrix at the selected epoch (TensorBoard and
    # confusion_matrix.png; up to 100 classes). Its counts are in the checkpoint either way.
    confusion_matrix: bool = True
    # End the run as failed (keeping its last checkpoint) once the training loss is not finite
    # (nan or inf; checked at each log interval, with no extra wait for the device); false
    # trains on, to see what a diverged run does.
    stop_on_divergence: bool = True
    # Record the training seconds (evaluation excluded) until a metric of the task on the
    # validation split (else test) first reaches target_value: target_metric (null: the task's
    # first: accuracy, rmse) at or above it, or at or below it for a metric better low (null:
    # not measured). target_accuracy=0.5 is target_metric=accuracy target_value=0.5.
    target_metric: str | None = None
    target_value: float | None = checked(
        None, Number(means="the value of trainer.target_metric to reach").or_null()
    )
    target_accuracy: float | None = checked(
        None, Number("(0, 1]", means="a share of the images (e.g. 0.5 for 50%)").or_null()
    )
    # Every run divides its training FLOP/s by its devices' matrix-product peak in the precision
    # its model computes in (its MFU), measured once per machine and kept in the user's cache
    # (measuring.peak_cache; python -m experiments.devices lists them). true: measure it afresh (a
    # fraction of a second), and keep that.
    measure_peak_flops: bool = False
    # Profile optimizer steps 3 to 5 of the first epoch with torch.profiler: the trace in
    # profile/ of the run folder (TensorBoard, chrome://tracing), the top operators in the log.
    profile: bool = False
    # Add up the gradients of this many batches before each optimizer step: a step of
    # batch_size * accumulate_batches images, in the memory of batch_size.
    accumulate_batches: int = checked(1, FROM_ONE)
    # Under device=ddp on GPUs: BatchNorm layers normalize by the statistics of every process's
    # images (torch's SyncBatchNorm), not each process's share alone.
    sync_batchnorm: bool = False
    ema: EmaConfig = checked(
        rule=settings("the moving average's settings", EmaConfig), factory=EmaConfig
    )


@dataclass
class TrainSchema:
    # Any: a model of the user's own may bring fields of its own (the shipped ones are typed).
    model: Any = MISSING
    dataset: DatasetConfig = MISSING
    # Any: a task of the user's own may bring fields of its own (the shipped ones are typed).
    task: Any = MISSING
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    optimizer: OptimizerConfig = MISSING
    scheduler: SchedulerConfig = MISSING
    trainer: TrainerConfig = MISSING
    # Where the run's numbers go besides metrics.jsonl, by tracker (tracker=tensorboard, csv, or
    # a list of them: tracker=[tensorboard,csv]; tracker=[] for none).
    tracker: dict[str, TrackerConfig] = field(default_factory=dict)
    # Callbacks of one's own, by name, each a subclass of experiments.callbacks.Callback:
    # +callbacks.stop._target_=my_callbacks.LossBelow +callbacks.stop.loss=2.2 (docs/callbacks.md).
    callbacks: dict[str, Any] = field(default_factory=dict)
    # What a run returns to a sweeper (hparams_search=optuna optimizes it, minimizing a loss):
    # val_accuracy or val_loss at the selected epoch, the final train_loss, or the run's
    # train_images_per_second (null: nothing).
    optimized_metric: str | None = None
    # A run folder to continue from its last checkpoint, in that folder (resume=<run folder>).
    resume: str | None = None
    # The run folder this run repeats (replay=<run folder>): its overrides, a new folder.
    replay: str | None = None


@dataclass
class ServingConfig:
    """eval.py benchmark=true: how the model is served while it is timed
    (`run.inference_benchmark`)."""

    # The batch throughput is measured at (null: the batch its run trained with).
    batch_size: int | None = checked(None, BATCH.or_null("the batch its run trained with"))
    # Timed calls at batch 1 (p99 needs 100 at least), after warmup_calls untimed ones (the
    # first calls allocate, compile, choose algorithms).
    latency_calls: int = checked(
        100, Number(f">= {LEAST_LATENCY_CALLS}", whole=True, means="fewer leave p99 a guess")
    )
    warmup_calls: int = checked(10, FROM_ZERO)
    # Throughput: this many rounds (their median, min and max), each of whole batches that
    # take round_seconds at least.
    rounds: int = checked(5, FROM_ONE)
    round_seconds: float = checked(0.5, SECONDS)


@dataclass
class EvalSchema:
    # A run folder (its checkpoints/last.pt) or a checkpoint file.
    ckpt: str = MISSING
    # None: the model the checkpoint names; model=custom model._target_=<module>.<name> builds
    # that class of the user's own for its weights (a file's targets are never built untyped).
    model: Any = None
    # None: the task the checkpoint names; task._target_=<module>.<name> allows that class of
    # the user's own, which the checkpoint's task names.
    task: Any = None
    # None: the dataset the checkpoint was trained on.
    dataset: DatasetConfig | None = None
    device: DeviceConfig = MISSING
    placement: PlacementConfig = MISSING
    batch_size: int = checked(256, FROM_ONE)
    # Evaluate on this many test images, or on this fraction of the test split (set one of the
    # two). Both null: the images its run was tested on (trainer.limit_eval_images or
    # trainer.limit_eval_fraction) where the dataset is its run's, else the whole split;
    # limit_fraction=1: the whole split.
    limit_images: int | None = checked(None, IMAGES.but(means="a share is limit_fraction=0.2"))
    limit_fraction: float | None = checked(None, SPLIT.but(means="a number is limit_images=N"))
    # How the model computes, for the accuracy and the benchmark alike (as the trainer's keys):
    # autocast precision, channels-last memory format (null: on the CPU), torch.compile's
    # backend (null: eager) and inductor's mode, and torch's CPU threads (null: one per core).
    precision: Precision = Precision.fp32
    channels_last: bool | None = None
    compile: str | None = None
    compile_mode: str | None = None
    threads: int | None = checked(None, FROM_ONE.or_null())
    # Also measure how fast the model answers (`serving`): latency, throughput, memory, energy.
    benchmark: bool = False
    serving: ServingConfig = field(default_factory=ServingConfig)
    # Which test images the benchmark feeds (drawn with it): its repeats, as trainer.seed is a
    # training run's (-m seed=0,1,2 gives the report's spread and verdicts).
    seed: int = checked(0, SEED)
    # Where the evaluation's numbers go besides results.json (as a training run's tracker).
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
    """Data of the user's own (an image folder, a source of torch Datasets), whose config may
    leave its shape, classes and statistics to the data. Told by its fields, which a
    checkpoint's plain config keeps too."""
    return "loader" in dataset


def is_table(dataset: DictConfig) -> bool:
    """dataset=csv: rows of numbers, not images. Told by its fields, as `is_users_data`."""
    return "target" in dataset and "test_fraction" in dataset


def is_image_folder(dataset: DictConfig) -> bool:
    """dataset=image_folder, or a variant of it."""
    return is_users_data(dataset) and "root" in dataset
