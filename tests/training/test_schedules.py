"""Learning-rate schedules: the lr curve of every `scheduler=` option, and a schedule continued from
saved states."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import SGD, Optimizer
from torch.optim.lr_scheduler import LRScheduler

from experiments.config.choices import Interval
from experiments.config.validate import validate
from experiments.core.errors import ExperimentError
from experiments.training import schedules
from helpers import LR, compose_config, half_cosine, lr_of, scheduler_config

EPOCHS, STEPS_PER_EPOCH = 4, 5
TOTAL = EPOCHS * STEPS_PER_EPOCH


def sgd(lr: float = LR) -> SGD:
    return SGD([nn.Parameter(torch.zeros(2))], lr=lr)


def curve(optimizer: Optimizer, scheduler: LRScheduler, steps: int) -> list[float]:
    """The lr now and after each of `steps` optimizer + scheduler steps."""
    lrs = [lr_of(optimizer)]
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
        lrs.append(lr_of(optimizer))
    return lrs


def for_run(name: str, optimizer: Optimizer) -> tuple[LRScheduler, Interval]:
    return schedules.for_run(
        scheduler_config(name), optimizer, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH
    )


def test_none_keeps_the_lr_every_epoch() -> None:
    optimizer = sgd()
    scheduler, interval = for_run("none", optimizer)
    assert interval == Interval.epoch
    assert curve(optimizer, scheduler, EPOCHS) == [LR] * (EPOCHS + 1)


def test_step_divides_the_lr_by_ten_half_way_and_at_three_quarters() -> None:
    optimizer = sgd()
    scheduler, interval = for_run("step", optimizer)
    assert interval == Interval.epoch
    lrs = curve(optimizer, scheduler, EPOCHS)
    # lrs[i] is what epoch i + 1 trains with; the last is after the run.
    assert lrs == pytest.approx([0.1, 0.1, 0.01, 0.001, 0.001], rel=1e-12)


def test_cosine_falls_from_the_lr_to_min_lr_over_every_step() -> None:
    optimizer = sgd()
    scheduler, interval = for_run("cosine", optimizer)
    assert interval == Interval.step
    lrs = curve(optimizer, scheduler, TOTAL)
    expected = [half_cosine(LR, 0.0, t, TOTAL) for t in range(TOTAL + 1)]
    assert lrs == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert lrs[0] == LR
    assert all(later < earlier for earlier, later in pairwise(lrs))
    assert lrs[-1] == pytest.approx(0.0, abs=1e-12)


def test_warmup_cosine_rises_linearly_then_falls_along_a_cosine() -> None:
    optimizer = sgd()
    scheduler, interval = for_run("warmup_cosine", optimizer)
    assert interval == Interval.step
    lrs = curve(optimizer, scheduler, TOTAL)
    warmup = round(0.1 * TOTAL)  # 2 steps, from 0.1 * 0.01 to 0.1
    rising = [LR * (0.01 + 0.99 * t / warmup) for t in range(warmup + 1)]
    falling = [half_cosine(LR, 0.0, t, TOTAL - warmup) for t in range(1, TOTAL - warmup + 1)]
    assert lrs == pytest.approx(rising + falling, rel=1e-9, abs=1e-12)
    assert lrs[0] == pytest.approx(LR * 0.01)
    assert lrs[warmup] == pytest.approx(LR) == max(lrs)
    assert all(later < earlier for earlier, later in pairwise(lrs[warmup:]))
    assert lrs[-1] == pytest.approx(0.0, abs=1e-12)


def test_onecycle_peaks_at_the_lr_then_ends_far_below_its_start() -> None:
    optimizer = sgd()
    scheduler, interval = for_run("onecycle", optimizer)
    assert interval == Interval.step
    lrs = curve(optimizer, scheduler, TOTAL)
    peak = LR  # by default, never faster than the optimizer's lr
    top = lrs.index(max(lrs))
    assert max(lrs) == pytest.approx(peak)
    assert abs(top - round(0.3 * TOTAL)) <= 1
    assert lrs[0] == pytest.approx(peak / 25)  # OneCycleLR's start
    assert all(later > earlier for earlier, later in pairwise(lrs[: top + 1]))
    # The last step the run trains with is at the bottom: the peak / 25e4.
    assert lrs[TOTAL - 1] == pytest.approx(peak / 25e4)
    assert lrs[TOTAL - 1] < lrs[0] / 1000


def warmed_up(*overrides: str) -> tuple[LRScheduler, Interval, Optimizer]:
    optimizer = sgd()
    config = compose_config(*overrides).scheduler
    scheduler, interval = schedules.for_run(
        config, optimizer, epochs=EPOCHS, steps_per_epoch=STEPS_PER_EPOCH
    )
    return scheduler, interval, optimizer


def test_a_warmup_rises_before_any_schedule_which_then_runs_over_the_rest() -> None:
    # A cosine stepped every step: 1.4 epochs of 5 steps are 7 steps of rise.
    scheduler, interval, optimizer = warmed_up(
        "scheduler=cosine", "scheduler.warmup_epochs=1.4", "scheduler.start_factor=0.1"
    )
    lrs = curve(optimizer, scheduler, TOTAL)
    rising = [LR * (0.1 + 0.9 * t / 7) for t in range(8)]
    falling = [half_cosine(LR, 0.0, t, TOTAL - 7) for t in range(1, TOTAL - 7 + 1)]
    assert lrs == pytest.approx(rising + falling, rel=1e-9, abs=1e-12)

    # A step schedule stepped every epoch: one epoch of rise, then its milestones (halfway and
    # three quarters) are of the 3 epochs left: both after 2 of them (round(1.5), round(2.25)).
    scheduler, interval, optimizer = warmed_up("scheduler=step", "scheduler.warmup_epochs=1")
    assert interval == Interval.epoch
    assert curve(optimizer, scheduler, EPOCHS) == pytest.approx(
        [LR * 0.01, LR, LR, LR * 0.01, LR * 0.01], rel=1e-9
    )

    # And a constant lr after it (scheduler=none).
    scheduler, _, optimizer = warmed_up("scheduler.warmup_epochs=2", "scheduler.start_factor=0.5")
    assert curve(optimizer, scheduler, EPOCHS) == pytest.approx(
        [LR * 0.5, LR * 0.75, LR, LR, LR], rel=1e-9
    )


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            ("scheduler=onecycle", "scheduler.warmup_epochs=1"),
            "scheduler.warmup_epochs=1.0 warms up scheduler=onecycle, which rises over "
            "scheduler.pct_start of the run already: take one (scheduler=cosine "
            "scheduler.warmup_epochs=N warms up a cosine)",
        ),
        (
            ("scheduler=step", "scheduler.warmup_epochs=0.5"),
            "scheduler.warmup_epochs=0.5 with scheduler.interval=epoch: the lr changes once an "
            "epoch; give whole epochs, or scheduler.interval=step",
        ),
        (
            ("scheduler=cosine", "scheduler.warmup_epochs=3", "trainer.epochs=3"),
            "scheduler.warmup_epochs=3.0 must be less than trainer.epochs=3 (the schedule runs "
            "after the warm-up)",
        ),
        (
            ("scheduler=cosine", "scheduler.start_factor=0"),
            "scheduler.start_factor=0.0 must be in (0, 1]: the share of the lr the warm-up "
            "starts from",
        ),
    ],
)
def test_a_warmup_that_cannot_run_is_refused_in_one_line(
    overrides: tuple[str, ...], says: str
) -> None:
    with pytest.raises(ExperimentError) as error:
        validate(compose_config(*overrides))
    assert str(error.value) == says


@pytest.mark.parametrize(
    ("name", "saved_after"), [("cosine", 7), ("warmup_cosine", 1), ("warmup_cosine", 7)]
)
def test_a_schedule_continues_from_its_saved_state(
    name: str, saved_after: int, tmp_path: Path
) -> None:
    """Saved part-way and loaded as a resumed run does (the schedule built first, then the
    optimizer's and the scheduler's states loaded), the rest of the curve is the same."""
    optimizer = sgd()
    scheduler, _ = for_run(name, optimizer)
    uninterrupted = curve(optimizer, scheduler, TOTAL)

    optimizer = sgd()
    scheduler, _ = for_run(name, optimizer)
    before = curve(optimizer, scheduler, saved_after)
    path = tmp_path / "states.pt"
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, path)

    optimizer = sgd()
    scheduler, _ = for_run(name, optimizer)
    states = torch.load(path, weights_only=True)
    optimizer.load_state_dict(states["optimizer"])
    scheduler.load_state_dict(states["scheduler"])
    after = curve(optimizer, scheduler, TOTAL - saved_after)

    assert before[-1] == after[0]
    assert before + after[1:] == uninterrupted


def momentum_curve(optimizer: Optimizer, scheduler: LRScheduler) -> list[float]:
    """The momentum (Adam: beta1) of every step of the run."""
    momenta = []
    for _ in range(TOTAL):
        group = optimizer.param_groups[0]
        momenta.append(group["betas"][0] if "betas" in group else group["momentum"])
        optimizer.step()
        scheduler.step()
    return momenta


def test_onecycle_leaves_plain_sgd_without_momentum() -> None:
    """SGD's defaults hold a momentum of 0: cycling it would train with momentum 0.95-0.85, while
    the records say plain SGD."""
    optimizer = sgd()
    scheduler, _ = for_run("onecycle", optimizer)
    assert momentum_curve(optimizer, scheduler) == [0.0] * TOTAL


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda: SGD([nn.Parameter(torch.zeros(2))], lr=LR, momentum=0.9),
        lambda: torch.optim.Adam([nn.Parameter(torch.zeros(2))], lr=LR),
    ],
    ids=["sgd_momentum", "adam"],
)
def test_onecycle_cycles_a_momentum_the_optimizer_was_given(optimizer: Any) -> None:
    optimizer = optimizer()
    scheduler, _ = for_run("onecycle", optimizer)
    momenta = momentum_curve(optimizer, scheduler)
    # Opposite to the lr: from 0.95 down to 0.85 at the peak, and back.
    top = round(0.3 * TOTAL) - 1
    assert momenta[0] == pytest.approx(0.95)
    assert min(momenta) == pytest.approx(0.85) == momenta[top]
    assert momenta[-1] == pytest.approx(0.95, abs=1e-3)
