"""How long work takes on a device.

`DeviceTimer` adds up spans of work without making the host wait for the device on every step:
each span is two marks in the device's queue of work (`Backend.mark`: CUDA events on a GPU, the
host's clock on the CPU, where the work is done when the host returns), read once, when asked for
the total.
"""

from __future__ import annotations

import torch

from experiments.devices.backends.base import Mark
from experiments.devices.backends.registry import backend_for


class DeviceTimer:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._backend = backend_for(device.type)
        self._spans: list[tuple[Mark, Mark]] = []

    def start(self) -> Mark:
        return self._backend.mark(self.device)

    def stop(self, start: Mark) -> None:
        self._spans.append((start, self._backend.mark(self.device)))

    def take(self) -> float:
        """Seconds in all spans since the last call (waits for the device to reach them)."""
        seconds = sum((end.seconds_since(start) for start, end in self._spans), 0.0)
        self._spans.clear()
        return seconds


def wait_for(device: torch.device) -> None:
    """Return once `device` has done the work queued on it (on the CPU, it has already)."""
    backend_for(device.type).wait(device)
