"""trainer.early_stopping: stop once the monitored metric stalls (`selection.early_stop`)."""

from __future__ import annotations

from experiments.callbacks.base import Callback, TrainingRun
from experiments.training import selection


class EarlyStopping(Callback):
    def should_stop(self, run: TrainingRun) -> str | None:
        assert run.monitor is not None  # (on only with a validation split)
        return selection.early_stop(run.history, run.monitor, run.cfg.trainer.early_stopping)
