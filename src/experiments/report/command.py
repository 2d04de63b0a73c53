"""`python -m experiments.report <folder>` (experiments-report): the report, made later or again."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.core.errors import ExperimentError
from experiments.report.prices import parse_prices
from experiments.report.summary import find_runs, table, write_report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.report",
        description="The report on a folder of runs: a row per run, configurations, verdicts, "
        "and plots.",
    )
    parser.add_argument("folder", type=Path, help="a run or sweep folder, or outputs/")
    parser.add_argument(
        "--across-sweeps",
        action="store_true",
        help="compare runs of different sweeps (and runs of their own) as if of one sweep; by "
        "default runs are compared only with runs of their own sweep",
    )
    parser.add_argument(
        "--price",
        help="what an hour of each device costs, by kind or name as runs record it "
        "(cuda=2.49/h,cpu=0.05/h), or @FILE of a YAML mapping (cuda: 2.49/h); the device cards "
        "then rank the devices by cost to the target",
    )
    try:
        arguments = parser.parse_args(argv)
    except SystemExit as done:  # --help (0), or usage said (2)
        return int(done.code or 0)
    folder: Path = arguments.folder
    if not folder.is_dir():
        return _error(f"{folder} is not a folder; give a run or sweep folder, or outputs/")
    if not find_runs(folder):
        return _error(f"no runs in {folder} (a run folder has a .hydra/ snapshot)")
    try:
        prices = None if arguments.price is None else parse_prices(arguments.price)
        rows = write_report(folder, across_sweeps=arguments.across_sweeps, prices=prices)
    except ExperimentError as error:  # a run's record that cannot be read, a price, named
        return _error(str(error))
    print(table(rows, folder), file=sys.stderr)
    print(f"report: {folder}/summary.md (and .csv, plots)", file=sys.stderr)
    return 0


def _error(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1
