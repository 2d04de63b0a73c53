"""A row per epoch trained, as checkpoints and metrics.jsonl hold it (older runs lack some keys)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from experiments.config.metric_names import VAL_LOSS


class _WarmUpSteps(TypedDict):
    steps: int
    images: int
    seconds: float


class WarmUp(_WarmUpSteps, total=False):
    """The steps an epoch timed apart at its start (`records.speed`), and a last compiled anew."""

    last_step_images: int
    last_step_seconds: float


class _EveryVersionsRow(TypedDict):
    epoch: int
    global_step: int  # optimizer steps so far
    train_loss: float  # the mean over the epoch's training images
    lr: float  # of the epoch's last step
    test_loss: float
    test_accuracy: float
    class_accuracy: dict[str, float | None]  # of the test split; None: no images of the class
    images_per_second: float  # training, the epoch's whole
    train_images: int
    train_seconds: float
    wait_seconds: float
    copy_seconds: float
    compute_seconds: float
    eval_seconds: float
    epoch_seconds: float


class EpochRow(_EveryVersionsRow, total=False):
    """An epoch's numbers; val_loss and val_accuracy only with a validation split."""

    val_loss: float
    val_accuracy: float
    warm_up: WarmUp | None  # None: no step timed apart, a measured epoch
    host_other_cpu_share: float | None  # None: /proc could not tell
    host_busy: bool | None
    mfu: float | None  # the epoch's model FLOPs utilization (None: it beat a wrong peak)
    train_energy: dict[str, float] | None  # joules by energy counter (None: none could be read)


History = list[EpochRow]


def validated(history: Sequence[EpochRow]) -> bool:
    """Whether the run measured a validation split (its rows carry the validation loss)."""
    return bool(history) and VAL_LOSS in history[-1]
