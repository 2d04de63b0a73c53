"""Time to accuracy (trainer.target_accuracy): the training seconds a run took until its accuracy
first reached a target, the measure that answers "how fast and how well" at once (MLPerf Training
and DAWNBench rank by it).

The accuracy is the validation split's, or without one the test split's; the seconds are the sum
of the epochs' training times up to the end of the epoch that reached it, evaluation excluded (a
run is timed on what it trains, not on how often it is measured). Epoch rows carry their own
training seconds, so a resumed run counts the epochs trained before its resume too. Every epoch
counts whole, warm-up included: with trainer.compile, the compilation (which the run's images/s
leaves out, `records.speed`) is part of the time, and the record says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from experiments.config.metric_names import ACCURACY
from experiments.training.history import EpochRow


class _Target(TypedDict):
    target: float
    split: str  # "val" or "test"
    epoch: int | None  # None: not reached
    seconds: float | None


class TimeToAccuracy(_Target, total=False):
    """results.json's `time_to_accuracy` (records of earlier versions do not say whether the
    seconds include compiling the model)."""

    includes_compile_seconds: bool


def reached(
    history: Sequence[EpochRow], target: float, split: str, compiled: bool = False
) -> TimeToAccuracy:
    """results.json's `time_to_accuracy`: the `target`, the `split` ("val" or "test") whose
    accuracy is measured, and the first epoch of `history` at or above it with the training
    seconds until its end (both None: not reached); `includes_compile_seconds`: whether they
    include compiling the model (`compiled`: trainer.compile)."""
    seconds = 0.0
    for row in history:
        seconds += row["train_seconds"]
        if row[ACCURACY.key(split)] >= target:
            return TimeToAccuracy(
                target=target,
                split=split,
                epoch=row["epoch"],
                seconds=seconds,
                includes_compile_seconds=compiled,
            )
    return TimeToAccuracy(
        target=target, split=split, epoch=None, seconds=None, includes_compile_seconds=compiled
    )


def text(record: TimeToAccuracy) -> str:
    """ "50% val accuracy after 12.3 s of training (epoch 3)" ("... of training, compilation
    included (epoch 3)" with trainer.compile), or "... not reached"."""
    goal = f"{100 * record['target']:g}% {record['split']} accuracy"
    if record["seconds"] is None:
        return f"{goal} not reached"
    # (Records of earlier versions do not say.)
    compiled = ", compilation included" if record.get("includes_compile_seconds") else ""
    return f"{goal} after {record['seconds']:.1f} s of training{compiled} (epoch {record['epoch']})"
