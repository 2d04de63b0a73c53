"""Learning-rate schedules, each built for the run's `total_steps`, so that it fits the run."""

from __future__ import annotations

from omegaconf import DictConfig
from torch.optim import Optimizer
from torch.optim.lr_scheduler import (
    ConstantLR,
    CosineAnnealingLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    OneCycleLR,
    SequentialLR,
)

from experiments.config.build import build
from experiments.config.choices import Interval


def constant(optimizer: Optimizer, total_steps: int) -> LRScheduler:
    """`scheduler=none`: the optimizer's lr throughout."""
    return ConstantLR(optimizer, factor=1.0, total_iters=0)


def step(
    optimizer: Optimizer, total_steps: int, milestones: list[float], gamma: float
) -> LRScheduler:
    """The lr multiplied by `gamma` at each milestone, a share of the run (0.5: half-way)."""
    return MultiStepLR(optimizer, [round(share * total_steps) for share in milestones], gamma=gamma)


def cosine(optimizer: Optimizer, total_steps: int, min_lr: float) -> LRScheduler:
    return CosineAnnealingLR(optimizer, T_max=total_steps, eta_min=min_lr)


def warmup_cosine(optimizer: Optimizer, total_steps: int, min_lr: float) -> LRScheduler:
    """The cosine after a warm-up over `warmup_fraction` of the run (which `for_run` puts first)."""
    return cosine(optimizer, total_steps, min_lr)


def onecycle(
    optimizer: Optimizer, total_steps: int, max_lr: float | None, pct_start: float
) -> LRScheduler:
    """Leslie Smith's one cycle up to `max_lr`, cycling a momentum only where one was given."""
    peak = max_lr if max_lr is not None else optimizer.param_groups[0]["lr"]
    momentum = "betas" in optimizer.defaults or bool(optimizer.defaults.get("momentum"))
    return OneCycleLR(optimizer, peak, total_steps, pct_start=pct_start, cycle_momentum=momentum)


def warmed_up(
    optimizer: Optimizer, schedule: LRScheduler, warmup_steps: int, start_factor: float
) -> LRScheduler:
    return SequentialLR(
        optimizer,
        [LinearLR(optimizer, start_factor=start_factor, total_iters=warmup_steps), schedule],
        milestones=[warmup_steps],
    )


# The fields that say how `for_run` uses a schedule, not what the schedule is built with.
_RUN_FIELDS = ("interval", "warmup_epochs", "warmup_fraction", "start_factor")


def for_run(
    config: DictConfig, optimizer: Optimizer, *, epochs: int, steps_per_epoch: int
) -> tuple[LRScheduler, Interval]:
    """The configured schedule for the run, after its warm-up if it has one, and when to step it."""
    interval = Interval(config.interval)
    steps_per_interval = steps_per_epoch if interval == Interval.step else 1
    total_steps = epochs * steps_per_interval
    warmup = warmup_steps(config, total_steps, steps_per_interval)
    schedule = build(config, leave_out=_RUN_FIELDS)(optimizer, total_steps=total_steps - warmup)
    if warmup:
        schedule = warmed_up(optimizer, schedule, warmup, config.start_factor)
    return schedule, interval


def warmup_steps(config: DictConfig, total_steps: int, steps_per_interval: int) -> int:
    """The warm-up's share of `total_steps`: at least one where asked for, and never all."""
    if "warmup_fraction" in config:
        wanted = config.warmup_fraction * total_steps
    else:
        wanted = config.warmup_epochs * steps_per_interval
    return min(max(1, round(wanted)), total_steps - 1) if wanted else 0
