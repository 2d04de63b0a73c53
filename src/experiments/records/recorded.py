"""What results.json holds, as types, phase by phase. Without torch: the report reads them."""

from __future__ import annotations

import functools
from typing import Any, Literal, TypedDict, get_type_hints

from experiments.config.metric_names import TEST, VAL, TaskMetrics
from experiments.records.energy import EnergySummary
from experiments.records.speed import HostRecord, SpeedSummary
from experiments.training.time_to_accuracy import TimeToAccuracy


class DeviceRecord(TypedDict, total=False):
    requested: str | None
    used: str
    type: str
    index: int | None
    ids: list[int]  # DataParallel's GPUs


class ProcessRecord(TypedDict):
    host: str
    pid: int


class DataRecord(TypedDict, total=False):
    loader: str


class StoppedEarly(TypedDict):
    epoch: int
    reason: str


class ProfiledSteps(TypedDict):
    epoch: int
    first: int
    last: int


class _LargestBatch(TypedDict):
    largest: int
    trained: int
    halvings: int
    stopped_by: str  # "out of memory", "memory budget", "training split"
    tried: list[list]  # [batch, fits] pairs, in the order tried
    budget_gb: float | None  # the CPU's budget (None on a GPU)
    seconds: float


class BatchSearch(_LargestBatch, total=False):
    """How trainer.batch_size=auto found the batches the device takes, and chose one (older
    runs: the largest, halved, without the fields below)."""

    rule: Literal["knee", "largest"]  # trainer.auto_batch
    chosen_by: Literal["knee", "min steps", "largest"]  # `training.batch_choice`'s
    knee: int
    speeds: list[list]  # [batch, images/s] pairs: the median of each batch's timed steps
    min_steps: int  # trainer.auto_batch_min_steps
    steps_per_epoch: int  # of the batch trained, over the whole training split


class StartRecord(TypedDict, total=False):
    status: str  # running, completed, failed, interrupted (older runs: failed for interrupted)
    reason: str | None
    run_dir: str
    model: str | None
    dataset: str | None
    placement: str | None
    optimizer: str | None
    scheduler: str | None
    device: DeviceRecord  # the request; what was used, once setup has decided
    seed: int | None
    precision: str
    epochs: int | None
    batch_size: int | None  # of all processes together
    world_size: int
    per_process_batch_size: int | None
    accumulate_batches: int | None  # batches whose gradients make one optimizer step
    epochs_completed: int
    stopped_early: StoppedEarly | None
    resumed_after_epochs: list[int]
    replay_of: str | None
    started_at: str  # ISO 8601
    process: ProcessRecord
    environment: dict[str, Any]  # the versions that ran it


class SetupRecord(TypedDict, total=False):
    deterministic: bool
    keep_freed_memory: bool  # (with trainer.keep_freed_memory)
    device: DeviceRecord
    precision_note: str  # bf16 emulated, where the device lacks it
    channels_last: bool
    compile_mode: str  # (with trainer.compile_mode)
    data: DataRecord
    weights_left_as_built: list[str]  # (with model.weights_partial)
    model_parameters: int
    model_flops_per_image: int
    model_training_flops_per_image: int
    # One device's matrix-product peak in the model's precision, and the devices MFU divides by.
    device_peak_flops: float | None
    device_peak_precision: str | None
    peak_devices: int
    device_peak_measured: bool
    # One device's peak as given (device.peak_flops), else as its datasheet states it (none on a
    # CPU or an unlisted GPU): the peak that published MFU tables divide by.
    datasheet_peak_flops: float | None
    datasheet_peak_source: Literal["datasheet", "given"] | None
    datasheet_peak_of: str  # the GPU model ("H100 SXM"), or "device.peak_flops"
    # With trainer.batch_size=auto, the batch trained with (null at the start) and its search.
    batch_size: int
    per_process_batch_size: int
    batch_search: BatchSearch
    optimizer_fused: bool
    cudnn_benchmark: bool
    # The weights the validation and test numbers are of: "model", or "ema" (trainer.ema).
    evaluated_weights: Literal["model", "ema"]
    test_images: int
    test_split_images: int
    trackers: dict[str, str]  # each tracker's run, that a resume carries on
    trackers_begun_in: str  # the folder they were begun from (`records.tracker.TRACKED_IN`)
    stopped_early: StoppedEarly | None  # a resume's, found in its checkpoint's epochs


