"""`python -m experiments.report <folder>` (experiments-report): the report on a folder of runs,
made later or again (every sweep makes its own at its end)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from experiments.core.errors import ExperimentError
from experiments.report.summary import find_runs, table, write_report


def main(argv: Sequence[str] | None = None) -> int:
    """summary.csv/.md and plots for the folder of runs the one argument names."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if len(arguments) != 1 or arguments[0] in ("-h", "--help"):
        print("The report on a folder of runs: a row per run, and plots.", file=sys.stderr)
        print("usage: python -m experiments.report <folder of runs>", file=sys.stderr)
        return 2
    folder = Path(arguments[0])
    if not folder.is_dir():
        print(
            f"Error: {folder} is not a folder; give a run or sweep folder, or outputs/",
            file=sys.stderr,
        )
        return 1
    if not find_runs(folder):
        print(f"Error: no runs in {folder} (a run folder has a .hydra/ snapshot)", file=sys.stderr)
        return 1
    try:
        rows = write_report(folder)
    except ExperimentError as error:  # a run's record that cannot be read, named
        print(f"Error: {error}", file=sys.stderr)
        return 1
    print(table(rows, folder), file=sys.stderr)
    # As a sweep's own report says it: which plots there are depends on the runs.
    print(f"report: {folder}/summary.md (and .csv, plots)", file=sys.stderr)
    return 0
