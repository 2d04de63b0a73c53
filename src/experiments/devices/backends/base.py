"""What a kind of device must provide (`Backend`), and the values its methods hand back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn
from torch.profiler import ProfilerActivity

from experiments.devices.measuring.datasheet import DatasheetPeak
from experiments.devices.measuring.energy_counters import Counter

ModuleT = TypeVar("ModuleT", bound=nn.Module)

PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


class Mark(ABC):
    """A point in a device's queue of work, marked without the host waiting for the device."""

    @abstractmethod
    def seconds_since(self, start: Mark) -> float:
        """The device's seconds from `start`, an earlier mark of it; waits to reach this mark."""


@dataclass(frozen=True)
class Measurement:
    """How a peak is measured: the best of `timings` timings of `products` `size` x `size` products
    in `dtype` (TF32 where `tf32`) after `warm_up`; with `convolutions`, theirs where faster."""

    dtype: torch.dtype
    tf32: bool
    size: int
    products: int
    timings: int
    warm_up: int
    convolutions: bool = False
    # On the CPU, long enough for /proc to tell whether other work shared it (`host_load`).
    least_seconds: float = 0.0

    @property
    def precision(self) -> str:
        """fp32, tf32, bf16 or fp16: results.json's `device_peak_precision`."""
        return "tf32" if self.tf32 else PRECISION_NAMES[self.dtype]

    @property
    def operations(self) -> str:
        """What was timed: the cache keeps peaks of different operations apart."""
        return "products and convolutions" if self.convolutions else "products"


@dataclass(frozen=True)
class DeviceIdentity:
    """What a peak belongs to: the device's name and UUID, and for the CPU torch's threads."""

    name: str
    uuid: str
    threads: int | None

    def key(self, precision: str) -> str:
        threads = f", {self.threads} threads" if self.threads is not None else ""
        return f"{self.name} [{self.uuid}]{threads}: {precision}, torch {torch.__version__}"


def _fact(doc: str) -> Any:
    """A fact each kind sets as a class attribute: a kind that leaves one out cannot be made."""
    return property(abstractmethod(lambda self: None), doc=doc)


class Backend(ABC):
    name: str = _fact("The kind as `torch.device.type` spells it (`names`).")
    noun: str = _fact("What a sentence calls a device of this kind: GPU, CPU.")
    is_host: bool = _fact(
        "Whether the device is the host's CPU: it shares the host's cores with other processes, "
        "and its memory, which swaps rather than fails when full."
    )
    runs_ahead_of_host: bool = _fact(
        "Whether the host queues work and returns before it is done, so a read-back holds it up."
    )
    copies_from_pinned_memory: bool = _fact(
        "Whether host tensors are copied from pinned memory, not to wait for the queued work."
    )
    channels_last_by_default: bool = _fact("What `trainer.channels_last=null` means here.")
    trains_fp16: bool = _fact("Whether `trainer.precision=fp16` (with GradScaler) trains here.")
    fuses_optimizer_by_default: bool = _fact(
        "Whether `optimizer.fused=null` fuses the step where torch can (else torch's choice)."
    )
    replays_cuda_graphs: bool = _fact("Whether a compile mode that captures CUDA graphs runs here.")
    uses_cudnn: bool = _fact("Whether cuDNN convolves here (so `trainer.cudnn_benchmark` applies).")
    runs_sync_batchnorm: bool = _fact("Whether torch's SyncBatchNorm runs here.")
    each_process_owns_its_device: bool = _fact(
        "Whether each DDP process has a device of its own, bound to it, so their peaks add up; "
        "else they share it, and one reads its energy counters for all."
    )
    energy_source: str = _fact("Where the energy counters are read (nvml, rapl): `energy.source`.")
    energy_covers: str = _fact("What those counters count besides the run's own work.")

    @abstractmethod
    def set_device(self, device: torch.device) -> None:
        """Make `device` the process's current one, so that nothing lands elsewhere by default."""

    @abstractmethod
    def wait(self, device: torch.device) -> None:
        """Return once `device` has done the work queued on it."""

    @abstractmethod
    def mark(self, device: torch.device) -> Mark:
        """A mark of now in `device`'s queue of work: two of them time the work between."""

    @abstractmethod
    def reset_peak_memory(self, device: torch.device) -> None:
        """Count `device`'s own peak memory from now (the host's is counted apart)."""

    @abstractmethod
    def peak_memory_bytes(self, device: torch.device) -> int | None:
        """`device`'s own peak allocated memory since the reset; None where it is the host's."""

    @abstractmethod
    def free_cached_memory(self) -> None:
        """Hand back the memory torch's allocator keeps for reuse, so the next try starts free."""

    @abstractmethod
    def refuse_nondeterministic(self) -> None:
        """Refuse in one line a deterministic run this process cannot compute deterministically."""

    @abstractmethod
    def module_by_method(self, module: ModuleT, device: torch.device) -> ModuleT:
        """`module` on `device` by the kind's own method, as the tutorials write it."""

    @abstractmethod
    def tensor_by_method(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        """`tensor` on `device` by the kind's own method, as the tutorials write it."""

    @abstractmethod
    def identity(self, device: torch.device) -> DeviceIdentity:
        """What tells `device` apart from every other: what its measured peaks are kept by."""

    @abstractmethod
    def device_record_fields(self, device: torch.device) -> dict[str, Any]:
        """What results.json's device record says of `device`."""

    @abstractmethod
    def tf32_in_use(self, device: torch.device, convolutions_lead: bool) -> bool:
        """Whether fp32 convolutions (where they lead the FLOPs), else products, run in TF32."""

    @abstractmethod
    def peak_measurement(
        self, autocast_dtype: torch.dtype | None, tf32: bool, convolutions_lead: bool
    ) -> Measurement:
        """How to measure the peak a run in `autocast_dtype` (None: fp32) can reach here."""

    @abstractmethod
    def most_flops(self, precision: str, threads: int) -> float:
        """The most FLOP/s any such device can do: a cached peak above it is measured again."""

    @abstractmethod
    def datasheet_peak(self, device: torch.device, precision: str) -> DatasheetPeak | None:
        """`device`'s dense peak in `precision` as its maker states it; None where none is."""

    @abstractmethod
    def peak_kinds(self) -> list[tuple[torch.dtype | None, bool]]:
        """(autocast dtype, whether convolutions lead) of each peak measured apart here."""

    @abstractmethod
    def energy_counters(self, devices: Sequence[torch.device], powercap: Path) -> list[Counter]:
        """The energy counters of `devices`, each read once; `NoCounter` says why there are none."""

    @abstractmethod
    def profiler_activities(self) -> list[ProfilerActivity]:
        """What torch.profiler records of a step here."""
