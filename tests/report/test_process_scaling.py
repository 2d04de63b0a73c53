"""Scaling over device.processes on the device card, from the sweep's speed verdicts (given)."""

from __future__ import annotations

from experiments.report.process_scaling import scaling_lines
from experiments.report.verdicts import PAIRED, UNPAIRED, Block, Verdict


def speed_verdict(first: str, second: str, ratio: float, low: float, high: float) -> Verdict:
    """A speed verdict as the report makes one: `first`'s speed over `second`'s."""
    return Verdict(
        sweep="sweep",
        key="device.processes",
        held={"model": "lenet"},
        measure="train images/s",
        measure_key="train_images_per_second",
        first=first,
        second=second,
        method=PAIRED,
        runs=[3, 3],
        estimate=ratio,
        low=low,
        high=high,
        differs=low > 1 or high < 1,
        busy_both_sides=False,
        confidence=0.95,
        comparisons=3,
        p_value=0.01,
        busy_runs=[0, 0],
        text="",
    )


def test_each_count_is_set_against_the_fewest_with_its_efficiency() -> None:
    verdicts = [
        speed_verdict("device.processes=2", "device.processes=1", 1.8, 1.6, 2.0),
        # The faster side first: here one process's, so the ratio is turned around.
        speed_verdict("device.processes=1", "device.processes=4", 1.25, 1.0, 1.6),
        speed_verdict("device.processes=4", "device.processes=2", 0.44, 0.4, 0.5),  # not 1's
    ]
    block = Block("sweep", "device.processes", {"model": "lenet"}, [], verdicts)
    assert scaling_lines([block]) == [
        (0, "scaling over device.processes, with model=lenet:"),
        (
            1,
            "2 processes: 1.80x [1.60, 2.00] the speed of 1, scaling efficiency 90% [80%, 100%] "
            "(paired by seed, 3 pairs)",
        ),
        (
            1,
            "4 processes: 0.80x [0.62, 1.00] the speed of 1, scaling efficiency 20% [16%, 25%] "
            "(paired by seed, 3 pairs)",
        ),
    ]


def test_a_sweep_over_other_keys_or_without_speed_verdicts_has_no_scaling() -> None:
    other = Block("sweep", "model", {}, [], [speed_verdict("tudui", "lenet", 2.0, 1.5, 2.5)])
    unrepeated = Block("sweep", "device.processes", {}, ["one run each"], [])
    assert scaling_lines([other, unrepeated]) == []


def test_busy_sides_and_unpaired_runs_are_said() -> None:
    busy = speed_verdict("device.processes=2", "device.processes=1", 1.5, 1.1, 2.0)
    busy = Verdict(**{**busy.__dict__, "busy_both_sides": True, "method": UNPAIRED, "runs": [2, 3]})
    (_, line) = scaling_lines([Block("sweep", "device.processes", {}, [], [busy])])[1]
    assert line.endswith(
        "(Welch's t, 2 and 3 runs; busy on both sides: what other work left over, not the scaling)"
    )
