"""Verdicts: each swept value against another with the other keys held equal, a difference
called only where its 95% interval (Welch's t) excludes none, and a warning where repeats ran
back to back (a real sweep's verdicts: tests/report/test_repeats.py, on its sweep)."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from experiments.report import repeats, verdicts
from helpers import welch_by_scipy

QUANTILE = repeats.t_quantile
REPEAT = "no verdict; repeat with `-m trainer.seed=0,1,2`"


def test_welchs_interval_is_the_textbooks_and_scipys() -> None:
    # Two samples of variance 1 and three values each: se² = 1/3 + 1/3, 4 degrees of freedom,
    # t(0.975, 4) = 2.776 from a printed table.
    estimate = verdicts.welch([11.0, 12.0, 13.0], [1.0, 2.0, 3.0], QUANTILE)
    half_width = 2.776445 * math.sqrt(2 / 3)
    assert (estimate.value, estimate.low, estimate.high) == pytest.approx(
        (10.0, 10 - half_width, 10 + half_width)
    )
    # Unequal variances and sizes: Welch-Satterthwaite's degrees of freedom are not whole.
    first, second = [0.52, 0.55, 0.49, 0.61, 0.50], [0.41, 0.47, 0.38]
    estimate = verdicts.welch(first, second, QUANTILE)
    assert (estimate.low, estimate.high) == pytest.approx(welch_by_scipy(first, second))


def test_a_speed_ratio_is_welchs_on_the_logarithms() -> None:
    cpu = [1000.0, 1100.0, 900.0]
    gpu = [4 * speed for speed in cpu]  # four times as fast, run for run
    estimate = verdicts.ratio(gpu, cpu, QUANTILE)
    assert estimate.value == pytest.approx(4.0)  # a ratio of geometric means
    low, high = welch_by_scipy([math.log(x) for x in gpu], [math.log(x) for x in cpu])
    assert (estimate.low, estimate.high) == pytest.approx((math.exp(low), math.exp(high)))
    assert estimate.low < 4 < estimate.high


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
    runs: dict[tuple[str, ...], list[tuple[float, float]]], keys: list[str]
) -> list[dict[str, Any]]:
    """Rows of a sweep with the seed first, as the project's sweeper orders it: each
    configuration (its values of `keys`) once, then each again; (speed, accuracy) per run."""
    rows = []
    for seed in range(max(len(measured) for measured in runs.values())):
        for values, measured in runs.items():
            if seed < len(measured):
                swept = {"trainer.seed": str(seed), **dict(zip(keys, values, strict=True))}
                rows.append(run_row(f"{len(rows)}_job", swept, *measured[seed]))
    return rows


def test_a_difference_beyond_the_noise_is_called_and_the_better_named_first() -> None:
    rows = sweep_rows(
        {
            ("cpu",): [(1000.0, 0.30), (1100.0, 0.31), (900.0, 0.32)],
            ("cuda:0",): [(4000.0, 0.33), (4400.0, 0.34), (3600.0, 0.35)],
        },
        ["device"],
    )
    speed, accuracy = verdicts.lines(repeats.configurations(rows), QUANTILE)
    logs = [[math.log(x) for x in speeds] for speeds in ([4000, 4400, 3600], [1000, 1100, 900])]
    low, high = (math.exp(end) for end in welch_by_scipy(*logs))
    assert speed == f"cuda:0 trains 4.00x [{low:.2f}, {high:.2f}] as fast as cpu (3 runs each)"
    # 30, 31, 32 against 33, 34, 35 points: +3.0 ± 2.776 · √(2/3) = ±2.27.
    assert accuracy == "cuda:0 - cpu: +3.0 points of test accuracy [+0.7, +5.3] (3 runs each)"


def test_a_regressions_verdict_names_the_lower_rmse_better_first() -> None:
    rows = sweep_rows(
        {("0.01",): [(1000.0, 0.0)] * 3, ("0.001",): [(1000.0, 0.0)] * 3},
        ["optimizer.lr"],
    )
    for row, rmse in zip(rows, [57.0, 72.0, 58.0, 73.0, 56.0, 71.0], strict=True):
        row["test_accuracy"], row["test_rmse"] = None, rmse
    speed, rmse = verdicts.lines(repeats.configurations(rows), QUANTILE)
    assert speed.startswith("optimizer.lr=0.01 vs optimizer.lr=0.001: no difference")
    # 57, 58, 56 against 72, 73, 71: -15 ± 2.776 · √(2/3) = ±2.27, the lower RMSE first.
    assert rmse == (
        "optimizer.lr=0.01 - optimizer.lr=0.001: -15 of test rmse [-17.27, -12.73] (3 runs each)"
    )
    rows.reverse()  # the worse configuration first in the report: still named second
    assert verdicts.lines(repeats.configurations(rows), QUANTILE)[1].startswith(
        "optimizer.lr=0.01 - optimizer.lr=0.001: -15 of test rmse"
    )


def test_a_speeds_verdict_counts_the_runs_on_a_busy_host() -> None:
    rows = sweep_rows(
        {
            ("cpu",): [(1000.0, 0.30), (1100.0, 0.31), (900.0, 0.32)],
            ("cuda:0",): [(4000.0, 0.33), (4400.0, 0.34), (3600.0, 0.35)],
        },
        ["device"],
    )
    rows[0]["host_busy"] = True
    speed, accuracy = verdicts.lines(repeats.configurations(rows), QUANTILE)
    assert speed.endswith(" as fast as cpu (3 runs each, 1 of 6 on a busy host)")
    assert accuracy.endswith("(3 runs each)")  # other work slows a run; it does not change it


def test_an_interval_that_holds_no_change_is_never_called_a_difference() -> None:
    # cuda_call is 1.13x as fast (0.89x the other way), and 3 points better, on the means, but
    # the runs scatter widely: 95% intervals 0.43x to 1.84x, -19.4 to +13.4 points (scipy).
    rows = sweep_rows(
        {
            ("to_device",): [(1000.0, 0.30), (1500.0, 0.20), (800.0, 0.34)],
            ("cuda_call",): [(1100.0, 0.33), (1200.0, 0.31), (1300.0, 0.29)],
        },
        ["placement"],
    )
    speed, accuracy = verdicts.lines(repeats.configurations(rows), QUANTILE)
    assert speed == (
        "to_device vs cuda_call: no difference beyond the noise in train images/s "
        "(0.89x [0.43, 1.84], 3 runs each)"
    )
    assert accuracy == (
        "to_device vs cuda_call: no difference beyond the noise in test accuracy "
        "(-3.0 points [-19.4, +13.4], 3 runs each)"
    )


def test_one_run_each_gets_no_verdict() -> None:
    once = sweep_rows({("lenet",): [(900.0, 0.3)], ("mlp",): [(800.0, 0.2)]}, ["model"])
    assert verdicts.lines(repeats.configurations(once), QUANTILE) == [f"one run each: {REPEAT}"]
    mixed = sweep_rows(
        {("lenet",): [(900.0, 0.3), (950.0, 0.31)], ("mlp",): [(800.0, 0.2)]}, ["model"]
    )
    assert verdicts.lines(repeats.configurations(mixed), QUANTILE) == [
        f"lenet vs mlp: one run of mlp: {REPEAT}"
    ]
    # A report of one configuration has nothing to compare.
    assert verdicts.lines(repeats.configurations(once[:1]), QUANTILE) == []


def test_each_verdict_says_what_was_held_equal() -> None:
    rows = sweep_rows(
        {
            ("lenet", "0.01"): [(1000.0, 0.30), (1010.0, 0.31)],
            ("lenet", "0.1"): [(1005.0, 0.20), (1020.0, 0.21)],
            ("mlp", "0.01"): [(3000.0, 0.20), (3100.0, 0.21)],
            ("mlp", "0.1"): [(2950.0, 0.10), (3050.0, 0.11)],
        },
        ["model", "optimizer.lr"],
    )
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
    said = verdicts.lines(configurations, QUANTILE)
    assert len(said) == 2 * len(pairs)  # a line per pair and measure
    # √(3000 · 3100) / √(1000 · 1010) = 3.03
    assert re.fullmatch(
        r"mlp trains 3\.03x \[[\d.]+, [\d.]+\] as fast as lenet, with optimizer\.lr=0\.01 "
        r"\(2 runs each\)",
        said[0],
    )
    # A value that is not a group's choice is named with its key. 30, 31 against 20, 21 points:
    # se² = 0.25 + 0.25, 2 degrees of freedom, +10.0 ± 4.303 · √0.5 = ±3.04.
    assert said[5] == (
        "optimizer.lr=0.01 - optimizer.lr=0.1, with model=lenet: "
        "+10.0 points of test accuracy [+7.0, +13.0] (2 runs each)"
    )
    # Without scipy: no guess, but how to get verdicts.
    assert verdicts.lines(configurations, quantile=None) == [
        "for verdicts on configurations that ran more than once: pip install -e '.[stats]'"
    ]


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
