"""The energy a run's devices used, from their hardware's counters, or why there are none."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import torch

from experiments.core.errors import one_line
from experiments.devices.backends.base import Backend
from experiments.devices.backends.registry import BACKENDS, backend_for
from experiments.devices.measuring.energy_counters import POWERCAP, Counter, NoCounter

INTERVAL = 5.0  # seconds between a span's readings: far under a counter's wrap
COVERS = {backend.energy_source: backend.energy_covers for backend in BACKENDS.values()}


def increase(earlier: int, later: int, wrap: int) -> int:
    """How far a counter that wraps to 0 at `wrap` rose from `earlier` to `later`, within a wrap."""
    return (later - earlier) % wrap


def added_up(readings: Sequence[int], wrap: int) -> int:
    """How far a counter that wraps at `wrap` rose over successive `readings`."""
    return sum(increase(earlier, later, wrap) for earlier, later in pairwise(readings))


@dataclass(frozen=True)
class CounterEnergy:
    name: str
    joules: float
    watts: float


@dataclass(frozen=True)
class Energy:
    source: str  # "nvml" or "rapl"
    joules: float
    seconds: float
    counters: tuple[CounterEnergy, ...]
    covers: str  # what the counters count besides the run's own work

    @property
    def watts(self) -> float:
        return self.joules / self.seconds

    def per_image(self, images: int) -> float:
        """The joules per image of `images` (more than none)."""
        return self.joules / images

    def energy_record(self) -> dict[str, Any]:
        """The span as results.json keeps it (its EnergyRecord)."""
        counters = [asdict(counter) for counter in self.counters]
        return {**asdict(self), "watts": self.watts, "counters": counters}


class Span:
    """The energy used from `start` to `stop`, or over a `with` block (synchronize GPUs first)."""

    def __init__(self, meter: EnergyMeter, interval: float) -> None:
        self._counters = meter.counters
        self._source = meter.source
        self._interval = interval
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)
        self.unavailable = meter.unavailable
        self.energy: Energy | None = None

    def start(self) -> Span:
        """Read every counter, and again every `interval` seconds until `stop`."""
        if self.unavailable is None:
            self._risen = [0] * len(self._counters)
            self._last = self._read()
            self._started = time.perf_counter()
            self._thread.start()
        return self

    def stop(self) -> Energy | None:
        """Read every counter a last time: the span's energy, or None (`unavailable` says why)."""
        if not self._thread.is_alive():
            return self.energy
        self._stopping.set()
        self._thread.join()
        self._sample()
        seconds = time.perf_counter() - self._started
        if self.unavailable is None and not any(self._risen):
            self.unavailable = f"the energy counters did not advance in {seconds:.3g} s"
        if self.unavailable is not None:
            return None
        counted = []
        for counter, risen in zip(self._counters, self._risen, strict=True):
            joules = risen * counter.joules
            counted.append(CounterEnergy(counter.name, joules, joules / seconds))
        total = sum(counter.joules for counter in counted)
        self.energy = Energy(self._source, total, seconds, tuple(counted), COVERS[self._source])
        return self.energy

    def __enter__(self) -> Span:
        return self.start()

    def __exit__(self, *exception: object) -> None:
        self.stop()

    def _sample_until_stopped(self) -> None:
        while not self._stopping.wait(self._interval) and self.unavailable is None:
            self._sample()

    def _sample(self) -> None:
        # The thread's, then `stop`'s: never both at once.
        readings = self._read() if self.unavailable is None else None
        if readings is None:
            return
        for index, counter in enumerate(self._counters):
            self._risen[index] += increase(self._last[index], readings[index], counter.wrap)
        self._last = readings

    def _read(self) -> list[int] | None:
        """Every counter's reading; None, and why in `unavailable`: it never fails the run."""
        readings = []
        for counter in self._counters:
            try:
                readings.append(counter.read())
            except Exception as error:  # whatever NVML or the kernel raises, said in one line
                self.unavailable = f"{counter.name} could not be read: {one_line(error)}"
                return None
        return readings


class EnergyMeter:
    """The energy counters of a run's devices, all from one source, or why there are none."""

    def __init__(self, source: str, counters: Sequence[Counter], unavailable: str | None) -> None:
        self.source = source
        self.counters = tuple(counters)
        self.unavailable = unavailable

    @classmethod
    def for_devices(cls, devices: Sequence[torch.device], powercap: Path = POWERCAP) -> EnergyMeter:
        """The counters of `devices`, all of one kind, each read once before a run relies on it."""
        backend = _backend_of(devices)
        try:
            counters = backend.energy_counters(devices, powercap)
        except NoCounter as reason:
            return cls(backend.energy_source, [], str(reason))
        return cls(backend.energy_source, counters, None)

    @classmethod
    def for_process(
        cls, devices: Sequence[torch.device], local_rank: int, powercap: Path = POWERCAP
    ) -> EnergyMeter:
        """The counters of this process's `devices`: process 0's alone where they are shared."""
        backend = _backend_of(devices)
        if not backend.each_process_owns_its_device and local_rank != 0:
            return cls(backend.energy_source, [], "read by process 0 of this machine")
        return cls.for_devices(devices, powercap)

    def measuring(self, interval: float = INTERVAL) -> Span:
        """A span to measure a block with (`with meter.measuring() as span:`), or to `start`."""
        return Span(self, interval)

    def text(self) -> str:
        """What the meter reads: "RAPL: package-0, package-1", or "none (<why>)"."""
        if self.unavailable is not None:
            return f"none ({self.unavailable})"
        return f"{self.source.upper()}: {', '.join(counter.name for counter in self.counters)}"


def _backend_of(devices: Sequence[torch.device]) -> Backend:
    kinds = {device.type for device in devices}
    if len(kinds) != 1:
        raise ValueError(f"an energy meter reads devices of one kind, not of {sorted(kinds)}")
    return backend_for(kinds.pop())
