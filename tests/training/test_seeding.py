"""Seeding: every random generator captured and restored, and seed 0 a seed like any other."""

from __future__ import annotations

import random

import numpy as np
import torch

from experiments.training import seeding


def test_every_random_generator_is_captured_and_restored() -> None:
    shuffle = torch.Generator().manual_seed(5)
    seeding.seed_everything(0)
    state = seeding.capture(shuffle)
    first = (
        random.random(),
        np.random.rand(),
        torch.rand(1).item(),
        torch.randperm(9, generator=shuffle),
    )
    seeding.restore(state, shuffle)
    second = (
        random.random(),
        np.random.rand(),
        torch.rand(1).item(),
        torch.randperm(9, generator=shuffle),
    )
    assert first[:3] == second[:3] and torch.equal(first[3], second[3])


def test_seed_zero_is_a_seed() -> None:
    seeding.seed_everything(0)
    zero = (random.random(), np.random.rand(), torch.rand(1).item())
    seeding.seed_everything(1)
    one = (random.random(), np.random.rand(), torch.rand(1).item())
    seeding.seed_everything(0)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == zero != one
