"""How long work takes on a device, marked in its queue and read only when asked (no waits)."""

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
    """Return once `device` has done the work queued on it."""
    backend_for(device.type).wait(device)
