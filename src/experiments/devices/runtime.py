"""What a job runs on and in, decided once (`experiments.run.setup.prepare_runtime`) and passed
explicitly from there to the data, the model and the loop: the plan, the placement method, this
process's place among torchrun's, what the training step runs in (autocast dtype, gradient
scaler, memory format), and the backend of the device's kind (`runtime.backend`).

One word, one meaning: `cfg.device` is the user's request (`config.schemas.DeviceConfig`), the
`DevicePlan` what it resolved to on this machine, a `device` the `torch.device` computed on
(`plan.device`, `runtime.device`), and the `Runtime` all of the above with how the step runs.
`runtime.backend` is what differs between kinds of device (`devices.backends`: cpu, cuda);
`plan.backend` is DDP's for its collectives (nccl, gloo).
"""

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
    # What the forward pass and the loss run in (None: fp32), and the gradient scaler (enabled
    # for fp16 only; a disabled one passes everything through).
    autocast_dtype: torch.dtype | None = None
    scaler: torch.amp.GradScaler = field(default_factory=_disabled_scaler)
    # Model and batches in channels-last memory format.
    channels_last: bool = False

    def __post_init__(self) -> None:
        if self.placement.device != self.plan.device:
            raise ValueError(f"placement on {self.placement.device}, plan on {self.plan.device}")

    @property
    def device(self) -> torch.device:
        return self.plan.device

    @property
    def type(self) -> str:
        """The device's kind, as `torch.device.type` spells it: cuda, cpu."""
        return self.plan.type

    @property
    def backend(self) -> Backend:
        """What differs on a device of this kind (waiting for it, timing, memory, ...): ask it,
        never `type`."""
        return backend_for(self.plan.type)

    def autocast(self) -> AbstractContextManager[object]:
        """The context the forward pass and the loss run in: none in fp32 (a disabled
        torch.autocast still costs 6 µs a step, 2% of a small MLP's)."""
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.type, dtype=self.autocast_dtype)

    def __str__(self) -> str:
        return str(self.plan)
