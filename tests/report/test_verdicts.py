"""Verdicts: each swept value against another with the other varying keys held equal, within a
sweep, seed by seed where both sides ran the same seeds (else Welch's t), a difference called only
where its 95% interval excludes none, the busy runs counted by side, and a warning where repeats
ran back to back (a real sweep's verdicts: tests/report/test_repeats.py, on its sweep)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from scipy import stats

from experiments.report import repeats, statistics, verdicts
from helpers import paired_by_scipy, welch_by_scipy

REPEAT = "no verdict; repeat with `-m trainer.seed=0,1,2`"
# The sweep of trainer.threads=1,2 on 3 seeds: 2 threads faster for every seed (img/s).
THREADS_2, THREADS_1 = [6288.0, 6674.0, 8646.0], [4102.0, 5247.0, 5671.0]


def test_welchs_interval_is_the_textbooks_and_scipys() -> None:
    # Two samples of variance 1 and three values each: se² = 1/3 + 1/3, 4 degrees of freedom,
    # t(0.975, 4) = 2.776 from a printed table.
    estimate = statistics.welch([11.0, 12.0, 13.0], [1.0, 2.0, 3.0]).interval()
    half_width = 2.776445 * math.sqrt(2 / 3)
    assert (estimate.value, estimate.low, estimate.high) == pytest.approx(
        (10.0, 10 - half_width, 10 + half_width)
    )
    # Unequal variances and sizes: Welch-Satterthwaite's degrees of freedom are not whole.
    first, second = [0.52, 0.55, 0.49, 0.61, 0.50], [0.41, 0.47, 0.38]
    test = statistics.welch(first, second)
    interval = test.interval()
    assert (interval.low, interval.high) == pytest.approx(welch_by_scipy(first, second))
    # At another confidence, and the p-value: the least error rate whose interval excludes 0.
    assert (test.interval(0.99).low, test.interval(0.99).high) == pytest.approx(
        welch_by_scipy(first, second, 0.99)
    )
    assert test.p_value == pytest.approx(stats.ttest_ind(first, second, equal_var=False).pvalue)
    assert test.interval(1 - test.p_value).low == pytest.approx(0, abs=1e-12)


def test_a_paired_interval_is_the_textbooks_and_scipys() -> None:
    # Differences 2, 3, 4: mean 3, sd 1, t(0.975, 2) = 4.303 from a printed table.
    estimate = statistics.paired([12.0, 23.0, 34.0], [10.0, 20.0, 30.0]).interval()
    half_width = 4.302653 / math.sqrt(3)
    assert (estimate.value, estimate.low, estimate.high) == pytest.approx(
        (3.0, 3 - half_width, 3 + half_width)
    )
    logs = [[math.log(x) for x in side] for side in (THREADS_2, THREADS_1)]
    test = statistics.paired(*logs)
    assert (test.interval().low, test.interval().high) == pytest.approx(paired_by_scipy(*logs))
    assert test.p_value == pytest.approx(stats.ttest_rel(*logs).pvalue)
    # Alike in every pair: the difference is exact, at any confidence.
    exact = statistics.paired([2.0, 3.0], [1.0, 2.0])
    assert (exact.p_value, exact.interval(0.999)) == (0.0, statistics.Estimate(1.0, 1.0, 1.0))
    assert statistics.paired([2.0, 3.0], [2.0, 3.0]).p_value == 1.0


def test_pairing_by_seed_finds_the_speedup_that_welchs_cannot() -> None:
    """The issue's numbers: unpaired, the seeds' spread hides a speed-up that every seed shows."""
    rows = sweep_rows({("1",): THREADS_1, ("2",): THREADS_2}, ["trainer.threads"])
    (speed,) = verdicts.verdict_lines(repeats.configurations(rows)).lines
    logs = [[math.log(x) for x in side] for side in (THREADS_2, THREADS_1)]
    low, high = (math.exp(end) for end in paired_by_scipy(*logs))
    ratio = math.exp(sum(logs[0]) / 3 - sum(logs[1]) / 3)
    assert speed == (
        0,
        f"trainer.threads=2 trains {ratio:.2f}x [{low:.2f}, {high:.2f}] as fast as "
        "trainer.threads=1 (paired by seed, 3 pairs)",
    )
    assert low > 1
    # The same numbers, their seeds not known: Welch's t on 3 runs each holds no change.
    (speed,) = verdicts.verdict_lines(repeats.configurations(unseeded(rows))).lines
    low, high = (math.exp(end) for end in welch_by_scipy(*logs))
    assert low < 1 < high
    assert speed == (
        0,
        f"trainer.threads=1 vs trainer.threads=2: no difference beyond the noise in train "
        f"images/s ({1 / ratio:.2f}x [{1 / high:.2f}, {1 / low:.2f}], Welch's t, 3 runs each)",
    )


def test_runs_without_a_pair_for_every_seed_are_paired_on_the_seeds_both_ran() -> None:
    rows = sweep_rows({("1",): THREADS_1, ("2",): [*THREADS_2, 9000.0]}, ["trainer.threads"])
    (verdict,) = verdicts.verdict_lines(repeats.configurations(rows)).verdicts
    assert (verdict.method, verdict.runs) == ("paired by seed", [3, 3])
    # A seed twice on one side: no one pair per seed, so unpaired.
    rows[-1]["swept"]["trainer.seed"] = "0"
    (verdict,) = verdicts.verdict_lines(repeats.configurations(rows)).verdicts
    assert (verdict.method, verdict.runs) == ("Welch's t", [3, 4])


def run_row(run: str, swept: dict[str, str], speed: float, accuracy: float) -> dict[str, Any]:
    measured = dict.fromkeys(measure.key for measure in repeats.MEASURES)
    return {
        "run": run,
        "status": "completed",
        "swept": swept,
        **measured,
        "train_images_per_second": speed,
        "test_accuracy": accuracy,
    }


def sweep_rows(
    runs: dict[tuple[str, ...], list[float] | list[tuple[float, float]]], keys: list[str]
) -> list[dict[str, Any]]:
    """Rows of a sweep with the seed first, as the project's sweeper orders it: each
    configuration (its values of `keys`) once, then each again; per run its speed, or (speed,
    accuracy)."""
    rows = []
    for seed in range(max(len(measured) for measured in runs.values())):
        for values, measured in runs.items():
            if seed < len(measured):
                swept = {"trainer.seed": str(seed), **dict(zip(keys, values, strict=True))}
                speed, accuracy = (
                    measured[seed] if isinstance(measured[seed], tuple) else (measured[seed], None)
                )
                rows.append(run_row(f"{len(rows)}_job", swept, speed, accuracy))
    return rows


def unseeded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as runs of their own, their seeds not known to the report."""
    for row in rows:
        del row["swept"]["trainer.seed"]
    return rows


