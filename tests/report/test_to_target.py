"""A run's way to its target as the report reads it: the epochs, the joules its energy counters
measured until then (or its J/image times the images it trained), and the cost at its price."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.report import to_target
from experiments.report.prices import parse_prices
from experiments.training.time_to_accuracy import TimeToAccuracy


def epoch(number: int, joules: dict[str, float] | None) -> Any:
    return {"epoch": number, "train_images": 1000, "train_seconds": 2.0, "train_energy": joules}


def test_the_energy_to_the_target_is_the_counters_until_its_epoch() -> None:
    reached = TimeToAccuracy(target=0.5, split="val", epoch=2, seconds=4.0)
    history = [epoch(1, {"gpu0": 30.0, "package-0": 10.0}), epoch(2, {"gpu0": 50.0}), epoch(3, {})]
    assert to_target.run_fields(reached, history, 0.1) == {
        "epochs_to_target": 2,
        "energy_to_target": 90.0,
    }
    # An epoch its counters missed: the run's J/image over the 2,000 images until the target.
    history[1]["train_energy"] = None
    assert to_target.run_fields(reached, history, 0.1)["energy_to_target"] == pytest.approx(200.0)
    assert to_target.run_fields(reached, history, None)["energy_to_target"] is None
    missed = TimeToAccuracy(target=0.5, split="val", epoch=None, seconds=None)
    assert to_target.run_fields(missed, history, 0.1) == dict.fromkeys(
        ("epochs_to_target", "energy_to_target"), "not reached"
    )
    assert to_target.run_fields(None, history, 0.1) == {}  # no target


def test_the_cost_to_the_target_is_its_seconds_at_its_price_on_each_gpu() -> None:
    rows: list[dict[str, Any]] = [
        {"device": "cuda:0", "gpus": 4, "time_to_accuracy": 36.0},
        {"device": "cpu", "gpus": None, "time_to_accuracy": 36.0},
        {"device": "cuda:1", "gpus": 1, "time_to_accuracy": "not reached"},
        {"device": "cuda:1", "gpus": 1, "time_to_accuracy": None},  # no target
    ]
    to_target.price(rows, parse_prices("cuda=2.5/h,cpu=0.1/h"))
    assert [row["cost_to_target"] for row in rows] == [
        pytest.approx(36 / 3600 * 2.5 * 4),
        pytest.approx(36 / 3600 * 0.1),
        "not reached",
        None,
    ]
    assert [row["price_per_hour"] for row in rows] == [2.5, 0.1, 2.5, 2.5]
