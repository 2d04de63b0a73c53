"""MFU: what training made of its devices' peak FLOP/s (as this machine's cache keeps them)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch

from experiments.callbacks.base import Callback, Fields, TrainingRun
from experiments.config.metric_names import TRAIN_IMAGES_PER_SECOND
from experiments.devices import memory
from experiments.devices.distributed import summed
from experiments.devices.measuring import peak
from experiments.devices.measuring.peak_cache import PeakCache
from experiments.training.loop import TrainingResult

log = logging.getLogger("experiments")


class Utilization(Callback):
    def __init__(self) -> None:
        self.peaks = PeakCache()  # this machine's measured peaks
        self.peak: peak.Peak  # of each device computed on, on average
        self.devices: int
        self.keys: list[str]  # what the cache keeps them by

    def on_setup_end(self, run: TrainingRun) -> Fields:
        runtime = run.runtime
        devices, group = runtime.plan.computes_on, runtime.group
        dtype, lead = runtime.autocast_dtype, run.model_size.convolutions_lead
        fresh = run.cfg.trainer.measure_peak_flops
        found = [self.peaks.peak(device, dtype, lead, fresh=fresh) for device in devices]
        total = sum(each.peak.flops_per_second for each in found)
        count = len(devices)
        if runtime.backend.each_process_owns_its_device and group.world_size > 1:
            total = summed(torch.tensor([total], device=runtime.device), group).item()
            count *= group.world_size
        self.peak = peak.Peak(total / count, found[0].peak.precision)
        self.devices = count
        self.keys = [each.key for each in found]
        measured = any(each.measured for each in found)
        if measured:  # its matrices are not the run's peak memory
            memory.reset_peak_memory(runtime.plan)
        return {
            "device_peak_flops": self.peak.flops_per_second,
            "device_peak_precision": self.peak.precision,
            "peak_devices": count,
            "device_peak_measured": measured,
        }

    def on_train_epoch_end(self, run: TrainingRun, epoch: int, training: TrainingResult) -> Fields:
        return {"mfu": self._utilization(run, training.images_per_second).mfu}

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        utilization = self._utilization(run, summary[TRAIN_IMAGES_PER_SECOND])
        if utilization.note is None:
            return {"mfu": utilization.mfu}
        log.warning(utilization.note)
        for key in self.keys:
            self.peaks.forget(key)
        return {"mfu": None, "mfu_note": utilization.note}

    def _utilization(self, run: TrainingRun, images_per_second: float) -> peak.Utilization:
        flops, plan = run.model_size.training_flops_per_image, str(run.runtime.plan)
        return peak.utilization(flops, images_per_second, self.peak, self.devices, plan)
