"""Time to accuracy (trainer.target_accuracy): the training seconds a run took until its accuracy
first reached a target, the measure that answers "how fast and how well" at once (MLPerf Training
and DAWNBench rank by it).

The accuracy is the validation split's, or without one the test split's; the seconds are the sum
of the epochs' training times up to the end of the epoch that reached it, evaluation excluded (a
run is timed on what it trains, not on how often it is measured). Epoch rows carry their own
training seconds, so a resumed run counts the epochs trained before its resume too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def reached(history: Sequence[dict[str, Any]], target: float, split: str) -> dict[str, Any]:
    """results.json's `time_to_accuracy`: the `target`, the `split` ("val" or "test") whose
    accuracy is measured, and the first epoch of `history` at or above it with the training
    seconds until its end (both None: not reached)."""
    seconds = 0.0
    for row in history:
        seconds += row["train_seconds"]
        if row[f"{split}_accuracy"] >= target:
            return {"target": target, "split": split, "epoch": row["epoch"], "seconds": seconds}
    return {"target": target, "split": split, "epoch": None, "seconds": None}


def text(record: dict[str, Any]) -> str:
    """ "50% val accuracy after 12.3 s of training (epoch 3)", or "... not reached"."""
    goal = f"{100 * record['target']:g}% {record['split']} accuracy"
    if record["seconds"] is None:
        return f"{goal} not reached"
    return f"{goal} after {record['seconds']:.1f} s of training (epoch {record['epoch']})"
