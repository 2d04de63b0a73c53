"""Each epoch's host load, a warning of threads above free cores, and the compile's seconds."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch

from experiments.callbacks.base import Callback, Fields, TrainingRun
from experiments.config.metric_names import TRAIN_IMAGES_PER_SECOND
from experiments.devices.measuring import host_load
from experiments.records import speed
from experiments.training.loop import TrainingResult

log = logging.getLogger("experiments")


class Speed(Callback):
    def __init__(self) -> None:
        # The load on the cores this process may use, from before the run sets up.
        self.cores, self.root = host_load.cores(), host_load.run_root()
        self.setup_started = host_load.snapshot(self.root, self.cores)
        self.epoch_started: host_load.Snapshot | None = None
        # This process's first step (images, seconds): compilation's, with trainer.compile.
        self.first_step: tuple[int, float] | None = None

    @contextmanager
    def training(self, run: TrainingRun, epoch: int) -> Iterator[None]:
        if epoch == run.first_epoch:
            load = self._load_since(self.setup_started)
            warn_of_threads_above_free_cores("trainer.threads", run.cfg.trainer.threads, load)
        self.epoch_started = host_load.snapshot(self.root, self.cores)
        yield

    def on_train_epoch_end(self, run: TrainingRun, epoch: int, training: TrainingResult) -> Fields:
        if epoch == run.first_epoch:
            self.first_step = training.warm_up[0]
        return {"host": self._load_since(self.epoch_started)}

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        compiled = run.cfg.trainer.compile and self.first_step is not None
        rate = summary[TRAIN_IMAGES_PER_SECOND]
        seconds = speed.compile_seconds(self.first_step, rate) if compiled else None
        return {"compile_seconds": seconds}

    def _load_since(self, started: host_load.Snapshot | None) -> host_load.HostLoad | None:
        return host_load.since(started, self.root, self.cores, torch.get_num_threads())


def warn_of_threads_above_free_cores(
    key: str, typed: int | None, load: host_load.HostLoad | None
) -> None:
    """A warning where `key` (`typed`, else torch's threads) asks more threads than `load` left
    cores free: training's (`trainer.threads`) and eval.py's benchmark's (`threads`)."""
    if load is None:
        return
    threads = torch.get_num_threads() if typed is None else typed
    if warning := host_load.threads_above_free_cores(threads, load, key, typed is not None):
        log.warning(warning)
