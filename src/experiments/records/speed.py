"""A run's training speed, warm-up (each process's first epoch) left out whole where another epoch
was trained, else only its warm-up steps (an epoch with no step after them measured whole)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import TypedDict

from experiments.devices.measuring.host_load import HostLoad
from experiments.training.history import EpochRow, WarmUp


class HostRecord(TypedDict):
    host_other_cpu_share: float | None
    host_busy: bool | None


class LeftOut(TypedDict):
    epochs: list[int]
    steps: list[int] | None
    seconds: float
    left_out: bool


class SpeedSummary(TypedDict):
    train_images_per_second: float
    train_images_per_second_range: list[float]
    train_speed_epochs: list[int]
    warm_up: LeftOut | None


def warm_up_record(
    warm_up: list[tuple[int, float]], last_step: tuple[int, float] | None = None
) -> WarmUp | None:
    """An epoch row's `warm_up`: the steps timed apart at its start (and the last, where it was)."""
    if not warm_up:
        return None
    images, seconds = warm_up[-1]
    record = WarmUp(steps=len(warm_up), images=images, seconds=seconds)
    if last_step is not None:
        record["last_step_images"], record["last_step_seconds"] = last_step
    return record


def host_record(load: HostLoad | None) -> HostRecord:
    """An epoch row's (and results.json's) host load: None where /proc could not tell."""
    return HostRecord(
        host_other_cpu_share=None if load is None else load.other_cpu_share,
        host_busy=None if load is None else load.busy,
    )


def speed_summary(history: Sequence[EpochRow]) -> SpeedSummary:
    """results.json's training speed: the median over the measured epochs, with their range."""
    warm = [row for row in history if row.get("warm_up")]
    measured = [row for row in history if not row.get("warm_up")]
    if measured:
        speeds = [_whole(row) for row in measured]
        warm_up = _left_out(warm, steps=None, seconds=[row["train_seconds"] for row in warm])
    else:
        steady = [row for row in warm if _steady_images(row) > 0]
        measured = steady or warm
        speeds = [_after_warm_up(row) if steady else _whole(row) for row in measured]
        warm_up = _left_out(
            warm,
            steps=[row["warm_up"]["steps"] for row in warm],
            seconds=[row["warm_up"]["seconds"] for row in warm],
            left_out=bool(steady),
        )
    return SpeedSummary(
        train_images_per_second=statistics.median(speeds),
        train_images_per_second_range=[min(speeds), max(speeds)],
        train_speed_epochs=[row["epoch"] for row in measured],
        warm_up=warm_up,
    )


def host_summary(history: Sequence[EpochRow]) -> HostRecord:
    """results.json's host load: the epochs' other work, weighed by their training seconds."""
    known = [row for row in history if row.get("host_other_cpu_share") is not None]
    if not known:
        return host_record(None)
    seconds = sum(row["train_seconds"] for row in known)
    share = sum(row["host_other_cpu_share"] * row["train_seconds"] for row in known) / seconds
    return HostRecord(host_other_cpu_share=share, host_busy=any(row["host_busy"] for row in known))


def compile_seconds(first_step: tuple[int, float], images_per_second: float) -> float:
    """The compilation's time: what a first step (images, seconds) took beyond the run's speed."""
    images, seconds = first_step
    return max(seconds - images / images_per_second, 0.0)


def _after_warm_up(row: EpochRow) -> float:
    warm_up = row["warm_up"]
    seconds = row["train_seconds"] - warm_up["seconds"] - warm_up.get("last_step_seconds", 0.0)
    return _steady_images(row) / seconds


def _steady_images(row: EpochRow) -> int:
    warm_up = row["warm_up"]
    return row["train_images"] - warm_up["images"] - warm_up.get("last_step_images", 0)


def _whole(row: EpochRow) -> float:
    return row["train_images"] / row["train_seconds"]


def _left_out(
    warm: Sequence[EpochRow], steps: list[int] | None, seconds: list[float], left_out: bool = True
) -> LeftOut | None:
    if not warm:
        return None
    return LeftOut(
        epochs=[row["epoch"] for row in warm], steps=steps, seconds=sum(seconds), left_out=left_out
    )
