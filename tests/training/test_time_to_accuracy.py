"""Time to a target: the training seconds until a metric first reaches a target (accuracy at or
above it; RMSE at or below)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from experiments.training import time_to_accuracy
from experiments.training.tasks import RMSE, Classification, Regression


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
        "metric": "accuracy",
        "better": "max",
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
        "metric": "accuracy",
        "better": "max",
        "includes_compile_seconds": False,
    }
    assert time_to_accuracy.text(never) == "95% test accuracy not reached"


def test_a_metric_better_low_reaches_its_target_at_or_below_it() -> None:
    history = [
        epoch(1, 2.0, val_rmse=80.0),
        epoch(2, 3.0, val_rmse=60.0),
        epoch(3, 4.0, val_rmse=55.0),
    ]
    reached = time_to_accuracy.reached(history, 60.0, "val", metric=RMSE)
    assert (reached["epoch"], reached["seconds"], reached["metric"]) == (2, 5.0, "rmse")
    assert time_to_accuracy.text(reached) == "val rmse <= 60 after 5.0 s of training (epoch 2)"
    assert time_to_accuracy.reached(history, 50.0, "val", metric=RMSE)["epoch"] is None


@pytest.mark.parametrize(
    ("trainer", "measures", "expected"),
    [
        ({"target_accuracy": 0.5}, Classification.measured, ("accuracy", 0.5)),
        ({"target_value": 0.5}, Classification.measured, ("accuracy", 0.5)),
        ({"target_value": 60.0}, Regression.measured, ("rmse", 60.0)),  # the task's first metric
        ({"target_metric": "r2", "target_value": 0.4}, Regression.measured, ("r2", 0.4)),
        ({}, Regression.measured, None),
    ],
)
def test_the_target_is_the_one_asked_for_or_the_tasks_first_metric(
    trainer: dict[str, object], measures: object, expected: tuple[str, float] | None
) -> None:
    config = OmegaConf.create(
        {"target_accuracy": None, "target_metric": None, "target_value": None, **trainer}
    )
    found = time_to_accuracy.target(config, measures)
    assert (found[0].name, found[1]) == expected if expected else found is None
