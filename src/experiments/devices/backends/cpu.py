"""The host's CPU as a device: done when the host returns; its energy RAPL's, machine-wide."""

from __future__ import annotations

import contextlib
import platform
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity

from experiments.devices.backends import names
from experiments.devices.backends.base import Backend, DeviceIdentity, Mark, Measurement, ModuleT
from experiments.devices.measuring.datasheet import DatasheetPeak
from experiments.devices.measuring.energy_counters import Counter, rapl_counters

# Well above any CPU thread (AVX-512: 320 G fp32 at 5 GHz; AMX: 5 T bf16): beyond is a bad cache.
CPU_THREAD_MOST_FLOPS = {"fp32": 1e12, "bf16": 1e13, "fp16": 1e13}


class HostMark(Mark):
    def __init__(self) -> None:
        self.seconds = time.perf_counter()

    def seconds_since(self, start: Mark) -> float:
        assert isinstance(start, HostMark)
        return self.seconds - start.seconds


class CpuBackend(Backend):
    name = names.CPU
    noun = "CPU"
    is_host = True
    runs_ahead_of_host = False
    copies_from_pinned_memory = False
    channels_last_by_default = True  # much faster there (docs/speed.md)
    trains_fp16 = False  # GradScaler's fp16, and its fast kernels, are CUDA's
    fuses_optimizer_by_default = False  # no device to wait for: torch's own choice stands
    replays_cuda_graphs = False
    uses_cudnn = False
    runs_sync_batchnorm = False
    each_process_owns_its_device = False
    energy_source = "rapl"
    energy_covers = (
        "each whole CPU package (cores, caches, memory controller; not the DRAM): every process "
        "on it, not this run's alone"
    )

    def set_device(self, device: torch.device) -> None:
        pass  # the one CPU

    def wait(self, device: torch.device) -> None:
        pass  # done when the host returned

    def mark(self, device: torch.device) -> Mark:
        return HostMark()

    def reset_peak_memory(self, device: torch.device) -> None:
        pass  # the host's resident set is `devices.memory`'s

    def peak_memory_bytes(self, device: torch.device) -> int | None:
        return None

    def free_cached_memory(self) -> None:
        pass  # the host's allocator hands back what it frees

    def refuse_nondeterministic(self) -> None:
        pass  # torch's deterministic algorithms are all it takes

    def module_by_method(self, module: ModuleT, device: torch.device) -> ModuleT:
        return module.cpu()

    def tensor_by_method(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        return tensor.cpu()

    def identity(self, device: torch.device) -> DeviceIdentity:
        return DeviceIdentity(cpu_name(), machine_id(), torch.get_num_threads())

    def device_record_fields(self, device: torch.device) -> dict[str, Any]:
        # Not the machine's id: that is not for records that travel.
        return {"name": cpu_name(), "threads": torch.get_num_threads()}

    def tf32_in_use(self, device: torch.device, convolutions_lead: bool) -> bool:
        return False

    def peak_measurement(
        self, autocast_dtype: torch.dtype | None, tf32: bool, convolutions_lead: bool
    ) -> Measurement:
        # Small: most CPUs emulate bf16, where oneDNN's convolutions far outrun its products.
        dtype = autocast_dtype or torch.float32
        size = 1024 if dtype == torch.float32 else 256
        return Measurement(
            dtype, False, size, 1, 3, 1, convolutions=convolutions_lead, least_seconds=0.5
        )

    def most_flops(self, precision: str, threads: int) -> float:
        return CPU_THREAD_MOST_FLOPS.get(precision, max(CPU_THREAD_MOST_FLOPS.values())) * threads

    def datasheet_peak(self, device: torch.device, precision: str) -> DatasheetPeak | None:
        return None  # no datasheet fixes the cores, clocks and vector units a run gets

    def peak_kinds(self) -> list[tuple[torch.dtype | None, bool]]:
        return [(dtype, lead) for dtype in (None, torch.bfloat16) for lead in (False, True)]

    def energy_counters(self, devices: Sequence[torch.device], powercap: Path) -> list[Counter]:
        return rapl_counters(powercap)

    def profiler_activities(self) -> list[ProfilerActivity]:
        return [ProfilerActivity.CPU]


def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo has it (else Python's platform's)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def machine_id() -> str:
    """systemd's id of this machine, else its host name."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            if found := Path(path).read_text().strip():
                return found
    return socket.gethostname()