CPU = [(1000.0, 0.30), (1100.0, 0.31), (900.0, 0.32)]
GPU = [(4000.0, 0.33), (4400.0, 0.34), (3600.0, 0.35)]  # four times as fast, run for run


def test_a_difference_beyond_the_noise_is_called_and_the_better_named_first() -> None:
    rows = unseeded(sweep_rows({("cpu",): CPU, ("cuda:0",): GPU}, ["device"]))
    speed, accuracy = (
        line for _, line in verdicts.verdict_lines(repeats.configurations(rows)).lines
    )
    logs = [[math.log(x) for x in speeds] for speeds in ([4000, 4400, 3600], [1000, 1100, 900])]
    low, high = (math.exp(end) for end in welch_by_scipy(*logs))
    assert speed == (
        f"cuda:0 trains 4.00x [{low:.2f}, {high:.2f}] as fast as cpu (Welch's t, 3 runs each)"
    )
    # 30, 31, 32 against 33, 34, 35 points: +3.0 ± 2.776 · √(2/3) = ±2.27.
    assert accuracy == (
        "cuda:0 - cpu: +3.0 points of test accuracy [+0.7, +5.3] (Welch's t, 3 runs each)"
    )
    # Seed by seed the same runs differ alike in every pair: the difference is exact.
    paired = sweep_rows({("cpu",): CPU, ("cuda:0",): GPU}, ["device"])
    assert [line for _, line in verdicts.verdict_lines(repeats.configurations(paired)).lines] == [
        "cuda:0 trains 4.00x [4.00, 4.00] as fast as cpu (paired by seed, 3 pairs)",
        "cuda:0 - cpu: +3.0 points of test accuracy [+3.0, +3.0] (paired by seed, 3 pairs)",
    ]


