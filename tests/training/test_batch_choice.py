"""trainer.auto_batch: the batch a search's timed steps choose, a pure function of the speeds, the
largest batch that fit and the epoch's size; never a knee that leaves an epoch too few steps."""

from __future__ import annotations

import pytest

from experiments.config.choices import AutoBatch
from experiments.training.batch_choice import (
    KNEE,
    LARGEST,
    MIN_STEPS,
    BatchChoice,
    Epoch,
    Rule,
    choose_batch,
)

# A CPU's curve: images/s rise until 512, then flatten (1024 is the best, by under 5%).
CURVE = {1: 30.0, 2: 60.0, 4: 120.0, 8: 230.0, 16: 400.0, 32: 560.0, 64: 690.0, 128: 760.0}
CURVE |= {256: 770.0, 512: 800.0, 1024: 820.0, 2048: 805.0}
TIMED = {batch: [speed] for batch, speed in CURVE.items()}


@pytest.mark.parametrize(
    ("epoch", "rule", "batch", "chosen_by", "steps"),
    [
        # The split of 4,000 images: the knee (512) would leave 8 steps an epoch; 128
        # leaves 32 (31 full and a last of 32), 256 only 16.
        (Epoch(4000), Rule(), 128, MIN_STEPS, 32),
        # A split large enough: the knee itself, 98 steps.
        (Epoch(50_000), Rule(), 512, KNEE, 98),
        # Fewer steps asked for: the knee again (4,000 / 512: 7 full and a last of 416).
        (Epoch(4000), Rule(min_steps=8), 512, KNEE, 8),
        # Four batches a step: 32 leaves 125 batches, 32 steps; 64 leaves 63, 16 steps.
        (Epoch(4000, accumulate_batches=4), Rule(), 32, MIN_STEPS, 32),
        # BatchNorm: 41 images at 2 are 20 batches, the last image left out, 20 steps.
        (Epoch(41, fewest=2), Rule(), 2, MIN_STEPS, 20),
        # No batch leaves 20 steps of 30 images: the smallest, whose 15 are the most there are.
        (Epoch(30, fewest=2), Rule(), 2, MIN_STEPS, 15),
        # The largest that fits, as asked, however few its steps; halved as asked.
        (Epoch(4000), Rule(AutoBatch.largest), 2048, LARGEST, 2),
        (Epoch(4000), Rule(AutoBatch.largest, halvings=2), 512, LARGEST, 8),
    ],
)
def test_the_knee_is_trained_at_unless_it_leaves_an_epoch_too_few_steps(
    epoch: Epoch, rule: Rule, batch: int, chosen_by: str, steps: int
) -> None:
    timed = {size: runs for size, runs in TIMED.items() if epoch.fewest <= size <= epoch.images}
    choice = choose_batch(timed, max(timed), epoch, rule)
    assert (choice.batch, choice.chosen_by, choice.steps_per_epoch) == (batch, chosen_by, steps)
    assert choice.steps_per_epoch == epoch.steps(batch)


def test_each_batch_is_as_fast_as_the_median_of_its_timed_steps() -> None:
    # A step at 64 that other work slowed to a crawl, and one at 128 that ran alone: their
    # medians, 690 and 750, leave 128 outside 5% of 800 at 256 (its mean, 997, the best), and 256
    # the knee.
    timed = {64: [690.0, 100.0, 700.0], 128: [750.0, 1500.0, 740.0], 256: [800.0] * 3}
    choice = choose_batch(timed, 256, Epoch(100_000), Rule())
    assert choice == BatchChoice(256, KNEE, 256, {64: 690.0, 128: 750.0, 256: 800.0}, 391)
