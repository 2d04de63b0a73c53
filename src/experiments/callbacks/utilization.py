"""MFU: what training made of its devices' peak FLOP/s, as measured (this machine's cache keeps
them) and as their datasheets (or device.peak_flops) state them."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

import torch

from experiments.callbacks.base import Callback, Fields, TrainingRun
from experiments.config.metric_names import TRAIN_IMAGES_PER_SECOND
from experiments.devices import memory
from experiments.devices.distributed import summed
from experiments.devices.measuring import datasheet, peak
from experiments.devices.measuring.datasheet import DatasheetPeak
from experiments.devices.measuring.peak_cache import PeakCache
from experiments.training.loop import TrainingResult

log = logging.getLogger("experiments")


class Utilization(Callback):
    def __init__(self) -> None:
        self.peaks = PeakCache()  # this machine's measured peaks
        self.peak: peak.Peak  # of each device computed on, on average
        self.datasheet_peak: DatasheetPeak | None  # its datasheet's (or given), on average
        self.devices: int
        self.keys: list[str]  # what the cache keeps them by

    def on_setup_end(self, run: TrainingRun) -> Fields:
        runtime = run.runtime
        devices, group = runtime.plan.computes_on, runtime.group
        dtype, lead = runtime.autocast_dtype, run.model_size.convolutions_lead
        fresh = run.cfg.trainer.measure_peak_flops
        found = [self.peaks.peak(device, dtype, lead, fresh=fresh) for device in devices]
        precision = found[0].peak.precision
        stated = _datasheet_peaks(run, precision)
        listed = [each.flops_per_second for each in stated if each is not None]
        # The devices' measured and datasheet peaks added up, and how many have no datasheet's.
        totals = [sum(each.peak.flops_per_second for each in found), sum(listed)]
        totals.append(len(devices) - len(listed))
        count = len(devices)
        if runtime.backend.each_process_owns_its_device and group.world_size > 1:
            tensor = torch.tensor(totals, dtype=torch.float64, device=runtime.device)
            totals = summed(tensor, group).tolist()
            count *= group.world_size
        self.peak = peak.Peak(totals[0] / count, precision)
        self.datasheet_peak = None
        if totals[2] == 0 and stated[0] is not None:  # named as the first device's, of one model
            self.datasheet_peak = dataclasses.replace(stated[0], flops_per_second=totals[1] / count)
        self.devices = count
        self.keys = [each.key for each in found]
        measured = any(each.measured for each in found)
        if measured:  # its matrices are not the run's peak memory
            memory.reset_peak_memory(runtime.plan)
        return {
            "device_peak_flops": self.peak.flops_per_second,
            "device_peak_precision": precision,
            "peak_devices": count,
            "device_peak_measured": measured,
            **_datasheet_record(self.datasheet_peak),
        }

    def on_train_epoch_end(self, run: TrainingRun, epoch: int, training: TrainingResult) -> Fields:
        return {"mfu": self._utilization(run, training.images_per_second).mfu}

    def on_fit_end(self, run: TrainingRun, summary: Mapping[str, Any]) -> Fields:
        images_per_second = summary[TRAIN_IMAGES_PER_SECOND]
        fields = self._datasheet_mfu(run, images_per_second)
        utilization = self._utilization(run, images_per_second)
        if utilization.note is None:
            return {"mfu": utilization.mfu, **fields}
        log.warning(utilization.note)
        for key in self.keys:
            self.peaks.forget(key)
        return {"mfu": None, "mfu_note": utilization.note, **fields}

    def _utilization(self, run: TrainingRun, images_per_second: float) -> peak.Utilization:
        flops, plan = run.model_size.training_flops_per_image, str(run.runtime.plan)
        return peak.utilization(flops, images_per_second, self.peak, self.devices, plan)

    def _datasheet_mfu(self, run: TrainingRun, images_per_second: float) -> Fields:
        """The run's MFU against its datasheet's (or given) peak, where it has one."""
        if self.datasheet_peak is None:
            return {"mfu_datasheet": None}
        flops, precision = run.model_size.training_flops_per_image, self.peak.precision
        utilization = peak.datasheet_utilization(
            flops, images_per_second, self.datasheet_peak, precision, self.devices
        )
        if utilization.note is None:
            return {"mfu_datasheet": utilization.mfu}
        log.warning(utilization.note)
        return {"mfu_datasheet": None, "mfu_datasheet_note": utilization.note}


def _datasheet_peaks(run: TrainingRun, precision: str) -> list[DatasheetPeak | None]:
    """Each device's peak in `precision` as given (device.peak_flops), else as its datasheet's."""
    given, backend = run.cfg.device.peak_flops, run.runtime.backend
    if given is not None:
        return [datasheet.given_peak(given) for _ in run.runtime.plan.computes_on]
    return [backend.datasheet_peak(device, precision) for device in run.runtime.plan.computes_on]


def _datasheet_record(stated: DatasheetPeak | None) -> Fields:
    """results.json's datasheet peak: one device's, where it came from, and of what."""
    if stated is None:
        return {"datasheet_peak_flops": None, "datasheet_peak_source": None}
    return {
        "datasheet_peak_flops": stated.flops_per_second,
        "datasheet_peak_source": stated.source,
        "datasheet_peak_of": stated.of,
    }
