"""A tracker of one's own, as docs/trackers.md writes one (chosen by `+tracker.<key>._target_`)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from pathlib import Path

from experiments.records.tracker import TrackedRun

log = logging.getLogger("experiments")


class SaidAccuracy:
    """Each epoch's test accuracy, and the run's, said in the run's log."""

    def __init__(self, run_dir: Path) -> None:
        self.name = run_dir.name

    def begin(self, run: TrackedRun) -> None:
        log.info("%s: begun", run.name)

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        if "test/accuracy" in values:
            log.info("step %d: test accuracy %.4f", step, values["test/accuracy"])

    def hyperparameters(
        self,
        hyperparameters: Mapping[str, bool | int | float | str],
        numbers: Mapping[str, float | None],
        step: int,
        swept: Collection[str],
    ) -> None:
        log.info("%s, step %d: test accuracy %.4f", self.name, step, numbers["test_accuracy"])

    def picture(self, tag: str, png: bytes, size: tuple[int, int, int], step: int) -> None:
        """None: confusion_matrix.png is in the run folder."""

    def close(self, status: str) -> None:
        log.info("%s: %s", self.name, status)
