"""trainer.confusion_matrix: the selected epoch's test confusion matrix, drawn for each tracker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.callbacks.base import Callback, Fields, TrainingRun
from experiments.records.metrics import MetricsWriter


class ConfusionMatrix(Callback):
    def __init__(self, metrics_writer: MetricsWriter) -> None:
        self.metrics_writer = metrics_writer

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        if not run.selected_confusion:  # (a task without classes has none)
            return None
        epoch, step = summary["selected_epoch"], run.history[-1]["global_step"]
        title = f"{run.cfg.model.name} on {run.cfg.dataset.name}: test, epoch {epoch}"
        matrix = [list(row) for row in run.selected_confusion]
        self.metrics_writer.confusion_matrix(matrix, run.data.classes, title, step)
        return None
