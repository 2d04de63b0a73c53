"""What trainer.precision asks of the training step: fp32, bf16, or fp16 (CUDA only)."""

from __future__ import annotations

import torch

from experiments.config.choices import Precision
from experiments.core.errors import ExperimentError
from experiments.core.text import gpu_name
from experiments.devices.backends.registry import backend_for
from experiments.devices.plan import DevicePlan

AUTOCAST_DTYPES = {
    Precision.fp32: None,
    Precision.bf16: torch.bfloat16,
    Precision.fp16: torch.float16,
}


def autocast_and_scaler(
    name: Precision, device: torch.device, key: str = "trainer.precision"
) -> tuple[torch.dtype | None, torch.amp.GradScaler]:
    """The autocast dtype (None: fp32), and a gradient scaler, enabled for fp16 alone."""
    if name == Precision.fp16 and not backend_for(device.type).trains_fp16:
        raise ExperimentError(
            f"{key}=fp16 needs a CUDA device (its gradient scaling, and its fast kernels, run "
            f"there); on {device.type} use bf16 or fp32"
        )
    scaler = torch.amp.GradScaler(device.type, enabled=name == Precision.fp16)
    return AUTOCAST_DTYPES[name], scaler


def emulated_bf16(name: Precision, plan: DevicePlan) -> str | None:
    """One line where bf16 would run emulated, slower than fp32, on a GPU of the plan (a V100)."""
    if name != Precision.bf16:
        return None
    emulated = []
    for index in plan.gpus:
        with torch.cuda.device(index):
            if not torch.cuda.is_bf16_supported(including_emulation=False):
                emulated.append(f"{gpu_name(index)} ({torch.cuda.get_device_name(index)})")
    if not emulated:
        return None
    return (
        f"trainer.precision=bf16: {', '.join(emulated)} has no native bfloat16 and emulates it, "
        "slower than fp32; fp16 runs natively there"
    )
