"""`python -m experiments.report <folder>` (experiments-report): the report, made later or again;
`python -m experiments.report A B`: sweep B against sweep A."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.core.errors import ExperimentError
from experiments.report import merged_sweeps, sweep_against_sweep
from experiments.report.headlines import HEADLINES
from experiments.report.prices import parse_prices
from experiments.report.repeats import Row
from experiments.report.summary import (
    aligned_lines,
    find_runs,
    report_rows,
    table,
    trained,
    write_report,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.report",
        description="The report on a folder of runs: a row per run, configurations, verdicts, "
        "and plots. Given several folders, each one's runs against the first's, configuration "
        "by configuration.",
    )
    parser.add_argument(
        "folders",
        type=Path,
        nargs="+",
        metavar="folder",
        help="a run or sweep folder, outputs/, or a folder of links to runs; several: each "
        "against the first",
    )
    parser.add_argument(
        "--across-sweeps",
        action="store_true",
        help="compare runs of different sweeps (and runs of their own) as if of one sweep; by "
        "default runs are compared only with runs of their own sweep",
    )
    parser.add_argument(
        "--fail-if-worse",
        action="append",
        default=[],
        metavar="MEASURE:AMOUNT",
        help="with several folders, exit 1 where a folder's figure is worse than the first's "
        "beyond the noise and by more than AMOUNT: speed:5%%, mfu:5%%, accuracy:1 (points)",
    )
    parser.add_argument(
        "--reference",
        metavar="[FOLDER:]DEVICE",
        help="with several folders (sweeps of several machines), one table of every folder's "
        "configurations, each one's speed against this device's",
    )
    parser.add_argument(
        "--price",
        help="what an hour of each device costs, by kind or name as runs record it "
        "(cuda=2.49/h,cpu=0.05/h), or @FILE of a YAML mapping (cuda: 2.49/h); the device cards "
        "then rank the devices by cost to the target",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        arguments = _parser().parse_args(argv)
    except SystemExit as done:  # --help (0), or usage said (2)
        return int(done.code or 0)
    several = len(arguments.folders) > 1
    if arguments.fail_if_worse and not several:
        return _error(
            "--fail-if-worse compares folders: give two or more, the first the one to compare "
            "against"
        )
    if arguments.reference is not None and not several:
        return _error("--reference sets folders against one another: give two or more")
    if arguments.price is not None and several:
        return _error("--price ranks the devices of one folder's runs: give one folder")
    for folder in arguments.folders:
        if not folder.is_dir():
            return _error(f"{folder} is not a folder; give a run or sweep folder, or outputs/")
        if not find_runs(folder):
            return _error(f"no runs in {folder} (a run folder has a .hydra/ snapshot)")
    try:
        if several:
            return _against(arguments.folders, arguments.fail_if_worse, arguments.reference)
        (folder,) = arguments.folders
        prices = None if arguments.price is None else parse_prices(arguments.price)
        rows = write_report(folder, across_sweeps=arguments.across_sweeps, prices=prices)
    except ExperimentError as error:  # a run's record that cannot be read, a price, named
        return _error(str(error))
    print(table(rows, folder), file=sys.stderr)
    print(f"report: {folder}/summary.md (and .csv, plots)", file=sys.stderr)
    return 0


def _against(folders: Sequence[Path], fail_if_worse: Sequence[str], reference: str | None) -> int:
    """Each folder's runs against the first's, 1 where a threshold's figure is worse; or with a
    reference device, one table of them all against it."""
    headlines = [headline.metric.name for headline in HEADLINES if not headline.final]
    given = sweep_against_sweep.thresholds(fail_if_worse, headlines)
    names = sweep_against_sweep.side_names(folders)
    sides = [
        sweep_against_sweep.Side(name, folder, _completed(folder))
        for name, folder in zip(names, folders, strict=True)
    ]
    if reference is not None:
        against = merged_sweeps.reference_of(reference, sides)
        heading = merged_sweeps.HEADING.format(reference=f"{against[0].name}:{against[1]}")
        lines = aligned_lines(merged_sweeps.cells(sides, against))
        print("\n".join([heading + ":", *lines]), file=sys.stderr)
    failed = []
    for side in sides[1:] if reference is None else ():
        compared = sweep_against_sweep.against(sides[0], side)
        print("\n".join(compared.lines), file=sys.stderr)
        failed += sweep_against_sweep.failures(compared.verdicts, sides[0].name, given)
    if failed:
        print(
            "Worse beyond the noise:\n" + "\n".join(f"  {line}" for line in failed), file=sys.stderr
        )
        return 1
    return 0


def _completed(folder: Path) -> list[Row]:
    rows = trained(report_rows(folder, across_sweeps=True)[0])
    return [row for row in rows if row["status"] == "completed"]


def _error(message: str) -> int:
    print(f"Error: {message}", file=sys.stderr)
    return 1
