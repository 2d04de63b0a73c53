"""Speed settings for the training step, each a `trainer` field, each measured in bench/RESULTS.md.

    trainer.keep_freed_memory  glibc's malloc keeps freed memory for reuse (on by default: Tudui
                               trains much faster on the CPU; see the README)
    trainer.precision          32, bf16 (autocast), or fp16 (autocast, gradient scaling; CUDA only)
    trainer.channels_last      the model and its input in channels-last memory format (by
                               default on the CPU: much faster there)
    trainer.compile            torch.compile the model, with this backend (e.g. inductor)

(The last two are applied in the story of a run, `experiments.train`.)
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import sys
from collections.abc import Iterator

import torch

from experiments.errors import ExperimentError

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


PRECISIONS = {"32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class Precision:
    """Autocast for the forward pass and the loss; gradient scaling for fp16."""

    def __init__(self, name: str, device: torch.device) -> None:
        if name not in PRECISIONS:
            raise ExperimentError(
                f"trainer.precision={name} is not a precision; valid: {', '.join(PRECISIONS)}"
            )
        if name == "fp16" and device.type != "cuda":
            raise ExperimentError(
                f"trainer.precision=fp16 needs a CUDA device (its gradient scaling runs there); "
                f"on {device.type} use bf16 or 32"
            )
        self.name = name
        self.device_type = device.type
        self.dtype = PRECISIONS[name]
        self.scaler = torch.amp.GradScaler(device.type, enabled=name == "fp16")

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        with torch.autocast(self.device_type, dtype=self.dtype, enabled=self.dtype is not None):
            yield

    def step(self, loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
        """Backward and optimizer step, with the loss scaled when fp16 needs it."""
        self.scaler.scale(loss).backward()
        self.scaler.step(optimizer)
        self.scaler.update()


def channels_last(requested: bool | None, device: torch.device) -> bool:
    """Whether to use channels-last memory format: as asked, or by default on the CPU only."""
    return device.type == "cpu" if requested is None else requested