def test_a_regressions_verdict_names_the_lower_rmse_better_first() -> None:
    rows = unseeded(
        sweep_rows({("0.01",): [1000.0] * 3, ("0.001",): [1000.0] * 3}, ["optimizer.lr"])
    )
    for row, rmse in zip(rows, [57.0, 72.0, 58.0, 73.0, 56.0, 71.0], strict=True):
        row["test_accuracy"], row["test_rmse"] = None, rmse
    speed, rmse = (line for _, line in verdicts.verdict_lines(repeats.configurations(rows)).lines)
    assert speed.startswith("optimizer.lr=0.01 vs optimizer.lr=0.001: no difference")
    # 57, 58, 56 against 72, 73, 71: -15 ± 2.776 · √(2/3) = ±2.27, the lower RMSE first.
    assert rmse == (
        "optimizer.lr=0.01 - optimizer.lr=0.001: -15 of test rmse [-17.27, -12.73] "
        "(Welch's t, 3 runs each)"
    )
    rows.reverse()  # the worse configuration first in the report: still named second
    assert (
        verdicts.verdict_lines(repeats.configurations(rows))
        .lines[1][1]
        .startswith("optimizer.lr=0.01 - optimizer.lr=0.001: -15 of test rmse")
    )


def test_a_speeds_verdict_names_the_side_its_busy_runs_are_on() -> None:
    rows = sweep_rows({("cpu",): CPU, ("cuda:0",): GPU}, ["device"])
    rows[0]["host_busy"] = True  # cpu, seed 0
    speed, accuracy = verdicts.verdict_lines(repeats.configurations(rows)).verdicts
    assert speed.text.endswith(
        " as fast as cpu (paired by seed, 3 pairs; busy host: 0 of 3 cuda:0 runs, 1 of 3 cpu "
        "runs, all on one side: not to be trusted for speed)"
    )
    assert speed.busy_runs == [0, 1]
    assert accuracy.text.endswith("(paired by seed, 3 pairs)")  # other work slows a run only
    assert accuracy.busy_runs is None
    assert speed.differs and not speed.busy_both_sides
    rows[1]["host_busy"] = True  # cuda:0, seed 0: busy runs on both sides
    (speed, accuracy) = verdicts.verdict_lines(repeats.configurations(rows)).verdicts
    # Four times as fast in every pair, but beside other work on both sides: what the host left
    # over is no difference of the setting, and the line says what to do.
    assert (speed.differs, speed.busy_both_sides) == (False, True)
    found = verdicts.verdict_lines(repeats.configurations(rows))
    assert speed.text == (
        "cpu vs cuda:0: no verdict on train images/s, busy on both sides: what other work left "
        "over, not the setting (0.25x [0.25, 0.25], paired by seed, 3 pairs; busy host: 1 of 3 "
        "cpu runs, 1 of 3 cuda:0 runs)"
    )
    assert found.lines[-1] == (
        0,
        "1 verdict(s) busy on both sides: rerun on a quiet machine, or with trainer.threads at "
        "most the cores other work leaves free",
    )
    assert accuracy.differs and not accuracy.busy_both_sides  # not taken by the clock


def test_an_interval_that_holds_no_change_is_never_called_a_difference() -> None:
    # cuda_call is 1.13x as fast (0.89x the other way), and 3 points better, on the means, but
    # the runs scatter widely: 95% intervals 0.43x to 1.84x, -19.4 to +13.4 points (scipy).
    rows = unseeded(
        sweep_rows(
            {
                ("to_device",): [(1000.0, 0.30), (1500.0, 0.20), (800.0, 0.34)],
                ("cuda_call",): [(1100.0, 0.33), (1200.0, 0.31), (1300.0, 0.29)],
            },
            ["placement"],
        )
    )
    speed, accuracy = (
        line for _, line in verdicts.verdict_lines(repeats.configurations(rows)).lines
    )
    assert speed == (
        "to_device vs cuda_call: no difference beyond the noise in train images/s "
        "(0.89x [0.43, 1.84], Welch's t, 3 runs each)"
    )
    assert accuracy == (
        "to_device vs cuda_call: no difference beyond the noise in test accuracy "
        "(-3.0 points [-19.4, +13.4], Welch's t, 3 runs each)"
    )


