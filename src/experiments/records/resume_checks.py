"""What a resumed run may not change, checked once its data is loaded and its batches are cut, and
before any state is put back (so a refusal leaves the run's records as they were):

- the data its epochs were trained and selected on (`experiments.data.fingerprint`): another
  validation split would select epochs by other numbers;
- the optimizer steps of an epoch (one per trainer.accumulate_batches batches): a per-step
  schedule was built for the run's total (OneCycleLR would raise part-way, a cosine would climb
  back up past its end), and the records number steps by it.

Checkpoints saved before these were recorded carry neither, and are not checked.
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
