"""How model, loss module and batches get onto the device: the tutorials' two methods.

Both put every tensor in the same place, so for the same seed on the same device they give the same
numbers; a sweep over `placement` measures whether the method itself costs anything.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TypeVar

import torch
from torch import nn

ModuleT = TypeVar("ModuleT", bound=nn.Module)


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
    """`.to(device)` for everything."""

    def module(self, module: ModuleT) -> ModuleT:
        return module.to(self.device)

    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.to(self.device, non_blocking=True)


class CudaCall(Placement):
    """`.cuda(index)` on a CUDA device, `.cpu()` on the CPU."""

    def module(self, module: ModuleT) -> ModuleT:
        if self.device.type == "cuda":
            return module.cuda(self.device.index)
        return module.cpu()

    def tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.device.type == "cuda":
            return tensor.cuda(self.device.index, non_blocking=True)
        return tensor.cpu()
