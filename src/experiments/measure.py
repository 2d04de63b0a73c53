"""How long work takes on a device, and how much memory a run needed at its peak.

`DeviceTimer` adds up spans of work without making the host wait for the device on every step: on
a GPU it records CUDA events and reads them once, when asked for the total; on the CPU the work is
done when the host returns, so the host clock measures it.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import torch

MIB = 2**20


class DeviceTimer:
    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._spans: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._host_seconds = 0.0

    def start(self) -> torch.cuda.Event | float:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def stop(self, start: torch.cuda.Event | float) -> None:
        if isinstance(start, float):
            self._host_seconds += time.perf_counter() - start
            return
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        self._spans.append((start, end))

    def take(self) -> float:
        """Seconds in all spans since the last call (waits for the device to reach them)."""
        seconds = self._host_seconds
        for start, end in self._spans:
            end.synchronize()
            seconds += start.elapsed_time(end) / 1000
        self._spans.clear()
        self._host_seconds = 0.0
        return seconds


def reset_peak_memory(device: torch.device) -> None:
    """Start counting peak memory from now: host RSS (Linux) and CUDA allocations."""
    # On Linux, writing 5 resets the kernel's record of this process's peak resident set (VmHWM);
    # elsewhere the peak counts from the start of the process.
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_mb(device: torch.device) -> dict[str, float | None]:
    """Peak host resident memory and, on a GPU, peak CUDA memory allocated, in MiB."""
    cuda = torch.cuda.max_memory_allocated(device) / MIB if device.type == "cuda" else None
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