def test_one_run_each_gets_no_verdict() -> None:
    once = sweep_rows({("lenet",): [(900.0, 0.3)], ("mlp",): [(800.0, 0.2)]}, ["model"])
    assert verdicts.verdict_lines(repeats.configurations(once)).lines == [
        (0, f"one run each: {REPEAT}")
    ]
    mixed = sweep_rows(
        {("lenet",): [(900.0, 0.3), (950.0, 0.31)], ("mlp",): [(800.0, 0.2)]}, ["model"]
    )
    assert verdicts.verdict_lines(repeats.configurations(mixed)).lines == [
        (0, f"lenet vs mlp: one run of mlp: {REPEAT}")
    ]
    # A report of one configuration has nothing to compare.
    assert verdicts.verdict_lines(repeats.configurations(once[:1])).lines == []


def test_the_keys_held_equal_are_said_once_above_their_verdicts() -> None:
    rows = sweep_rows(
        {
            ("lenet", "0.01"): [(1000.0, 0.30), (1010.0, 0.31)],
            ("lenet", "0.1"): [(1005.0, 0.20), (1020.0, 0.21)],
            ("mlp", "0.01"): [(3000.0, 0.20), (3100.0, 0.21)],
            ("mlp", "0.1"): [(2950.0, 0.10), (3050.0, 0.11)],
        },
        ["model", "optimizer.lr"],
    )
    for row in rows:  # a key every run held is no key to hold equal
        row["swept"]["dataset"] = "cifar10"
    configurations = repeats.configurations(rows)
    pairs = verdicts.pairs(configurations)
    # The model's pairs first (the key given first), then the learning rate's; never the pairs
    # that differ in both keys.
    assert [(pair.key, pair.held) for pair in pairs] == [
        ("model", {"optimizer.lr": "0.01"}),
        ("model", {"optimizer.lr": "0.1"}),
        ("optimizer.lr", {"model": "lenet"}),
        ("optimizer.lr", {"model": "mlp"}),
    ]
    found = verdicts.verdict_lines(configurations)
    assert [line for depth, line in found.lines if depth == 0] == [
        "with optimizer.lr=0.01:",
        "with optimizer.lr=0.1:",
        "with model=lenet:",
        "with model=mlp:",
    ]
    below = [line for depth, line in found.lines if depth == 1]
    assert len(below) == 2 * len(pairs)  # a line per pair and measure
    assert all("with " not in line and "dataset" not in line for line in below)
    # √(3000 · 3100) / √(1000 · 1010) = 3.03, seed by seed 3.0 and 3.07; the sweep compares
    # each measure 4 times, and says so.
    assert re.fullmatch(
        r"mlp trains 3\.03x \[[\d.]+, [\d.]+\] as fast as lenet \(paired by seed, 2 pairs; "
        r"9[\d.]+% interval, Holm over 4 comparisons\)",
        below[0],
    )
    # A value that is not a group's choice is named with its key. 30, 31 against 20, 21 points,
    # +10 in each pair: all four accuracy differences are exact (p = 0), the third Holm's step
    # tests at 0.05 / 2.
    assert below[5] == (
        "optimizer.lr=0.01 - optimizer.lr=0.1: +10.0 points of test accuracy [+10.0, +10.0] "
        "(paired by seed, 2 pairs; 97.5% interval, Holm over 4 comparisons)"
    )
    assert found.verdicts[5].held == {"model": "lenet"}


def test_runs_of_different_sweeps_are_not_compared() -> None:
    """A report over outputs/: the threads=1 runs of one sweep and the threads=2 runs of another
    (beside a CPU hog, say) are no pair; each sweep's own pairs are, under its name."""
    first = sweep_rows({("1",): THREADS_1, ("2",): THREADS_2}, ["trainer.threads"])
    second = sweep_rows({("lenet",): THREADS_1, ("mlp",): THREADS_2}, ["model"])
    for row in first:
        row["sweep"] = "2026-11-28/10-00-00_a"
        row["swept"]["model"] = "tudui"
    for row in second:
        row["sweep"] = "2026-11-28/11-00-00_b"
        row["swept"]["trainer.threads"] = "null"
    found = verdicts.verdict_lines(repeats.configurations(first + second))
    assert [
        (pair.key, pair.first.sweep)
        for pair in verdicts.pairs(repeats.configurations(first + second))
    ] == [
        ("trainer.threads", "2026-11-28/10-00-00_a"),
        ("model", "2026-11-28/11-00-00_b"),
    ]
    assert [line for depth, line in found.lines if depth == 0] == [
        "sweep 2026-11-28/10-00-00_a:",
        "sweep 2026-11-28/11-00-00_b:",
    ]
    assert [verdict.sweep for verdict in found.verdicts] == [
        row["sweep"] for row in (first[0], second[0])
    ]


