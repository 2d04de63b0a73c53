"""trainer.target_*: the training seconds until the run first reached a metric's target."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from experiments.callbacks.base import Callback, EpochEnd, Fields, TrainingRun
from experiments.config.metric_names import TEST, VAL, Metric
from experiments.training import time_to_accuracy
from experiments.training.time_to_accuracy import TimeToAccuracy

log = logging.getLogger("experiments")


class TimeToTarget(Callback):
    metric: Metric
    goal: float

    def on_setup_end(self, run: TrainingRun) -> Fields:
        target = time_to_accuracy.target(run.cfg.trainer, run.learner.task.metrics)
        assert target is not None  # (on only with a target)
        self.metric, self.goal = target
        return None

    def on_epoch_end(self, run: TrainingRun, end: EpochEnd) -> Fields:
        reached = self._reached(run)
        if reached["epoch"] == end.epoch:
            log.info("epoch %d: %s", end.epoch, time_to_accuracy.text(reached))
        return None

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        return {"time_to_accuracy": self._reached(run)}

    def _reached(self, run: TrainingRun) -> TimeToAccuracy:
        split = TEST if run.val_batches is None else VAL
        # Every epoch's training counts, the first's compilation with it.
        compiled = run.cfg.trainer.compile is not None
        return time_to_accuracy.reached(run.history, self.goal, split, compiled, self.metric)
