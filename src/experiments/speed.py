"""Speed settings for the training step, each a `trainer` field, each measured (docs/speed.md).

trainer.keep_freed_memory  glibc's malloc keeps freed memory for reuse (on by default: Tudui
                           trains much faster on the CPU)
trainer.precision          fp32, bf16 (autocast), or fp16 (autocast, gradient scaling; CUDA
                           only): the step itself is written out in `experiments.loop`
trainer.channels_last      the model and its input in channels-last memory format (by
                           default on the CPU: much faster there)
trainer.compile            torch.compile the model, with this backend (applied in
                           `experiments.job`)
"""

from __future__ import annotations

import ctypes
import platform
import sys
from typing import TYPE_CHECKING

import torch

from experiments.config import Precision
from experiments.devices import gpu
from experiments.errors import ExperimentError

if TYPE_CHECKING:
    from experiments.devices import DevicePlan

# mallopt(3) parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory instead of returning it to the system at once.

    A training step frees and re-allocates the same large buffers every time; by default glibc
    unmaps them on free and maps them again (page faults each step). With buffers up to 32 MiB
    served from the heap and up to 1 GiB of free heap kept, they are simply reused. Returns
    whether it applied (only on Linux with glibc).
    """
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL("libc.so.6")
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20) and libc.mallopt(M_TRIM_THRESHOLD, 2**30)
    )


AUTOCAST_DTYPES = {
    Precision.fp32: None,
    Precision.bf16: torch.bfloat16,
    Precision.fp16: torch.float16,
}


def precision(
    name: Precision, device: torch.device
) -> tuple[torch.dtype | None, torch.amp.GradScaler]:
    """What trainer.precision asks of the training step: the dtype to autocast the forward pass
    and the loss to (None: none, fp32), and a gradient scaler, enabled for fp16 only (fp16's
    small gradients would underflow unscaled; a disabled scaler passes everything through)."""
    if name == Precision.fp16 and device.type != "cuda":
        raise ExperimentError(
            f"trainer.precision=fp16 needs a CUDA device (its gradient scaling runs there); "
            f"on {device.type} use bf16 or fp32"
        )
    scaler = torch.amp.GradScaler(device.type, enabled=name == Precision.fp16)
    return AUTOCAST_DTYPES[name], scaler


def emulated_bf16(name: Precision, plan: DevicePlan) -> str | None:
    """One line when trainer.precision=bf16 would run emulated, slower than fp32, on a GPU of the
    plan that has no bfloat16 units (such as the V100 and the T4); None otherwise."""
    if name != Precision.bf16:
        return None
    emulated = []
    for index in plan.gpus:
        with torch.cuda.device(index):
            if not torch.cuda.is_bf16_supported(including_emulation=False):
                emulated.append(f"{gpu(index)} ({torch.cuda.get_device_name(index)})")
    if not emulated:
        return None
    return (
        f"trainer.precision=bf16: {', '.join(emulated)} has no native bfloat16 and emulates it, "
        "slower than fp32; fp16 runs natively there"
    )


def channels_last(requested: bool | None, device: torch.device) -> bool:
    """Whether to use channels-last memory format: as asked, or by default on the CPU only."""
    return device.type == "cpu" if requested is None else requested
