"""The energy of each epoch's training (joules by counter of every process) and of the run's."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from experiments.callbacks.base import Callback, Fields, TrainingRun
from experiments.devices.distributed import gathered
from experiments.devices.measuring.energy import COVERS, EnergyMeter, Span
from experiments.records.energy import energy_summary
from experiments.training.loop import TrainingResult

log = logging.getLogger("experiments")


class Energy(Callback):
    meter: EnergyMeter
    span: Span | None = None  # the last epoch's
    unavailable: str | None = None  # why the last epoch measured none

    def on_setup_end(self, run: TrainingRun) -> Fields:
        runtime = run.runtime
        self.meter = EnergyMeter.for_process(runtime.plan.computes_on, runtime.group.local_rank)
        if self.meter.unavailable is None:  # (else results.json's energy_note says why not)
            log.info("energy: %s", self.meter.text())
        return None

    @contextmanager
    def training(self, run: TrainingRun, epoch: int) -> Iterator[None]:
        with self.meter.measuring() as span:
            yield
        self.span = span

    def on_train_epoch_end(self, run: TrainingRun, epoch: int, training: TrainingResult) -> Fields:
        assert self.span is not None
        self.unavailable = self.span.unavailable
        energy = self.span.energy
        mine = {each.name: each.joules for each in energy.counters} if energy else None
        every: dict[str, float] = {}
        for rank, joules in enumerate(gathered(mine, run.runtime.group)):
            for name, counted in (joules or {}).items():
                every[f"{name} of process {rank}" if name in every else name] = counted
        return {"energy": every or None}

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        source = self.meter.source
        return energy_summary(run.history, source, COVERS[source], self.unavailable)
