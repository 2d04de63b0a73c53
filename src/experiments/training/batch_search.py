"""trainer.batch_size=auto: the powers of two that train on the device (the CPU: within
trainer.memory_budget_gb), each tried and timed on copies, so a run that chooses 512 trains as one
given 512; `batch_choice` chooses among them."""

from __future__ import annotations

import copy
import functools
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from omegaconf import DictConfig
from torch import nn

from experiments.config.choices import AUTO_BATCH, AutoBatch
from experiments.core.errors import ExperimentError
from experiments.data.batches import Batches
from experiments.data.types import ImageData
from experiments.devices import memory
from experiments.devices.runtime import Runtime
from experiments.training import loop, optimizers
from experiments.training.batch_choice import (
    KNEE,
    KNEE_SHARE,
    MIN_STEPS,
    BatchChoice,
    Epoch,
    Rule,
    choose_batch,
)
from experiments.training.tasks import Task

# What stopped a search: results.json's `batch_search.stopped_by`.
OUT_OF_MEMORY = "out of memory"
MEMORY_BUDGET = "memory budget"
TRAINING_SPLIT = "training split"
GIB = 2**30
# Steps timed at each batch that fits, after the try's first (a warm-up): their median, its speed.
TIMED_STEPS = 3


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
    # Each batch that fit: its timed steps' images/s.
    timed: dict[int, list[float]] = field(default_factory=dict)
    _peak_memory: list[tuple[int, float]] = field(default_factory=list)  # the CPU's (batch, bytes)

    def fits(self, batch: int) -> str | None:
        if not self.runtime.backend.is_host:
            return self._fits_gpu(batch)
        budget = self.budget_gb * GIB
        if self._predicted(batch) > budget:
            return MEMORY_BUDGET
        memory.reset_peak_memory(self.runtime.plan)
        step = self._step(batch)
        peak_memory = memory.peak_memory_mb(self.runtime.plan)["peak_host_memory_mb"] * 2**20
        self._peak_memory.append((batch, peak_memory))
        if peak_memory > budget:
            return MEMORY_BUDGET
        self._time(batch, step)
        return None

    def _fits_gpu(self, batch: int) -> str | None:
        try:
            self._time(batch, self._step(batch))
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

    def _time(self, batch: int, step: Callable[[], None]) -> None:
        seconds = []
        for _ in range(TIMED_STEPS):
            started = time.perf_counter()
            step()  # (it waits for the device)
            seconds.append(time.perf_counter() - started)
        self.timed[batch] = [batch / each for each in seconds]

    def _step(self, batch: int) -> Callable[[], None]:
        """A step at `batch` taken, and the same step to take again."""
        data, runtime, model = self.data, self.runtime, copy.deepcopy(self.model)
        optimizer, _ = optimizers.build_optimizer(self.optimizer, model, runtime.type)
        scaler = torch.amp.GradScaler(runtime.type, enabled=runtime.scaler.is_enabled())
        learner = loop.Learner(model, self.task, optimizer)
        assert data.train is not None
        batches = Batches(
            data.train, batch_size=batch, mean=data.mean, std=data.std, runtime=runtime, limit=1
        )
        inputs, targets = next(iter(batches))
        step = functools.partial(loop.trial_step, learner, runtime, scaler, inputs, targets)
        step()
        return step


@dataclass(frozen=True)
class SearchResult:
    """The batch a run trains with, and how the search found it: results.json's `batch_search`."""

    search: Search
    choice: BatchChoice
    rule: Rule
    budget_gb: float | None
    seconds: float

    @property
    def batch(self) -> int:
        return self.choice.batch

    def record(self) -> dict[str, object]:
        choice = self.choice
        return {
            "largest": self.search.largest,
            "trained": choice.batch,
            "halvings": self.rule.halvings,
            "stopped_by": self.search.stopped_by,
            "tried": [[batch, fit] for batch, fit in self.search.tried],
            "budget_gb": self.budget_gb,
            "seconds": self.seconds,
            "rule": str(self.rule.name),
            "chosen_by": choice.chosen_by,
            "knee": choice.knee,
            "speeds": [[batch, speed] for batch, speed in choice.speeds.items()],
            "min_steps": self.rule.min_steps,
            "steps_per_epoch": choice.steps_per_epoch,
        }


