"""How model, loss module and batches get onto the device (the tutorials' two ways); the audit."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.devices.backends.base import ModuleT
from experiments.devices.backends.registry import backend_for
from experiments.devices.plan import DevicePlan


class Placement(ABC):
    def __init__(self, device: torch.device) -> None:
        self.device = device

    @abstractmethod
    def module(self, module: ModuleT) -> ModuleT:
        """Move a module's parameters and buffers to the device (in place, as nn.Module does)."""

    @abstractmethod
    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """Return the tensor on the device; the copy does not wait where the source allows it."""


class ToDevice(Placement):
    def module(self, module: ModuleT) -> ModuleT:
        return module.to(self.device)

    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(self.device, non_blocking=True)


class CudaCall(Placement):
    """The device kind's own method: `.cuda(index)` on a CUDA device, `.cpu()` on the CPU."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device)
        self.backend = backend_for(device.type)

    def module(self, module: ModuleT) -> ModuleT:
        return self.backend.module_by_method(module, self.device)

    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.backend.tensor_by_method(tensor, self.device)


def to_device_async(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A small host tensor on `device`, from pinned memory so the host does not wait for the GPU."""
    if not backend_for(device.type).copies_from_pinned_memory or tensor.device == device:
        return tensor.to(device)
    # Contiguous: CUDA copies a strided tensor through a copy in ordinary memory.
    return tensor.contiguous().pin_memory().to(device, non_blocking=True)


def audit(
    model: nn.Module, task: nn.Module, batch: tuple[torch.Tensor, torch.Tensor], plan: DevicePlan
) -> None:
    """Before the first step, name the first tensor of model, task or batch off plan.device."""
    expected = plan.device
    for name, tensor in _placed_tensors(model, task, batch):
        if tensor.device != expected:
            raise ExperimentError(
                f"placement audit: {name} is on {tensor.device}, but device={plan} puts "
                f"everything on {expected}"
            )


def _placed_tensors(
    model: nn.Module, task: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]
) -> Iterator[tuple[str, torch.Tensor]]:
    for owner, module in (("model", model), ("task", task)):
        yield from ((f"{owner} parameter {n}", t) for n, t in module.named_parameters())
        yield from ((f"{owner} buffer {n}", t) for n, t in module.named_buffers())
    yield "batch images", batch[0]
    yield "batch labels", batch[1]
