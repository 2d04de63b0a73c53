"""Where a run's numbers go besides metrics.jsonl: the trackers of the `logger` config group.

    logger=tensorboard           TensorBoard's event files in the run folder (the default)
    logger=csv                   csv/metrics.csv, csv/params.csv, csv/results.csv
    logger=[tensorboard,csv]     both

Each gets the same things, as `records.metrics.Metrics` hands them over: the scalars of every
logged step and epoch (by TensorBoard's tags: train/loss, val/accuracy, perf/images_per_second),
the run's hyperparameters and final numbers at its end, and pictures (the confusion matrix).
Of several processes, only the main one builds them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig

from experiments.config.build import build
from experiments.config.metric_names import CLASSIFICATION, TEST, VAL
from experiments.records.hparams import Value
from experiments.training.history import History

# An epoch row's numbers by their tags (TensorBoard's): a group per split, and one for speed.
EPOCH_TAGS = {
    **{
        key: metric.tag(split)
        for split in (VAL, TEST)
        for key, metric in CLASSIFICATION.on(split).items()
    },
    "images_per_second": "perf/images_per_second",
}


def epoch_scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """An epoch row's numbers by their tags."""
    return {tag: row[key] for key, tag in EPOCH_TAGS.items() if key in row}


class Tracker(Protocol):
    """A record of a run's numbers that something other than this project reads."""

    record: str  # what a warning calls it: "the TensorBoard events"

    def resume_after(self, purge_step: int, history: History) -> History:
        """Continue a run whose steps from `purge_step` on are about to be done again; the
        epochs of `history` (the checkpoint's rows) that the record lacks are written again, and
        returned."""

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """Numbers by their tags at a global `step`."""

    def hyperparameters(
        self,
        hyperparameters: Mapping[str, Value],
        numbers: Mapping[str, float | None],
        step: int,
        swept: Collection[str],
    ) -> None:
        """The run's hyperparameters, those its sweep varies (`swept`) first, and its final
        `numbers`, at its last `step`."""

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        """An encoded PNG of `size` (height, width, channels) at `step`."""

    def end_records(self) -> set[str]:
        """Which of the records of a run's end ("hparams", a picture's tag) the record holds
        already: those of a run killed after writing them, which its resume must not write
        again."""

    def close(self) -> None:
        """Write what is pending and let go of the files."""


def trackers(logger: DictConfig, run_dir: Path) -> list[Tracker]:
    """The trackers `logger` names (the config group's options, each under its own key), writing
    into `run_dir`, in the order given."""
    return [build(node, run_dir=run_dir) for node in logger.values()]
