"""What a job runs on and in; `runtime.backend` is its kind's (cpu, cuda), `plan.backend` DDP's."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

import torch

from experiments.devices.backends.base import Backend
from experiments.devices.backends.registry import backend_for
from experiments.devices.placement import Placement
from experiments.devices.plan import DevicePlan
from experiments.devices.process_group import ONE_PROCESS, ProcessGroup


def _disabled_scaler() -> torch.amp.GradScaler:
    return torch.amp.GradScaler("cpu", enabled=False)


@dataclass(frozen=True)
class Runtime:
    plan: DevicePlan
    placement: Placement  # how tensors and modules get onto plan.device
    group: ProcessGroup = ONE_PROCESS
    autocast_dtype: torch.dtype | None = None  # None: fp32
    scaler: torch.amp.GradScaler = field(default_factory=_disabled_scaler)  # enabled for fp16
    channels_last: bool = False

    def __post_init__(self) -> None:
        if self.placement.device != self.plan.device:
            raise ValueError(f"placement on {self.placement.device}, plan on {self.plan.device}")

    @property
    def device(self) -> torch.device:
        return self.plan.device

    @property
    def type(self) -> str:
        return self.plan.type

    @property
    def backend(self) -> Backend:
        """What differs on a device of this kind (waiting, timing, memory): ask it, never `type`."""
        return backend_for(self.plan.type)

    def autocast(self) -> AbstractContextManager[object]:
        """The forward pass's and the loss's context: none in fp32 (a disabled autocast costs)."""
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.type, dtype=self.autocast_dtype)

    def __str__(self) -> str:
        return str(self.plan)
