"""What a kind of device must provide (`Backend`), and the few values its methods hand back: a
`Mark` in the device's queue of work, a peak's `Measurement`, a device's `DeviceIdentity`.

A kind's facts are properties here, so that a kind that leaves one out cannot be made; its
module sets each as a plain class attribute.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn
from torch.profiler import ProfilerActivity

from experiments.devices.measuring.energy_counters import Counter

ModuleT = TypeVar("ModuleT", bound=nn.Module)

# What the report and results.json call each precision a peak was measured in.
PRECISION_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


class Mark(ABC):
    """A point in a device's queue of work, marked without the host waiting for the device."""

    @abstractmethod
    def seconds_since(self, start: Mark) -> float:
        """The seconds the device took from `start` (a mark of the same device, made earlier) to
        this mark; waits for the device to reach this mark."""


@dataclass(frozen=True)
class Measurement:
    """How a peak is measured: `timings` timings of `products` back-to-back `size` x `size`
    products in `dtype` (with TF32 where `tf32`), the best taken, after `warm_up` products; with
    `convolutions`, channels-last convolutions timed alike, the faster taken."""

    dtype: torch.dtype
    tf32: bool
    size: int
    products: int
    timings: int
    warm_up: int
    convolutions: bool = False
    # Timed on for at least this long (more timings than `timings`): on the CPU, long enough
    # for /proc to tell whether other work shared it meanwhile (`measuring.host_load`), and for
    # a moment of it to be passed over by the best timing.
    least_seconds: float = 0.0

    @property
    def precision(self) -> str:
        """fp32, tf32, bf16 or fp16: what results.json records as `device_peak_precision`."""
        return "tf32" if self.tf32 else PRECISION_NAMES[self.dtype]

    @property
    def operations(self) -> str:
        """What was timed: a peak's cache keeps peaks of different operations apart."""
        return "products and convolutions" if self.convolutions else "products"


@dataclass(frozen=True)
class DeviceIdentity:
    """What a peak belongs to: the device's name and UUID, and for the CPU the threads torch
    computes on."""

    name: str
    uuid: str
    threads: int | None

    def key(self, precision: str) -> str:
        threads = f", {self.threads} threads" if self.threads is not None else ""
        return f"{self.name} [{self.uuid}]{threads}: {precision}, torch {torch.__version__}"


class Backend(ABC):
    """Everything about a run that depends on the kind of device it computes on."""

    @property
    @abstractmethod
    def name(self) -> str:
        """The kind as `torch.device.type` spells it (`names`): what the registry finds it by."""

    @property
    @abstractmethod
    def noun(self) -> str:
        """What people call a device of this kind in a sentence: GPU, CPU."""

    @property
    @abstractmethod
    def is_host(self) -> bool:
        """Whether the device is the host's own CPU: its work shares the host's cores with other
        processes' (`host_load` judges a measurement on it), and it computes in the host's
        memory, which swaps rather than fails when full (its peak is the process's resident
        set, and a batch search keeps within a budget of it)."""

    @property
    @abstractmethod
    def runs_ahead_of_host(self) -> bool:
        """Whether the host queues work on the device and returns before it is done: what makes
        a read-back (such as fp16's GradScaler's, unfused) hold the host up."""

    @property
    @abstractmethod
    def copies_from_pinned_memory(self) -> bool:
        """Whether host tensors are copied to the device from pinned memory, so that the copy
        does not make the host wait for the device's queued work first."""

    @property
    @abstractmethod
    def channels_last_by_default(self) -> bool:
        """Whether `trainer.channels_last=null` means channels-last memory format here."""

    @property
    @abstractmethod
    def trains_fp16(self) -> bool:
        """Whether `trainer.precision=fp16` (autocast with GradScaler) trains here."""

    @property
    @abstractmethod
    def fuses_optimizer_by_default(self) -> bool:
        """Whether `optimizer.fused=null` fuses the step where torch has a fused kernel here
        (else it keeps torch's own choice)."""

    @property
    @abstractmethod
    def replays_cuda_graphs(self) -> bool:
        """Whether a compile backend or mode that captures CUDA graphs can run here."""

    @property
    @abstractmethod
    def uses_cudnn(self) -> bool:
        """Whether cuDNN computes the convolutions here (so `trainer.cudnn_benchmark` applies)."""

    @property
    @abstractmethod
    def runs_sync_batchnorm(self) -> bool:
        """Whether torch's SyncBatchNorm runs on devices of this kind."""

    @property
    @abstractmethod
    def each_process_owns_its_device(self) -> bool:
        """Whether each of DDP's processes computes on a device of its own, bound to it
        (`init_process_group`'s `device_id`, DDP's `device_ids`) and shared by no other, so that
        the processes' peaks add up; else the machine's processes share it, and one of them
        reads its energy counters for all."""

    @property
    @abstractmethod
    def energy_source(self) -> str:
        """Where the devices' energy counters are read from (nvml, rapl): results.json's
        `energy.source`."""

    @property
    @abstractmethod
    def energy_covers(self) -> str:
        """What those counters count besides the run's own work, for results.json."""

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
        """The most memory of its own `device` held allocated since the last reset; None for a
        device that computes in the host's memory."""

    @abstractmethod
    def free_cached_memory(self) -> None:
        """Hand back the memory torch's allocator keeps for reuse, so the next try starts free."""

    @abstractmethod
    def refuse_nondeterministic(self) -> None:
        """Refuse, in one line, a `trainer.deterministic=true` run that this process cannot
        compute deterministically here."""

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
        """What results.json's device record says of `device`: its name, and what tells it
        apart or what its speed grows with."""

    @abstractmethod
    def tf32_in_use(self, device: torch.device, convolutions_lead: bool) -> bool:
        """Whether a model's fp32 operations on `device` compute in TF32: its convolutions
        (where they lead its FLOPs), else its matrix products."""

    @abstractmethod
    def peak_measurement(
        self, autocast_dtype: torch.dtype | None, tf32: bool, convolutions_lead: bool
    ) -> Measurement:
        """How to measure the peak a run can reach here: in its autocast dtype (None: fp32, in
        TF32 where `tf32`), of a model whose FLOPs convolutions lead, or matrix products."""

    @abstractmethod
    def most_flops(self, precision: str, threads: int) -> float:
        """The most FLOP/s any device of this kind can do in `precision` (the CPU, computing on
        `threads` threads): a cached peak above it is wrong, and measured again."""

    @abstractmethod
    def peak_kinds(self) -> list[tuple[torch.dtype | None, bool]]:
        """Every peak a run here may divide by: (autocast dtype, None for fp32; whether
        convolutions lead the model) for each that is measured apart."""

    @abstractmethod
    def energy_counters(self, devices: Sequence[torch.device], powercap: Path) -> list[Counter]:
        """The energy counters of `devices` (RAPL's under the `powercap` tree, for the CPU), each
        read once; `energy_counters.NoCounter` says in one line why none can be read."""

    @abstractmethod
    def profiler_activities(self) -> list[ProfilerActivity]:
        """What torch.profiler records of a step here."""
