"""The model wrapped for several GPUs (DataParallel) or processes (DDP), and unwrapped again."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from experiments.core.errors import ExperimentError
from experiments.devices.backends.registry import backend_for
from experiments.devices.plan import DevicePlan


def parallelize(
    model: nn.Module,
    plan: DevicePlan,
    autocast_dtype: torch.dtype | None,
    sync_batchnorm: bool = False,
) -> nn.Module:
    """Wrap the placed model for the plan's GPUs or processes, with SyncBatchNorm if asked."""
    kind = backend_for(plan.type)
    if sync_batchnorm:
        if not plan.backend or not kind.runs_sync_batchnorm:
            where = "" if kind.runs_sync_batchnorm else ", where torch's SyncBatchNorm does not run"
            raise ExperimentError(
                "trainer.sync_batchnorm=true pools BatchNorm's statistics over device=ddp's "
                f"processes on GPUs, but this run is on {plan}{where}; set it false"
            )
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    if plan.ids:
        if autocast_dtype is not None:
            # DataParallel's replicas, in threads of their own, would re-enter autocast as fp16.
            model = AutocastForward(model, autocast_dtype)
        return nn.DataParallel(model, device_ids=list(plan.ids), output_device=plan.index)
    if plan.backend:
        device_ids = [plan.index] if kind.each_process_owns_its_device else None
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)
    return model


def sync_batchnorm_waits(model: nn.Module) -> str | None:
    """One line for a model with SyncBatchNorm layers (each reads back a count every step)."""
    layers = sum(isinstance(module, nn.SyncBatchNorm) for module in model.modules())
    if not layers:
        return None
    return (
        f"trainer.sync_batchnorm=true: each of the model's {layers} BatchNorm layers makes the "
        "host wait for the GPU once a step, so the host cannot queue steps ahead of it"
    )


class AutocastForward(nn.Module):
    """A module whose forward runs under CUDA autocast to `dtype`, in whatever thread calls it."""

    def __init__(self, module: nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.module = module
        self.dtype = dtype

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cuda", dtype=self.dtype):
            return self.module(*inputs)


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside its DataParallel, DDP, autocast and torch.compile wrappers."""
    # torch._dynamo takes seconds to import: a model is compiled only once it has been.
    compiled = sys.modules.get("torch._dynamo.eval_frame")
    while True:
        if isinstance(
            model, (nn.DataParallel, nn.parallel.DistributedDataParallel, AutocastForward)
        ):
            model = model.module
        elif compiled is not None and isinstance(model, compiled.OptimizedModule):
            model = model._orig_mod
        else:
            return model


def without_gradient_sync(model: nn.Module) -> AbstractContextManager[object]:
    """DDP's `no_sync` (gradients add up, not averaged) for a DDP model, compiled or not."""
    compiled = sys.modules.get("torch._dynamo.eval_frame")
    if compiled is not None and isinstance(model, compiled.OptimizedModule):
        model = model._orig_mod
    if isinstance(model, nn.parallel.DistributedDataParallel):
        return model.no_sync()
    return nullcontext()
