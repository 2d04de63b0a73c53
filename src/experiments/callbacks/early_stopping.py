"""trainer.early_stopping: training stops once the monitored metric has not improved by more
than min_delta for `patience` epochs (`training.selection.early_stop`)."""

from __future__ import annotations

from experiments.callbacks.base import Callback, TrainingRun
from experiments.training import selection


class EarlyStopping(Callback):
    def should_stop(self, run: TrainingRun) -> str | None:
        assert run.monitor is not None  # (on only with a validation split)
        return selection.early_stop(run.history, run.monitor, run.cfg.trainer.early_stopping)
