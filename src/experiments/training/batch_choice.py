"""The batch trainer.batch_size=auto trains at, of those its search found to fit and timed: the
knee, where more batch stops paying, but never so large that an epoch has too few optimizer steps;
or the largest. Pure and without torch: the report finds a batch sweep's knee by the same rule."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from experiments.config.choices import AutoBatch
from experiments.data.epoch_length import batch_count, optimizer_steps

# The knee: the smallest batch whose speed is within this share of the best batch's.
KNEE_SHARE = 0.05

# Why a run trains at its batch: results.json's `batch_search.chosen_by`.
KNEE = "knee"
MIN_STEPS = "min steps"  # the knee's batch would leave an epoch fewer optimizer steps
LARGEST = "largest"


def knee(speeds: Mapping[int, float], share: float = KNEE_SHARE) -> int:
    """The smallest batch whose speed is within `share` of the best batch's."""
    best = max(speeds.values())
    return min(batch for batch, speed in speeds.items() if speed >= (1 - share) * best)


@dataclass(frozen=True)
class Epoch:
    """An epoch of the training split, cut into optimizer steps as training cuts it."""

    images: int
    accumulate_batches: int = 1
    processes: int = 1
    fewest: int = 1  # a smaller last batch is left out (BatchNorm's 2 images)

    def steps(self, batch: int) -> int:
        batches = batch_count(self.images, batch, self.processes, self.fewest)
        return optimizer_steps(batches, self.accumulate_batches)


@dataclass(frozen=True)
class Rule:
    """How a batch is chosen: trainer.auto_batch, auto_batch_min_steps, auto_batch_halvings."""

    name: AutoBatch = AutoBatch.knee
    min_steps: int = 20
    halvings: int = 0


@dataclass(frozen=True)
class BatchChoice:
    """The batch chosen, why (`KNEE`, `MIN_STEPS`, `LARGEST`), the knee and its epoch's steps."""

    batch: int
    chosen_by: str
    knee: int
    speeds: dict[int, float]  # each batch timed: the median of its steps' images/s
    steps_per_epoch: int


def choose_batch(
    timed: Mapping[int, Sequence[float]], largest: int, epoch: Epoch, rule: Rule
) -> BatchChoice:
    """Of the batches `timed` (each step's images/s), up to the `largest` that fits, the one
    `rule` takes for `epoch`."""
    speeds = {batch: statistics.median(timed[batch]) for batch in sorted(timed)}
    at_knee, smallest = knee(speeds), min(speeds)
    if rule.name == AutoBatch.largest:
        batch, chosen_by = max(largest >> rule.halvings, smallest), LARGEST
    else:
        enough = [batch for batch in speeds if epoch.steps(batch) >= rule.min_steps]
        batch = min(at_knee, max(enough, default=smallest))  # (none: the most steps there are)
        chosen_by = KNEE if batch == at_knee else MIN_STEPS
    return BatchChoice(batch, chosen_by, at_knee, speeds, epoch.steps(batch))
