"""Memory settings of a job, each a `trainer` field measured in docs/speed.md, and how much memory
it needed at its peak.

trainer.keep_freed_memory  glibc's malloc keeps freed memory for reuse (on by default: Tudui
                           trains much faster on the CPU)
trainer.channels_last      the model and its input in channels-last memory format (by default
                           on the CPU: much faster there)
"""

from __future__ import annotations

import contextlib
import ctypes
import platform
import sys
from pathlib import Path

import torch

from experiments.devices.plan import DevicePlan

MIB = 2**20

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


def channels_last(requested: bool | None, device: torch.device) -> bool:
    """Whether to use channels-last memory format: as asked, or by default on the CPU only."""
    return device.type == "cpu" if requested is None else requested


def reset_peak_memory(plan: DevicePlan) -> None:
    """Start counting peak memory from now: host RSS (Linux) and CUDA allocations on every GPU
    of the plan."""
    # On Linux, writing 5 resets the kernel's record of this process's peak resident set (VmHWM);
    # elsewhere the peak counts from the start of the process.
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    for gpu in plan.gpus:
        torch.cuda.reset_peak_memory_stats(gpu)


def peak_memory_mb(plan: DevicePlan) -> dict[str, float | None]:
    """Peak host resident memory and, on GPUs, the peak CUDA memory allocated on the fullest of
    the plan's GPUs (DataParallel's replicas need memory on each; any may run out), in MiB."""
    peaks = [torch.cuda.max_memory_allocated(gpu) / MIB for gpu in plan.gpus]
    cuda = max(peaks) if peaks else None
    return {"peak_host_memory_mb": _peak_rss_bytes() / MIB, "peak_cuda_memory_mb": cuda}


def _peak_rss_bytes() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) * 1024  # reported in kB
    except OSError:
        pass
    try:
        import resource  # not on Windows
    except ImportError:
        return float("nan")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, kB elsewhere
