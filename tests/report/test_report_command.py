"""`python -m experiments.report <folder>` on runs as they lie on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.report.command import main
from experiments.report.statistics import log_spread
from helpers import SMALL, completed_sweep, results


def test_a_results_file_that_cannot_be_read_is_a_run_that_says_so(
    old_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (old_run / "results.json").write_text('{"status": "comp')

    assert main([str(tmp_path)]) == 0
    console = capsys.readouterr().err
    assert ": 1 unreadable\n" in console
    reason = "results.json is not JSON (Unterminated string starting at: line 1 column 12)"
    assert f"\nflat_layout_run: {reason}\n" in console


@pytest.mark.slow
def test_prices_give_each_device_its_cost_to_the_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = completed_sweep(
        tmp_path,
        "device=every",  # the CPU alone here: GPUs' prices are tests/report/test_device_cards.py's
        "trainer.seed=0,1",
        "trainer.target_accuracy=0.05",  # reached within the epoch
        *(override for override in SMALL if override != "device=cpu"),
    )
    assert main([str(sweep), "--price", "cuda=2.49/h"]) == 1
    refused = "Error: --price names cuda, which no run used; the runs used cpu\n"
    assert capsys.readouterr().err == refused
    assert main([str(sweep), "--price", "cpu=0.05/h"]) == 0
    (card,) = (line for line in capsys.readouterr().err.splitlines() if line.startswith("  cpu ("))
    seconds = [results(run)["time_to_accuracy"]["seconds"] for run in sorted(sweep.glob("[01]_*"))]
    time, cost = (log_spread([each * per for each in seconds]) for per in (1, 0.05 / 3600))
    assert f"; to 5% test accuracy: time {time.mean:.3g} s ({time.interval[0]:.3g} s to " in card
    assert card.endswith(
        f", cost {cost.mean:.3g} ({cost.interval[0]:.3g} to {cost.interval[1]:.3g}) at 0.05/h"
    )
    assert main([str(sweep)]) == 0  # no prices, no cost
    assert ", cost " not in capsys.readouterr().err
