"""trainer.batch_size=auto: the largest power of two that trains on the device (the CPU: within
trainer.memory_budget_gb), tried on copies, so a run that finds 512 trains as one given 512."""

from __future__ import annotations

import copy
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from omegaconf import DictConfig
from torch import nn

from experiments.config.choices import AUTO_BATCH
from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from experiments.data.types import ImageData
from experiments.devices import memory
from experiments.devices.runtime import Runtime
from experiments.training import loop, optimizers
from experiments.training.tasks import Task

# What stopped a search: results.json's `batch_search.stopped_by`.
OUT_OF_MEMORY = "out of memory"
MEMORY_BUDGET = "memory budget"
TRAINING_SPLIT = "training split"
GIB = 2**30


@dataclass(frozen=True)
class Search:
    """The largest batch that fit, what stopped the search, and each batch tried and if it fit."""

    largest: int
    stopped_by: str
    tried: list[tuple[int, bool]] = field(default_factory=list)


def largest_batch(fits: Callable[[int], str | None], fewest: int, most: int) -> Search | None:
    """The largest power of two from `fewest` up to `most` that `fits` (None: not even `fewest`)."""
    tried: list[tuple[int, bool]] = []
    batch, largest = fewest, None
    while batch <= most:
        why_not = fits(batch)
        tried.append((batch, why_not is None))
        if why_not is not None:
            return None if largest is None else Search(largest, why_not, tried)
        largest, batch = batch, 2 * batch
    return None if largest is None else Search(largest, TRAINING_SPLIT, tried)


def smallest_power_of_two(at_least: int) -> int:
    return 1 << max(at_least - 1, 0).bit_length()


@dataclass
class Trial:
    """A training step at a batch size, on copies of what the run trains: `largest_batch`'s try."""

    model: nn.Module  # unwrapped, on the device
    task: Task  # placed on the device
    optimizer: DictConfig
    data: ImageData
    runtime: Runtime
    budget_gb: float  # the CPU's: the process's peak resident memory allowed
    _peak_memory: list[tuple[int, float]] = field(default_factory=list)  # the CPU's (batch, bytes)

    def fits(self, batch: int) -> str | None:
        if not self.runtime.backend.is_host:
            return self._fits_gpu(batch)
        budget = self.budget_gb * GIB
        if self._predicted(batch) > budget:
            return MEMORY_BUDGET
        memory.reset_peak_memory(self.runtime.plan)
        self._step(batch)
        peak_memory = memory.peak_memory_mb(self.runtime.plan)["peak_host_memory_mb"] * 2**20
        self._peak_memory.append((batch, peak_memory))
        return None if peak_memory <= budget else MEMORY_BUDGET

    def _fits_gpu(self, batch: int) -> str | None:
        try:
            self._step(batch)
        except torch.OutOfMemoryError:
            return OUT_OF_MEMORY
        finally:
            # What the try held, freed before the next (an error's traceback holds its frames).
            gc.collect()
            self.runtime.backend.free_cached_memory()
        return None

    def _predicted(self, batch: int) -> float:
        """The peak memory at `batch`, on the line through the last two tries (0 before two)."""
        if len(self._peak_memory) < 2:
            return 0.0
        (small, low), (large, high) = self._peak_memory[-2:]
        return high + (high - low) / (large - small) * (batch - large)

    def _step(self, batch: int) -> None:
        data, runtime, model = self.data, self.runtime, copy.deepcopy(self.model)
        optimizer, _ = optimizers.build_optimizer(self.optimizer, model, runtime.type)
        scaler = torch.amp.GradScaler(runtime.type, enabled=runtime.scaler.is_enabled())
        learner = loop.Learner(model, self.task, optimizer)
        assert data.train is not None
        batches = Batches(
            data.train, batch_size=batch, mean=data.mean, std=data.std, runtime=runtime, limit=1
        )
        inputs, targets = next(iter(batches))
        loop.trial_step(learner, runtime, scaler, inputs, targets)


@dataclass(frozen=True)
class SearchResult:
    """The batch a run trains with, and how the search found it: results.json's `batch_search`."""

    batch: int
    search: Search
    halvings: int
    budget_gb: float | None
    seconds: float

    def record(self) -> dict[str, object]:
        return {
            "largest": self.search.largest,
            "trained": self.batch,
            "halvings": self.halvings,
            "stopped_by": self.search.stopped_by,
            "tried": [[batch, fit] for batch, fit in self.search.tried],
            "budget_gb": self.budget_gb,
            "seconds": self.seconds,
        }


def search(trial: Trial, fewest: int, halvings: int) -> SearchResult:
    """The largest batch `trial` fits, halved `halvings` times; the random numbers are untouched."""
    assert trial.data.train is not None
    loop.refuse_a_split_too_small(AUTO_BATCH, len(trial.data.train), fewest, 1, trial.data.unit)
    started, smallest = time.perf_counter(), smallest_power_of_two(fewest)
    with torch.random.fork_rng(devices=trial.runtime.plan.gpus):
        found = largest_batch(trial.fits, smallest, len(trial.data.train))
    device, on_host = trial.runtime.plan, trial.runtime.backend.is_host
    if found is None:
        why = f"not even a batch of {smallest} trains on {device}"
        if on_host:
            why += (
                f" within trainer.memory_budget_gb={trial.budget_gb:g} (the process's peak "
                "memory); raise it, or"
            )
        raise ExperimentError(f"trainer.batch_size=auto: {why} give trainer.batch_size a number")
    memory.reset_peak_memory(device)  # the tries' peak memory is not the run's
    batch = max(found.largest >> halvings, smallest)
    budget = trial.budget_gb if on_host else None
    return SearchResult(batch, found, halvings, budget, time.perf_counter() - started)


def search_line(found: SearchResult, lr: float, device: str) -> str:
    search_ = found.search
    stopped = {
        OUT_OF_MEMORY: f"{2 * search_.largest} ran out of memory",
        MEMORY_BUDGET: f"{2 * search_.largest} is above trainer.memory_budget_gb="
        f"{found.budget_gb:g}",
        TRAINING_SPLIT: "the training split holds no larger power of two",
    }[search_.stopped_by]
    times = "once" if found.halvings == 1 else f"{found.halvings} times"
    halved = f", halved {times} (trainer.auto_batch_halvings)" if found.halvings else ""
    return (
        f"trainer.batch_size=auto: {search_.largest} is the largest batch that trains on {device} "
        f"({stopped}; {len(search_.tried)} tries, {found.seconds:.1f} s); training at "
        f"{found.batch}{halved} with optimizer.lr={lr:g} as given (not scaled with the batch)"
    )
