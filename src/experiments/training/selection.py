"""Which epoch a run reports, and when it stops early: decided from the epochs' rows on the
validation split alone, so a resumed run decides as the uninterrupted one would have."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from omegaconf import DictConfig

from experiments.config.choices import Mode
from experiments.config.metric_names import VAL, TaskMetrics
from experiments.config.task_metrics import metrics_of
from experiments.core.errors import ExperimentError
from experiments.training.history import EpochRow, validated

ADD_VALIDATION = "add dataset.val_fraction=0.1 (or a val/ folder to an image folder)"


@dataclass(frozen=True)
class Monitor:
    metric: str  # a key of a metric on the validation split: val_accuracy, val_loss
    mode: Mode  # max or min

    @classmethod
    def from_config(cls, config: DictConfig) -> Monitor:
        """trainer.monitor, by default the task's headline metric on the validation split."""
        trainer, measures = config.trainer, metrics_of(config)
        assert measures is not None  # (validated: a task of one's own declares its metrics)
        return cls.chosen(trainer.monitor, trainer.monitor_mode, measures)

    @classmethod
    def chosen(cls, monitor: str | None, mode: str, measures: TaskMetrics) -> Monitor:
        metric = monitor or measures.headline.key(VAL)
        if mode == Mode.auto:
            mode = measures.metrics_on(VAL)[metric].better
        return cls(metric, Mode(mode))

    def __str__(self) -> str:
        return f"{self.metric} ({self.mode})"

    def improves(self, value: float, on: float, by: float = 0.0) -> bool:
        return value > on + by if self.mode == Mode.max else value < on - by

    def selected(self, history: Sequence[EpochRow]) -> EpochRow:
        """The first epoch with the best finite value (none finite: the last)."""
        finite = [row for row in history if math.isfinite(row[self.metric])] or history[-1:]
        best = finite[0]
        for row in finite[1:]:
            if self.improves(row[self.metric], best[self.metric]):
                best = row
        return best


def selected_epoch(history: Sequence[EpochRow], monitor: Monitor | None) -> EpochRow:
    return monitor.selected(history) if monitor else history[-1]


def early_stop(history: Sequence[EpochRow], monitor: Monitor, stopping: DictConfig) -> str | None:
    """Why the run stops after its latest epoch (`stopping`: trainer.early_stopping), or None."""
    if stopping.patience is None:
        return None
    best, waited = history[0], 0
    for row in history[1:]:
        if monitor.improves(row[monitor.metric], best[monitor.metric], stopping.min_delta):
            best, waited = row, 0
        else:
            waited += 1
    if waited < stopping.patience:
        return None
    return (
        f"{monitor.metric} has not improved by more than {stopping.min_delta} for {waited} "
        f"epochs (trainer.early_stopping.patience={stopping.patience}; best "
        f"{best[monitor.metric]:.4f} at epoch {best['epoch']})"
    )


def require_validation(cfg: DictConfig, has_validation: bool) -> None:
    """Refuse, in one line, what needs a validation split when the run has none."""
    if has_validation:
        return
    patience = cfg.trainer.early_stopping.patience
    if patience is not None:
        raise ExperimentError(
            f"trainer.early_stopping.patience={patience} stops on trainer.monitor="
            f"{Monitor.from_config(cfg).metric}, which needs a validation split: {ADD_VALIDATION}"
        )
    metric, measures = cfg.optimized_metric, metrics_of(cfg)
    assert measures is not None
    monitored = measures.monitored()
    if metric in monitored:
        without_validation = (name for name in measures.optimizable() if name not in monitored)
        raise ExperimentError(
            f"optimized_metric={metric} needs a validation split: {ADD_VALIDATION}, or optimize "
            f"{' or '.join(without_validation)}"
        )


def refuse_stopped(history: Sequence[EpochRow], config: DictConfig, run: str) -> None:
    """Refuse to resume a run that the early stopping asked for now would end at once."""
    if not validated(history):
        return
    reason = early_stop(history, Monitor.from_config(config), config.trainer.early_stopping)
    if reason is not None:
        raise ExperimentError(
            f"resume={run}: {reason}, so early stopping ends it after epoch "
            f"{history[-1]['epoch']}, where it is; raise trainer.early_stopping.patience (or set "
            "it to null) to train on"
        )