def test_verdicts_json_holds_each_verdict_for_programs() -> None:
    rows = sweep_rows({("cpu",): CPU, ("cuda:0",): GPU}, ["device"])
    rows[0]["host_busy"] = True
    speed, accuracy = json.loads(
        verdicts.json_text(verdicts.verdict_lines(repeats.configurations(rows)).verdicts)
    )
    assert speed == {
        "sweep": "",
        "key": "device",
        "held": {},
        "measure": "train images/s",
        "measure_key": "train_images_per_second",
        "first": "cuda:0",
        "second": "cpu",
        "method": "paired by seed",
        "runs": [3, 3],
        "estimate": pytest.approx(4.0),
        "low": pytest.approx(4.0),
        "high": pytest.approx(4.0),
        "differs": True,
        "busy_both_sides": False,  # the busy run is on one side
        "confidence": 0.95,
        "comparisons": 1,  # a sweep of two configurations compares each measure once
        "p_value": pytest.approx(0, abs=1e-12),  # alike in every pair
        "busy_runs": [0, 1],
        "text": speed["text"],
    }
    assert speed["text"].startswith("cuda:0 trains 4.00x")
    assert (accuracy["measure"], accuracy["estimate"], accuracy["busy_runs"]) == (
        "test accuracy",
        pytest.approx(3.0),
        None,
    )


def test_repeats_that_ran_back_to_back_are_warned_of() -> None:
    measured = [(1000.0, 0.3), (1100.0, 0.31), (900.0, 0.32)]
    interleaved = sweep_rows({("cpu",): measured, ("cuda:0",): measured}, ["device"])
    configurations = repeats.configurations(interleaved)
    assert verdicts.back_to_back(interleaved, configurations) is None
    # Hydra's product order with the seed last: cpu, cpu, cpu, cuda:0, cuda:0, cuda:0.
    in_a_row = sorted(interleaved, key=lambda row: row["swept"]["device"])
    for job, row in enumerate(in_a_row):
        row["run"] = f"{job}_device-{row['swept']['device']}"
    assert verdicts.back_to_back(in_a_row, configurations) == (
        "Warning: repeats of device=cpu (jobs 0-2) and device=cuda:0 (jobs 3-5) ran back to "
        "back: drift between them can pose as a difference; run them interleaved, e.g. sweep "
        "with -m trainer.seed=0,1,2 <the other keys> so each configuration runs once before "
        "any runs twice"
    )
    # Runs of their own, in outputs/: named by their date and time folders.
    for minute, row in enumerate(in_a_row):
        row["run"] = f"2026-11-22/10-0{minute}-00_ab12cd34"
    warning = verdicts.back_to_back(in_a_row, configurations) or ""
    assert warning.startswith(
        "Warning: repeats of device=cpu (runs 2026-11-22/10-00-00_ab12cd34 to "
        "2026-11-22/10-02-00_ab12cd34) and device=cuda:0 (runs 2026-11-22/10-03-00_ab12cd34 to "
    )
    # Four configurations back to back: three named, then a count, in one line.
    four = sweep_rows({(name,): measured[:2] for name in "abcd"}, ["model"])
    four.sort(key=lambda row: row["swept"]["model"])
    for job, row in enumerate(four):
        row["run"] = f"{job}_job"
    assert verdicts.back_to_back(four, repeats.configurations(four)).startswith(
        "Warning: repeats of model=a (jobs 0-1), model=b (jobs 2-3), model=c (jobs 4-5) and 1 "
        "more configuration(s) ran back to back: "
    )
    # Repeats of the only configuration: nothing to pose as a difference against.
    cpu_alone = in_a_row[:3]
    assert verdicts.back_to_back(cpu_alone, repeats.configurations(cpu_alone)) is None
