"""What results.json holds, as types: a finished run's numbers (`RunSummary`, which
`records.results.training_summary` writes), and the whole record as a reader finds it
(`RecordedResults`: the report checks a run folder's against it). Without torch: the report
command reads them.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from experiments.records.speed import HostRecord, SpeedSummary
from experiments.training.time_to_accuracy import TimeToAccuracy


class _Summary(SpeedSummary, HostRecord):
    selected_epoch: int
    selected_by: str  # "val_accuracy (max)", or "final epoch (no validation split)"
    # The selected epoch's metrics (None: no validation split), the headline's at the final
    # epoch too, and the final training loss: keys of `metric_names.CLASSIFICATION` (another
    # task's, `metric_names.TASK_METRICS`, stand in their place).
    val_accuracy: float | None
    val_loss: float | None
    test_accuracy: float
    test_loss: float
    class_accuracy: dict[str, float | None]
    final_val_accuracy: float | None
    final_test_accuracy: float
    train_loss: float
    epoch_seconds: list[float]
    wait_share: float
    copy_share: float
    compute_share: float
    checkpoint: str
    best_checkpoint: str | None


class RunSummary(_Summary, total=False):
    """A finished training run's numbers in results.json (`records.results.training_summary`),
    with what the run adds to them: compile_seconds (None without trainer.compile) and, with
    trainer.target_accuracy, time_to_accuracy."""

    compile_seconds: float | None
    time_to_accuracy: TimeToAccuracy


class DeviceRecord(TypedDict, total=False):
    """results.json's `device` (`devices.description.device_record`): asked for, then used."""

    requested: str | None
    used: str
    type: str
    index: int | None
    ids: list[int]  # DataParallel's GPUs


class ProcessRecord(TypedDict):
    """Who runs the run, so a report can tell a run in progress from one that was killed."""

    host: str
    pid: int


class DataRecord(TypedDict, total=False):
    """How the data was loaded: `loader`, for data of one's own (memory or stream)."""

    loader: str


class RecordedResults(RunSummary, total=False):
    """results.json as a reader finds it: what `records.results.training_fields` and
    `training_summary` write, and what the run adds as it goes. Each key may be missing (a run
    still going has few; earlier versions wrote fewer), and a key holds its type. The headline
    metrics of tasks other than classification (val_rmse, ...) stand beside RunSummary's, of the
    type of theirs."""

    status: str  # running, completed, failed, interrupted (failed, in versions before)
    reason: str | None
    device: DeviceRecord
    process: ProcessRecord
    started_at: str  # ISO 8601
    world_size: int
    data: DataRecord
    # A task of one's own's metrics and which way each is better, {"mae": "min"}, as runs from
    # before configs declared them recorded them (now in the config snapshot: task.metrics).
    task_metrics: dict[str, Literal["min", "max"]]
    model_parameters: int
    model_flops_per_image: int
    model_training_flops_per_image: int
    test_images: int
    test_split_images: int
    device_peak_flops: float | None
    device_peak_precision: str | None
    peak_host_memory_mb: float | None
    peak_cuda_memory_mb: float | None
