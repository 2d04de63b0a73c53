"""A `Callback`'s hooks, which the trainer calls with the run to read (docs/callbacks.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from experiments.data.batches import Batches
from experiments.data.types import ImageData
from experiments.devices.runtime import Runtime
from experiments.records.resume import TrainingState
from experiments.training import loop
from experiments.training.history import EpochRow, History
from experiments.training.loop import TrainingResult
from experiments.training.model_size import ModelSize
from experiments.training.selection import Monitor

Fields = Mapping[str, Any] | None


@dataclass
class Progress:
    """What training has done, which only the trainer changes."""

    history: History = field(default_factory=list)
    selected_confusion: list[list[int]] = field(default_factory=list)
    first_epoch: int = 1


@dataclass(frozen=True)
class TrainingRun:
    """What a callback reads of the run: what setup built, and views of what training has done."""

    cfg: DictConfig  # as the run trains: with what its data told and the batch it searched for
    run_dir: Path
    runtime: Runtime
    data: ImageData
    model_size: ModelSize
    learner: loop.Learner  # the model (as placed), its task, optimizer and moving average
    state: TrainingState  # what its checkpoints save
    train_batches: Batches
    test_batches: Batches
    val_batches: Batches | None
    monitor: Monitor | None  # what selects epochs, with a validation split
    steps_per_epoch: int
    progress: Progress = field(default_factory=Progress, repr=False)  # the trainer's

    @property
    def history(self) -> Sequence[EpochRow]:
        return tuple(self.progress.history)

    @property
    def selected_confusion(self) -> Sequence[Sequence[int]]:
        return tuple(tuple(row) for row in self.progress.selected_confusion)

    @property
    def first_epoch(self) -> int:
        return self.progress.first_epoch

    @property
    def is_main(self) -> bool:
        return self.runtime.group.is_main


@dataclass(frozen=True)
class EpochEnd:
    """An epoch as it ends: what it measured, whether it is selected, and why training stops."""

    epoch: int
    row: EpochRow
    training: TrainingResult
    test: loop.EvaluationResult
    val: loop.EvaluationResult | None
    measured: Mapping[str, Any]  # the fields callbacks handed its row
    selected: bool
    last: bool
    stop: str | None


class Callback:
    """One concern of a training run; every hook does nothing by default."""

    # Steps at the start of the first epoch this callback slows (a profiler's), timed apart.
    slowed_steps = 0

    def on_setup_end(self, run: TrainingRun) -> Fields:
        return None

    def training(self, run: TrainingRun, epoch: int) -> AbstractContextManager[object]:
        return nullcontext()

    def on_train_step_end(self, run: TrainingRun, epoch: int, step: int) -> None:
        return None

    def on_train_epoch_end(self, run: TrainingRun, epoch: int, training: TrainingResult) -> Fields:
        return None

    def should_stop(self, run: TrainingRun) -> str | None:
        return None

    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        return None

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        return None