def search(trial: Trial, fewest: int, rule: Rule, accumulate_batches: int) -> SearchResult:
    """The batches `trial` fits, timed, and the one `rule` chooses; the random numbers untouched."""
    assert trial.data.train is not None
    images = len(trial.data.train)
    loop.refuse_a_split_too_small(AUTO_BATCH, images, fewest, 1, trial.data.unit)
    started, smallest = time.perf_counter(), smallest_power_of_two(fewest)
    with torch.random.fork_rng(devices=trial.runtime.plan.gpus):
        found = largest_batch(trial.fits, smallest, images)
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
    epoch = Epoch(images, accumulate_batches, trial.runtime.group.world_size, fewest)
    choice = choose_batch(trial.timed, found.largest, epoch, rule)
    budget = trial.budget_gb if on_host else None
    return SearchResult(found, choice, rule, budget, time.perf_counter() - started)


def too_few_steps(found: SearchResult) -> bool:
    """The batch chosen leaves an epoch fewer optimizer steps than trainer.auto_batch_min_steps
    (auto_batch=largest's, or the smallest's of a split too small): the run's line warns."""
    return found.choice.steps_per_epoch < found.rule.min_steps


def search_line(found: SearchResult, lr: float, device: str, rate: str) -> str:
    """The run's line on its batch: the largest that fits, the knee, the batch chosen and why."""
    choice, largest = found.choice, found.search.largest
    other = ""
    if found.rule.name == AutoBatch.knee and choice.batch != largest:
        other = f"; trainer.auto_batch=largest trains at {largest}"
    return (
        f"trainer.batch_size=auto: {largest} is the largest batch that trains on {device} "
        f"({_stopped(found)}; {len(found.search.tried)} tries, {found.seconds:.1f} s); "
        f"{_knee_text(choice, rate)}; training at {choice.batch}, {_chosen_text(found)}, "
        f"with optimizer.lr={lr:g} as given (not scaled with the batch){other}"
    )


def _stopped(found: SearchResult) -> str:
    largest = found.search.largest
    return {
        OUT_OF_MEMORY: f"{2 * largest} ran out of memory",
        MEMORY_BUDGET: f"{2 * largest} is above trainer.memory_budget_gb={found.budget_gb:g}",
        TRAINING_SPLIT: "the training split holds no larger power of two",
    }[found.search.stopped_by]


def _knee_text(choice: BatchChoice, rate: str) -> str:
    """`the knee, where more batch stops paying, is 512 (2,250 img/s, within 5% of the best:
    2,310 img/s at 2048)`."""
    speeds, at = choice.speeds, choice.knee
    best = max(speeds, key=lambda batch: speeds[batch])
    text = f"the knee, where more batch stops paying, is {at} ({speeds[at]:,.0f} {rate}"
    if best == at:
        return f"{text}, the best)"
    return f"{text}, within {KNEE_SHARE:.0%} of the best: {speeds[best]:,.0f} {rate} at {best})"


def _chosen_text(found: SearchResult) -> str:
    """Why the run trains at its batch, and the optimizer steps it leaves an epoch."""
    choice, rule = found.choice, found.rule
    steps = f"{choice.steps_per_epoch} optimizer steps an epoch"
    least = f"trainer.auto_batch_min_steps={rule.min_steps}"
    if choice.chosen_by == KNEE:
        return f"the knee ({steps})"
    if choice.chosen_by == MIN_STEPS and choice.steps_per_epoch >= rule.min_steps:
        return (
            f"below the knee: the largest batch that leaves an epoch {least} optimizer steps or "
            f"more ({steps})"
        )
    if choice.chosen_by == MIN_STEPS:
        return f"the smallest: none leaves an epoch {least} optimizer steps ({steps})"
    times = "once" if rule.halvings == 1 else f"{rule.halvings} times"
    by = f"by trainer.auto_batch_halvings={rule.halvings}"
    halved = f" halved {times} {by}" if rule.halvings else ""
    fewer = f": fewer than {least}" if too_few_steps(found) else ""
    return f"the largest (trainer.auto_batch=largest){halved} ({steps}{fewer})"
