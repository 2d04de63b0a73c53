"""A sweep over batch sizes: runs by line at the batch they trained with (a search's, under
trainer.batch_size=auto), the knee where more batch stops paying, and the largest batch each
device took, named in the report's notes."""

from __future__ import annotations

from typing import Any

import pytest

from experiments.report import batch_sweep
from experiments.report.batch_sweep import KNEE_SHARE, knee

Row = dict[str, Any]


@pytest.mark.parametrize(
    ("speeds", "expected"),
    [
        # Flat: no batch pays more than the smallest.
        ({32: [500.0], 64: [505.0], 128: [498.0]}, 32),
        # Rising to the end: the largest is the knee.
        ({32: [100.0], 64: [200.0], 128: [400.0]}, 128),
        # Rising, then within 5% of the best before it: the smaller batch.
        ({32: [100.0], 64: [200.0], 128: [400.0], 256: [410.0]}, 128),
        # Peaked, then falling: the smallest within 5% of the peak, before it.
        ({32: [100.0], 64: [191.0], 128: [200.0], 256: [150.0]}, 64),
        ({32: [100.0], 64: [189.0], 128: [200.0], 256: [150.0]}, 128),
        # One size.
        ({512: [1234.0]}, 512),
        # Noisy repeats, each size their geometric mean: 32's arithmetic mean (200) would be the
        # best and the knee; its geometric mean is 173, and 64's 182.5 is within 5% of 128's 190.
        ({32: [100.0, 300.0], 64: [180.0, 185.0], 128: [190.0, 190.0]}, 64),
    ],
)
def test_the_knee_is_the_smallest_batch_within_a_few_percent_of_the_best(
    speeds: dict[int, list[float]], expected: int
) -> None:
    assert KNEE_SHARE == 0.05
    assert knee(speeds) == expected


def searched_run(device: str, halvings: int, speed: float, seed: int = 0, **search: Any) -> Row:
    """A report's row of a run of experiment=batch_scaling: trainer.batch_size=auto, the largest
    batch (4096) halved `halvings` times."""
    found = {"largest": 4096, "stopped_by": "memory budget", "budget_gb": 4.0, **search}
    return {
        "run": f"{device}-{halvings}-{seed}",
        "status": "completed",
        "device": device,
        "train_images_per_second": speed,
        "time_to_accuracy": None,
        "batch_size": found["largest"] >> halvings,
        "batch_search": {**found, "trained": found["largest"] >> halvings, "halvings": halvings},
        "swept": {
            "device": device,
            batch_sweep.HALVINGS: str(halvings),
            "trainer.seed": str(seed),
        },
    }


def test_a_sweep_over_halvings_is_drawn_at_the_batch_each_run_trained_with() -> None:
    rows = [
        searched_run("cpu", 0, 2000.0),
        searched_run("cpu", 2, 1500.0),
        searched_run("cpu", 1, 1900.0),
        searched_run("cpu", 1, 1950.0, seed=1),
        searched_run(
            "cuda:0", 0, 9000.0, largest=65536, stopped_by="out of memory", budget_gb=None
        ),
        {**searched_run("cpu", 3, 1.0), "status": "failed", "train_images_per_second": None},
    ]
    lines = batch_sweep.scaling_lines(rows)
    # A line per device: the halvings and the seed are no line of their own.
    assert list(lines) == ["device=cpu", "device=cuda:0"]
    cpu = lines["device=cpu"]
    assert [batch_sweep.trained_batch(row) for row in cpu] == [1024, 2048, 2048, 4096]
    assert batch_sweep.by_batch_size(cpu, "train_images_per_second") == {
        1024: [1500.0],
        2048: [1900.0, 1950.0],
        4096: [2000.0],
    }
    assert batch_sweep.search_text(cpu) == "largest batch 4096 (memory budget 4 GB)"
    assert batch_sweep.search_text(lines["device=cuda:0"]) == "largest batch 65536 (out of memory)"
    assert batch_sweep.notes(rows) == [
        "device=cpu: largest batch 4096 (memory budget 4 GB), knee 2048 (1,925 img/s, within 5% "
        "of the best: 2,000 img/s at 4096)",
        "device=cuda:0: largest batch 65536 (out of memory)",  # one size: no knee
    ]


def test_searches_that_disagree_are_named_as_a_range() -> None:
    line = [
        searched_run("cuda:0", 0, 900.0, largest=2048, stopped_by="out of memory"),
        searched_run("cuda:0", 0, 1000.0, seed=1, largest=4096, stopped_by="training split"),
    ]
    assert batch_sweep.largest_batches(line) == [2048, 4096]
    assert (
        batch_sweep.search_text(line)
        == "largest batch 2048 to 4096 (out of memory or training split)"
    )


def test_a_sweep_over_chosen_batch_sizes_names_its_knee_and_no_search() -> None:
    def chosen(batch: str, speed: float) -> Row:
        return {
            "run": batch,
            "status": "completed",
            "device": "cpu",
            "train_images_per_second": speed,
            "unit": "rows",
            "swept": {"trainer.batch_size": batch, "model.hidden_sizes": "[64]"},
        }

    rows = [chosen("32", 100.0), chosen("64", 300.0), chosen("128", 310.0)]
    assert batch_sweep.notes(rows) == [
        "device=cpu, model.hidden_sizes=[64]: knee 64 (300 rows/s, within 5% of the best: "
        "310 rows/s at 128)"
    ]
    assert batch_sweep.notes(rows[1:2]) == []  # one size, not searched: nothing to say
    assert batch_sweep.notes([{**row, "swept": {}} for row in rows]) == []  # no batch sweep
