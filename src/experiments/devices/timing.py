"""How long work takes on a device.

`DeviceTimer` adds up spans of work without making the host wait for the device on every step: on
a GPU it records CUDA events and reads them once, when asked for the total; on the CPU the work is
done when the host returns, so the host clock measures it.
"""

from __future__ import annotations

import time

import torch


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


def wait_for(device: torch.device) -> None:
    """Return once `device` has done the work queued on it (on the CPU, it has already)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
