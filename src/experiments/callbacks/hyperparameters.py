"""The run's hyperparameters and final numbers for each tracker (TensorBoard's HParams tab)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from experiments.callbacks.base import Callback, Fields, TrainingRun
from experiments.config.build import as_written
from experiments.config.metric_names import TEST, TRAIN_IMAGES_PER_SECOND, VAL
from experiments.records import hparams
from experiments.records.metrics import MetricsWriter


class Hyperparameters(Callback):
    def __init__(
        self, metrics_writer: MetricsWriter, overrides: Sequence[str], swept: Sequence[str]
    ) -> None:
        self.metrics_writer = metrics_writer
        self.overrides = list(overrides)  # the command line's
        self.swept = list(swept)  # the columns its sweep varies

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        columns = hparams.hyperparameters(as_written(run.cfg), run.runtime.plan, self.overrides)
        # As numbers, to sort and filter by (whole numbers would be text there).
        sizes = {name: float(count) for name, count in run.model_size.record().items()}
        self.metrics_writer.hyperparameters(
            columns | sizes, _compared_by(run, summary), run.history[-1]["global_step"], self.swept
        )
        return None


def _compared_by(run: TrainingRun, summary: Mapping[str, Any]) -> dict[str, float | None]:
    measures = run.learner.task.metrics
    keys = (
        *(measures.headline.key(split) for split in (VAL, TEST)),
        measures.final_key(TEST),
        TRAIN_IMAGES_PER_SECOND,
    )
    numbers = {key: summary[key] for key in keys}
    if "time_to_accuracy" in summary:
        numbers["time_to_accuracy"] = summary["time_to_accuracy"]["seconds"]
    for key in ("mfu", "train_joules_per_image"):
        if summary[key] is not None:
            numbers[key] = summary[key]
    return numbers
