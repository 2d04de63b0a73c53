"""Time to accuracy: the training seconds until the monitored accuracy first reaches a target."""

from __future__ import annotations

from experiments.training import time_to_accuracy


def epoch(number: int, train_seconds: float, **accuracies: float) -> dict[str, float]:
    return {"epoch": number, "train_seconds": train_seconds, **accuracies}


HISTORY = [
    epoch(1, 2.0, val_accuracy=0.3, test_accuracy=0.6),
    epoch(2, 3.0, val_accuracy=0.5, test_accuracy=0.7),
    epoch(3, 4.0, val_accuracy=0.8, test_accuracy=0.9),
]


def test_the_seconds_are_the_training_time_up_to_the_first_epoch_at_the_target() -> None:
    reached = time_to_accuracy.reached(HISTORY, 0.5, "val")
    # Epoch 2 reaches 0.5 exactly; its 2 + 3 training seconds, no evaluation.
    assert reached == {
        "target": 0.5,
        "split": "val",
        "epoch": 2,
        "seconds": 5.0,
        "includes_compile_seconds": False,
    }
    assert time_to_accuracy.text(reached) == ("50% val accuracy after 5.0 s of training (epoch 2)")
    # On the test split, when there is no validation split: epoch 1 already.
    assert time_to_accuracy.reached(HISTORY, 0.5, "test")["seconds"] == 2.0


def test_a_target_never_reached_has_no_seconds_and_says_so() -> None:
    never = time_to_accuracy.reached(HISTORY, 0.95, "test")
    assert never == {
        "target": 0.95,
        "split": "test",
        "epoch": None,
        "seconds": None,
        "includes_compile_seconds": False,
    }
    assert time_to_accuracy.text(never) == "95% test accuracy not reached"
