"""A training run's energy in results.json: its epochs' training passes added up per counter,
from the rows' joules, with given rows (the meter's readings: tests/devices/test_energy.py)."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.records.energy import energy_summary

COVERS = "each whole GPU: other processes' work on it is counted too"


def row(epoch: int, energy: dict[str, float] | None, seconds: float = 10.0) -> dict[str, Any]:
    return {"epoch": epoch, "train_seconds": seconds, "train_images": 1000, "train_energy": energy}


def test_the_epochs_joules_add_up_per_counter_and_per_image() -> None:
    history = [
        row(1, {"cuda:0 (H200)": 1500.0, "cuda:1 (H200)": 1400.0}),
        row(2, {"cuda:0 (H200)": 1000.0, "cuda:1 (H200)": 900.0}, seconds=6.0),
    ]
    summary = energy_summary(history, "nvml", COVERS, None)  # type: ignore[arg-type]
    assert summary["train_joules_per_image"] == pytest.approx(4800 / 2000)
    assert summary["average_watts"] == pytest.approx(4800 / 16)
    energy = summary["energy"]
    assert energy is not None
    assert (energy["source"], energy["joules"], energy["seconds"]) == ("nvml", 4800.0, 16.0)
    assert energy["counters"] == [
        {"name": "cuda:0 (H200)", "joules": 2500.0, "watts": 2500 / 16},
        {"name": "cuda:1 (H200)", "joules": 2300.0, "watts": 2300 / 16},
    ]
    assert (energy["covers"], energy["epochs"], summary["energy_note"]) == (COVERS, [1, 2], None)


def test_epochs_without_a_counter_are_left_out_and_named() -> None:
    # A run resumed on a machine whose counters cannot be read: its first epoch's joules count.
    why = "no RAPL counter readable here (/sys/class/powercap: absent)"
    history = [row(1, {"package-0": 300.0}), row(2, None)]
    summary = energy_summary(history, "rapl", "each whole CPU package", why)  # type: ignore[arg-type]
    assert summary["train_joules_per_image"] == pytest.approx(0.3)
    assert summary["energy_note"] == f"epochs [2] measured no energy: {why}"


def test_without_any_counter_there_is_no_figure_and_the_reason() -> None:
    why = "nvidia-ml-py is not installed (pip install 'experiments[energy]')"
    summary = energy_summary([row(1, None), row(2, None)], "nvml", COVERS, why)  # type: ignore[arg-type]
    assert summary == {
        "energy": None,
        "energy_note": why,
        "train_joules_per_image": None,
        "average_watts": None,
    }
