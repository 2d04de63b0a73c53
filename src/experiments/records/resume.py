"""A training run's state, saved after an epoch and put back by `resume=<run>`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn
from torch.optim.lr_scheduler import LRScheduler

from experiments.core.errors import ExperimentError
from experiments.core.files import remove_leftovers
from experiments.core.text import display_path
from experiments.records import checkpoints, environment, resume_checks, running, snapshot
from experiments.records.metrics import MetricsWriter
from experiments.records.recorded import SetupRecord
from experiments.records.results import Results
from experiments.training import seeding, selection
from experiments.training.ema import ModelAverage
from experiments.training.history import History
from experiments.training.selection import Monitor, selected_epoch

log = logging.getLogger("experiments")


def checkpoint_to_resume(cfg: DictConfig) -> dict[str, Any] | None:
    """The checkpoint `resume=` continues from, if the run can go on as configured now."""
    if not cfg.resume:
        return None
    running.refuse_if_running(cfg.resume)  # two processes never write one folder
    # Killed after its last checkpoint, a run has trained every epoch but not written its end.
    completed = running.read_results(Path(cfg.resume)).get("status") == "completed"
    resumed = checkpoints.to_resume(
        cfg.resume, cfg.trainer.epochs, cfg.scheduler.name, completed=completed
    )
    if completed:  # (one killed after stopping early is finished where it stopped)
        selection.refuse_stopped(resumed["history"], cfg, cfg.resume)
    search = resume_checks.batch_search_of(resumed, cfg.resume)
    resume_checks.refuse_other_average(resumed, cfg.resume, cfg.trainer.ema.decay)
    resume_checks.refuse_changed_settings(resumed, cfg.resume, cfg, searched=search is not None)
    return {**resumed, checkpoints.BATCH_SEARCH: search}


@dataclass
class TrainingState:
    """What a checkpoint saves (`model` unwrapped, to load on any device)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: LRScheduler
    scaler: torch.amp.GradScaler
    shuffle: torch.Generator  # the batches' order and augmentation, the same in every process
    gpus: tuple[int, ...]
    config: dict[str, Any]
    data: dict[str, Any]
    steps_per_epoch: int
    ema: ModelAverage | None = None  # the moving average of the weights (trainer.ema)
    batch_search: Mapping[str, Any] | None = None  # what chose the batch (batch_size=auto)

    def save(
        self,
        run_dir: Path,
        epoch: int,
        history: History,
        selected_confusion: list[list[int]],
        *,
        last: bool,
        best: bool,
    ) -> None:
        checkpoint = checkpoints.state(
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            scaler=self.scaler,
            epoch=epoch,
            config=self.config,
            history=history,
            rng=seeding.capture(self.shuffle, self.gpus),
            selected_confusion=selected_confusion,
            data=self.data,
            steps_per_epoch=self.steps_per_epoch,
            ema=self.ema,
            batch_search=self.batch_search,
        )
        # best.pt first: a kill between the two never leaves last.pt ahead of it.
        if best:
            checkpoints.save(run_dir / checkpoints.BEST, checkpoint)
        if last:
            checkpoints.save(run_dir / checkpoints.LAST, checkpoint)

    def restore(self, checkpoint: dict[str, Any], run: str, trainer: DictConfig) -> None:
        resume_checks.refuse_other_data(checkpoint, run, self.data)
        resume_checks.refuse_other_steps(checkpoint, run, self.steps_per_epoch, trainer)
        try:
            self.model.load_state_dict(checkpoint["model"])
            self.optimizer.load_state_dict(checkpoint["optimizer"])
            if self.ema is not None:  # (the checkpoint has one: `refuse_other_average`)
                self.ema.load_state_dict(checkpoint["ema"])
        except (RuntimeError, ValueError) as error:
            saved = checkpoint["config"]["model"]["name"]
            raise ExperimentError(
                f"resume={run}: its checkpoint (model {saved}) does not fit the model and "
                f"optimizer configured now ({str(error).splitlines()[0].rstrip(':')}); resume "
                "with the run's own model and optimizer settings, or start a new run"
            ) from error
        if "scheduler" in checkpoint:  # (checkpoints from before schedules had none)
            self.scheduler.load_state_dict(checkpoint["scheduler"])
        if checkpoint.get("scaler"):
            self.scaler.load_state_dict(checkpoint["scaler"])
        seeding.restore(checkpoint["rng"], self.shuffle, self.gpus)


@dataclass(frozen=True)
class Resumed:
    history: History
    selected_confusion: list[list[int]]
    stopped_early: str | None


def restore(
    checkpoint: dict[str, Any],
    cfg: DictConfig,
    composed: DictConfig,
    run_dir: Path,
    state: TrainingState,
    records: tuple[Results, MetricsWriter],
    monitor: Monitor | None,
) -> Resumed:
    """Put the run of `cfg.resume` back where `checkpoint` left it, its records repaired."""
    results, metrics_writer = records
    state.restore(checkpoint, cfg.resume, cfg.trainer)
    results.accept()
    history, early = checkpoint["history"], cfg.trainer.early_stopping
    resumed = Resumed(
        history=list(history),
        selected_confusion=checkpoint.get("selected_confusion", []),
        stopped_early=selection.early_stop(history, monitor, early) if monitor else None,
    )
    epoch = checkpoint["epoch"]
    if results.group.is_main:
        snapshot.save(composed, run_dir)
        environment.write(run_dir)
        _repair(run_dir, checkpoint, resumed.history, monitor)
    metrics_writer.resume_after(epoch, state.steps_per_epoch, resumed.history)
    if resumed.stopped_early:
        results.add(SetupRecord, stopped_early={"epoch": epoch, "reason": resumed.stopped_early})
    over = resumed.stopped_early or epoch == cfg.trainer.epochs
    log.info(
        "resuming %s after epoch %d%s",
        display_path(Path(cfg.resume)),
        epoch,
        ": its training is over, what the run left unwritten follows" if over else "",
    )
    return resumed


def _repair(
    run_dir: Path, checkpoint: dict[str, Any], history: History, monitor: Monitor | None
) -> None:
    """Undo what a kill mid-write leaves: temporary files, and a best.pt behind last.pt."""
    left = remove_leftovers(run_dir, run_dir / checkpoints.LAST.parent)
    if left:
        log.info("removed %s, left by a write cut short", ", ".join(p.name for p in left))
    if monitor and selected_epoch(history, monitor)["epoch"] == checkpoint["epoch"]:
        checkpoints.save(run_dir / checkpoints.BEST, checkpoint)