class EpochRecord(TypedDict, total=False):
    epochs_completed: int
    stopped_early: StoppedEarly | None
    profiled_steps: ProfiledSteps  # (the first epoch, with trainer.profile)


class FinishRecord(SpeedSummary, HostRecord, EnergySummary, total=False):
    """A finished training run's numbers besides its task's (`task_numbers`), and how it ended."""

    selected_epoch: int
    selected_by: str  # "val_accuracy (max)", or "final epoch (no validation split)"
    class_accuracy: dict[str, float | None]  # None: a class without test images
    train_loss: float | None  # (null: diverged)
    epoch_seconds: list[float]
    wait_share: float
    copy_share: float
    compute_share: float
    checkpoint: str
    best_checkpoint: str | None
    compile_seconds: float | None  # (None without trainer.compile)
    mfu: float | None  # a share of 1; None, with mfu_note, where the run beat the peak
    mfu_note: str
    mfu_datasheet: float | None  # against datasheet_peak_flops; None without one, or beaten
    mfu_datasheet_note: str
    time_to_accuracy: TimeToAccuracy  # (with trainer.target_*)
    peak_host_memory_mb: float | None
    peak_cuda_memory_mb: float | None
    finished_at: str
    total_seconds: float


@functools.cache  # one type per task: its checks are made once (`core.typed`)
def task_numbers(measures: TaskMetrics) -> Any:
    """The TypedDict of a task's numbers in a finished run's results.json, keyed by its metrics."""
    fields = {
        **{key: float | None for key in (*measures.metrics_on(VAL), measures.final_key(VAL))},
        **{key: float | None for key in (*measures.metrics_on(TEST), measures.final_key(TEST))},
    }
    name = "".join(part.title() for part in measures.headline.name.split("_"))
    return TypedDict(f"{name}Numbers", fields)  # type: ignore[operator]


@functools.cache
def finish_record(measures: TaskMetrics) -> Any:
    fields = get_type_hints(FinishRecord) | get_type_hints(task_numbers(measures))
    return TypedDict("Finished", fields, total=False)  # type: ignore[operator]


class ServingRecord(HostRecord, total=False):
    """The inference benchmark's results (eval.py benchmark=true)."""

    batch_size: int
    latency_calls: int
    warmup_calls: int
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    latency_mean_ms: float
    latency_p50_ms_min: float  # the rounds' p50s: the calls' p50 lies within them
    latency_p50_ms_max: float
    round_latency_p50_ms: list[float]  # each round's: latency_calls split into `rounds` (at most)
    images_per_second: float
    images_per_second_min: float
    images_per_second_max: float
    round_images_per_second: list[float]
    rounds: int
    batches_per_round: int
    host_interfered: bool  # rounds far apart, or the host busy (run.inference_benchmark)
    host_interference: str | None  # the line saying how, and what to do
    peak_memory_mb: float | None
    memory_of: str  # "host", or the GPU: "cuda:0"
    precision: str
    channels_last: bool
    compile: str | None
    compile_mode: str | None
    seed: int
    energy: dict[str, Any] | None
    energy_note: str | None
    joules_per_image: float | None
    average_watts: float | None


class EvaluationRecord(TypedDict, total=False):
    """An evaluation's results.json besides its task's numbers (`evaluation_record`)."""

    kind: Literal["evaluation"]
    checkpoint: str
    device: DeviceRecord
    data: DataRecord
    model: str
    trained_on: str  # the dataset
    trained_epochs: int
    evaluated_weights: Literal["model", "ema"]  # the checkpoint's: the model's, or their average
    dataset: str
    test_images: int
    test_split_images: int
    class_accuracy: dict[str, float | None]
    seconds: float
    serving: ServingRecord  # (with benchmark=true)


@functools.cache
def evaluation_record(measures: TaskMetrics) -> Any:
    metrics = {key: float | None for key in measures.metrics_on(TEST)}
    fields = get_type_hints(EvaluationRecord) | metrics
    return TypedDict("Evaluated", fields, total=False)  # type: ignore[operator]


class ResultsFile(StartRecord, SetupRecord, EpochRecord, FinishRecord, total=False):
    """results.json as a reader finds it: any key may be missing, one present holds its type."""

    # Null with trainer.batch_size=auto until its search ends (the start's, then the setup's).
    batch_size: int | None
    per_process_batch_size: int | None
    task_metrics: dict[str, Literal["min", "max"]]  # older run folders only: {"mae": "min"}
