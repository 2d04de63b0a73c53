"""What a resumed run may not change, checked once its data is loaded and its batches are cut, and
before any state is put back (so a refusal leaves the run's records as they were):

- the data its epochs were trained and selected on (`experiments.data.fingerprint`): another
  validation split would select epochs by other numbers;
- the optimizer steps of an epoch (one per trainer.accumulate_batches batches): a per-step
  schedule was built for the run's total (OneCycleLR would raise part-way, a cosine would climb
  back up past its end), and the records number steps by it;
- the batch size, whatever the steps of an epoch come to;
- whether a moving average of the weights is kept (trainer.ema): its epochs were evaluated and
  selected by the model's weights or by the average, and an average cannot begin part-way.

Checkpoints saved before the first two were recorded carry neither, and are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from experiments.core.errors import ExperimentError
from experiments.data import fingerprint

# What decides the steps of an epoch, besides the training images and the number of processes.
BATCH_SETTINGS = ("batch_size", "limit_train_batches", "accumulate_batches")


def refuse_other_data(checkpoint: dict[str, Any], run: str, data: dict[str, Any]) -> None:
    """Refuse to resume `run` on data other than its checkpoint's (`data`: the fingerprint now)."""
    if "data" not in checkpoint:
        return
    changed = fingerprint.difference(checkpoint["data"], data)
    if changed is not None:
        raise ExperimentError(
            f"resume={run}: its data differs from the data it was trained on: {changed}; its "
            "epochs were trained and selected on that data: resume on it, or start a new run "
            "on this data"
        )


def refuse_other_steps(
    checkpoint: dict[str, Any], run: str, steps_per_epoch: int, trainer: Mapping[str, Any]
) -> None:
    """Refuse to resume `run` with `steps_per_epoch` other than its checkpoint's (`trainer`: the
    trainer config now)."""
    saved = checkpoint.get("steps_per_epoch")
    if saved is None or saved == steps_per_epoch:
        return
    then = {"accumulate_batches": 1, **checkpoint["config"]["trainer"]}  # (older: no such key)
    changed = [
        f"trainer.{key}={then[key]} then, {trainer[key]} now"
        for key in BATCH_SETTINGS
        if then[key] != trainer[key]
    ]
    why = "; ".join(changed) or (
        "the same trainer.batch_size, trainer.limit_train_batches and trainer.accumulate_batches: "
        "another number of processes"
    )
    raise ExperimentError(
        f"resume={run}: its epochs were {saved} optimizer steps each, {steps_per_epoch} now "
        f"({why}); its schedule and its records' step numbers count {saved} to an epoch: resume "
        "with the run's own settings, or start a new run"
    )


def refuse_other_batch_size(checkpoint: dict[str, Any], run: str, batch_size: int) -> None:
    """Refuse to resume `run` with a trainer.batch_size other than its checkpoint's, even where
    the steps of an epoch come out the same (trainer.limit_train_batches changed with it): its
    later epochs would train on other images per step, and results.json would record the one
    batch size for the whole run."""
    saved = checkpoint["config"]["trainer"]["batch_size"]
    if saved != batch_size:
        raise ExperimentError(
            f"resume={run}: it was trained with trainer.batch_size={saved}, not {batch_size}; a "
            f"run keeps its batch size throughout: resume with trainer.batch_size={saved}, or "
            f"start a new run with replay={run} trainer.batch_size={batch_size}"
        )


def refuse_other_average(checkpoint: dict[str, Any], run: str, decay: float | None) -> None:
    """Refuse to resume `run` keeping a moving average of the weights (`decay`: trainer.ema.decay
    now; None: none) where its checkpoint has none, or the reverse."""
    saved = checkpoint["config"]["trainer"].get("ema", {}).get("decay")
    if (checkpoint.get("ema") is None) == (decay is None):
        return
    if decay is None:
        raise ExperimentError(
            f"resume={run}: it was trained with trainer.ema.decay={saved}, its epochs evaluated "
            "and selected by the moving average of its weights; resume with it (leave "
            f"trainer.ema.decay out), or start a new run without it with replay={run} "
            "trainer.ema.decay=null"
        )
    raise ExperimentError(
        f"resume={run}: it was trained without a moving average of its weights, which cannot "
        f"begin part-way (trainer.ema.decay={decay}); resume without it, or start a new run with "
        f"it with replay={run} trainer.ema.decay={decay}"
    )
