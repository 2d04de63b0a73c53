"""The energy counters of each GPU (NVML's) and CPU package (RAPL's), or NoCounter: why not."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch

from experiments.core.errors import one_line
from experiments.core.text import gpu_name

POWERCAP = Path("/sys/class/powercap")
NVML_RANGE = 2**64  # NVML's counter is an unsigned 64-bit count of millijoules
INSTALL = "pip install 'experiments[energy]'"


class NoCounter(Exception):
    """Why a device's energy cannot be read here, in one line."""


@dataclass(frozen=True)
class Counter:
    """One device's energy counter: its reading, in `joules` each, wraps to 0 at `wrap`."""

    name: str
    read: Callable[[], int]
    wrap: int
    joules: float


def rapl_counters(powercap: Path) -> list[Counter]:
    """The counter of each CPU package (subzones, and psys, would count some of it twice)."""
    if not powercap.is_dir():
        raise NoCounter(f"no RAPL counter readable here ({powercap}: absent)")
    zones = sorted(
        zone
        for zone in powercap.glob("intel-rapl:*")
        if zone.name.count(":") == 1 and _zone_name(zone).startswith("package")
    )
    if not zones:
        raise NoCounter(f"no RAPL counter readable here ({powercap}: no package zone intel-rapl:N)")
    counters = []
    for zone in zones:
        energy = zone / "energy_uj"
        wrap = _first_reading(zone / "max_energy_range_uj")
        _first_reading(energy)
        counters.append(Counter(_zone_name(zone), partial(_count, energy), wrap, 1e-6))
    return counters


def _zone_name(zone: Path) -> str:
    try:
        return (zone / "name").read_text().strip()
    except OSError:
        return zone.name


def _count(path: Path) -> int:
    return int(path.read_text())


def _first_reading(path: Path) -> int:
    """The count a powercap file holds, or NoCounter naming it and why it cannot be read."""
    try:
        return _count(path)
    except FileNotFoundError:
        why = "absent"
    except PermissionError:
        why = "readable by root only"
    except (OSError, ValueError) as error:
        why = one_line(error)
    raise NoCounter(f"no RAPL counter readable here ({path}: {why})")


def nvml_uuids(uuid: str) -> list[str]:
    """The names NVML may know torch's `uuid` by (bare or not): a whole GPU's, then a MIG's."""
    if uuid.startswith(("GPU-", "MIG-")):
        return [uuid]
    return [f"GPU-{uuid}", f"MIG-{uuid}"]


def _nvml_handle(pynvml: Any, name: str, uuid: str) -> Any:
    for known_as in nvml_uuids(uuid):
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(known_as)
        except pynvml.NVMLError as error:
            missing = error
    raise NoCounter(f"{name} is not found by NVML by its UUID {uuid} ({missing})")


def nvml_counters(gpus: Sequence[torch.device]) -> list[Counter]:
    """NVML's counter of each of `gpus`, found by UUID (CUDA's numbering may differ from NVML's)."""
    try:
        import pynvml  # an optional extra, needed on GPUs only
    except ImportError:
        raise NoCounter(f"nvidia-ml-py is not installed ({INSTALL})") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        raise NoCounter(f"NVML: {error}") from None
    counters = []
    for gpu in gpus:
        index = gpu.index if gpu.index is not None else torch.cuda.current_device()
        properties = torch.cuda.get_device_properties(index)
        name = f"{gpu_name(index)} ({properties.name})"
        handle = _nvml_handle(pynvml, name, str(properties.uuid))
        if pynvml.nvmlDeviceIsMigDeviceHandle(handle):
            raise NoCounter(
                f"{name} is a MIG instance, which NVML does not meter (only its whole GPU, whose "
                "energy the other instances share)"
            )
        try:
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except pynvml.NVMLError as error:
            raise NoCounter(f"{name} has no energy counter (NVML: {error})") from None
        read = partial(pynvml.nvmlDeviceGetTotalEnergyConsumption, handle)
        counters.append(Counter(name, read, NVML_RANGE, 1e-3))
    return counters
