"""A CUDA GPU (or a ROCm one): the host runs ahead, so CUDA events time it; its energy is NVML's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from experiments.devices import process_settings
from experiments.devices.backends import names
from experiments.devices.backends.base import Backend, DeviceIdentity, Mark, Measurement, ModuleT
from experiments.devices.measuring import datasheet
from experiments.devices.measuring.datasheet import DatasheetPeak
from experiments.devices.measuring.energy_counters import Counter, nvml_counters

# Well above any GPU (a B200's dense bf16: 2.25 P): a peak beyond it is a damaged cache's.
GPU_MOST_FLOPS = 1e16


class EventMark(Mark):
    def __init__(self, device: torch.device) -> None:
        self.event = torch.cuda.Event(enable_timing=True)
        self.event.record(torch.cuda.current_stream(device))

    def seconds_since(self, start: Mark) -> float:
        assert isinstance(start, EventMark)
        self.event.synchronize()
        return start.event.elapsed_time(self.event) / 1000


class CudaBackend(Backend):
    name = names.CUDA
    noun = "GPU"
    is_host = False
    runs_ahead_of_host = True
    copies_from_pinned_memory = True
    channels_last_by_default = False
    trains_fp16 = True
    fuses_optimizer_by_default = True  # unfused, fp16's GradScaler reads back every step
    replays_cuda_graphs = True
    uses_cudnn = True
    runs_sync_batchnorm = True
    each_process_owns_its_device = True
    energy_source = "nvml"
    energy_covers = "each whole GPU: other processes' work on it is counted too"

    def set_device(self, device: torch.device) -> None:
        torch.cuda.set_device(device)

    def wait(self, device: torch.device) -> None:
        torch.cuda.synchronize(device)

    def mark(self, device: torch.device) -> Mark:
        return EventMark(device)

    def reset_peak_memory(self, device: torch.device) -> None:
        torch.cuda.reset_peak_memory_stats(device)

    def peak_memory_bytes(self, device: torch.device) -> int | None:
        return torch.cuda.max_memory_allocated(device)

    def free_cached_memory(self) -> None:
        torch.cuda.empty_cache()

    def refuse_nondeterministic(self) -> None:
        process_settings.refuse_nondeterministic_cublas()

    def module_by_method(self, module: ModuleT, device: torch.device) -> ModuleT:
        return module.cuda(device.index)

    def tensor_by_method(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        return tensor.cuda(device.index, non_blocking=True)

    def identity(self, device: torch.device) -> DeviceIdentity:
        properties = torch.cuda.get_device_properties(device)
        return DeviceIdentity(properties.name, str(properties.uuid), None)

    def device_record_fields(self, device: torch.device) -> dict[str, Any]:
        identity = self.identity(device)  # the UUID tells identical GPUs apart
        return {"name": identity.name, "uuid": identity.uuid}

    def tf32_in_use(self, device: torch.device, convolutions_lead: bool) -> bool:
        return runs_in_tf32(
            torch.cuda.get_device_capability(device),
            convolutions_lead,
            convolutions_in_tf32=_convolutions_in_tf32(),
            products_in_tf32=torch.get_float32_matmul_precision() != "highest",
        )

    def peak_measurement(
        self, autocast_dtype: torch.dtype | None, tf32: bool, convolutions_lead: bool
    ) -> Measurement:
        # Large enough to fill an H100 (half the size in plain fp32, several times slower).
        dtype = autocast_dtype or torch.float32
        uses_tf32 = tf32 and dtype == torch.float32
        tensor_cores = uses_tf32 or dtype != torch.float32
        return Measurement(dtype, uses_tf32, 8192 if tensor_cores else 4096, 4, 5, 4)

    def most_flops(self, precision: str, threads: int) -> float:
        return GPU_MOST_FLOPS

    def datasheet_peak(self, device: torch.device, precision: str) -> DatasheetPeak | None:
        return datasheet.datasheet_peak(self.identity(device).name, precision)

    def peak_kinds(self) -> list[tuple[torch.dtype | None, bool]]:
        # fp32's peak differs by the model's lead alone: TF32.
        return [(None, False), (None, True), (torch.bfloat16, False), (torch.float16, False)]

    def energy_counters(self, devices: Sequence[torch.device], powercap: Path) -> list[Counter]:
        return nvml_counters(devices)

    def profiler_activities(self) -> list[ProfilerActivity]:
        return [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def runs_in_tf32(
    capability: tuple[int, int],
    convolutions_lead: bool,
    *,
    convolutions_in_tf32: bool,
    products_in_tf32: bool,
) -> bool:
    """Whether fp32 work led by convolutions (else products) computes in TF32 on `capability`."""
    return capability >= (8, 0) and (
        convolutions_in_tf32 if convolutions_lead else products_in_tf32
    )


def _convolutions_in_tf32() -> bool:
    # torch 2.9 has a setting per operation; reading the old flag where it was set so raises.
    newer = getattr(getattr(torch.backends.cudnn, "conv", None), "fp32_precision", None)
    return torch.backends.cudnn.allow_tf32 if newer is None else newer == "tf32"
