"""The slot a concern of a training run plugs into: a `Callback`, whose hooks the trainer calls
at each point of the run, with the run (`TrainingRun`) to read.

    on_setup_end          the run is built (and a resumed one put back); returns fields of
                          results.json's setup (`records.recorded.SetupRecord`)
    training              a context around each epoch's training
    on_train_step_end     after each optimizer step
    on_train_epoch_end    the epoch's training is done; returns fields of its metrics.jsonl row
                          (`host`, `mfu`, `energy`: the shipped callbacks' measures)
    should_stop           the epoch's row is recorded: a reason to stop training after it
    on_epoch_end          the epoch is evaluated and recorded; returns fields of results.json's
                          epoch (`records.recorded.EpochRecord`)
    on_fit_end            training is over; returns fields of the run's summary
                          (`records.recorded.finish_record`), with the summary so far to read

Every hook does nothing by default: a callback overrides those it needs. A hook returns None
where it adds no field. A callback of one's own (`callbacks` in the config) reads the run; it
writes only in the run folder.
"""

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
from experiments.training.model_size import ModelSize
from experiments.training.selection import Monitor

Fields = Mapping[str, Any] | None


@dataclass
class Progress:
    """What training has done, which only the trainer changes: a row per epoch, the test
    split's confusion matrix at the selected epoch, the first epoch this process trains (a
    resume's follows its checkpoint)."""

    history: History = field(default_factory=list)
    selected_confusion: list[list[int]] = field(default_factory=list)
    first_epoch: int = 1


@dataclass(frozen=True)
class TrainingRun:
    """What a callback reads of the run: the parts setup built, and what training has done
    (`history`, `selected_confusion`, `first_epoch`), as views the callback cannot change."""

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
        """Whether this process writes the run's records (of several, only the main one)."""
        return self.runtime.group.is_main


@dataclass(frozen=True)
class EpochEnd:
    """An epoch as it ends: its row of the history, what its training and evaluation measured
    (`measured`: the fields callbacks handed its row, as they handed them), whether the monitor
    selects it (always, without a validation split), whether it is the run's last, and why
    training stops after it (None: it goes on, or this is the last)."""

    epoch: int
    row: EpochRow
    training: loop.TrainingResult
    test: loop.EvaluationResult
    val: loop.EvaluationResult | None
    measured: Mapping[str, Any]
    selected: bool
    last: bool
    stop: str | None


class Callback:
    """One concern of a training run; see the module's docstring for when each hook runs."""

    # Steps at the start of the first epoch this callback slows (a profiler's): timed apart
    # from the epoch's speed, as its first step always is.
    slowed_steps = 0

    def on_setup_end(self, run: TrainingRun) -> Fields:
        return None

    def training(self, run: TrainingRun, epoch: int) -> AbstractContextManager[object]:
        return nullcontext()

    def on_train_step_end(self, run: TrainingRun, epoch: int, step: int) -> None:
        return None

    def on_train_epoch_end(
        self, run: TrainingRun, epoch: int, training: loop.TrainingResult
    ) -> Fields:
        return None

    def should_stop(self, run: TrainingRun) -> str | None:
        return None

    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        return None

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        return None
