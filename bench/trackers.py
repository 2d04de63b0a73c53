"""What a tracker costs the default run: `python train.py tracker=[tensorboard,<tracker>]` against
`python train.py` (TensorBoard alone), whole processes, in pairs.

Each pair runs both, the side that goes first alternating from pair to pair so that drift touches
both alike, in one scratch folder: its outputs/mlflow.db is made by a first, unmeasured run with
the tracker, as a user's every run after their first finds it. Reports each side's median wall
seconds and the median of the pairs' own ratios (target: at most 1.10), and appends them to
bench/RESULTS.md.

    python bench/trackers.py                    # mlflow, 3 pairs
    python bench/trackers.py --pairs 5 --no-save -- model=lenet
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from record import append_to_results

from experiments.devices.backends.cpu import cpu_name

ROOT = Path(__file__).resolve().parents[1]


def seconds(overrides: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides],
        cwd=cwd,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracker", default="mlflow")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument("overrides", nargs="*", help="train.py overrides for both sides")
    arguments = parser.parse_args()

    alone = ["device=cpu", *arguments.overrides]
    tracked = [*alone, f"tracker=[tensorboard,{arguments.tracker}]"]
    timed: dict[str, list[float]] = {"alone": [], "tracked": []}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        first = seconds(tracked, scratch)  # the store's tables made, the bytecode cached
        for pair in range(arguments.pairs):
            sides = [("alone", alone), ("tracked", tracked)][:: 1 if pair % 2 == 0 else -1]
            for side, overrides in sides:
                timed[side].append(seconds(overrides, scratch))
    ratios = [t / a for t, a in zip(timed["tracked"], timed["alone"], strict=True)]
    lines = [
        f"### {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, tracker={arguments.tracker} "
        f"against TensorBoard alone, {cpu_name()}, Python {platform.python_version()}, "
        f"{arguments.pairs} pairs, `python train.py {' '.join(alone)}`",
        "",
        "| side | median seconds | ratio (range) | target |",
        "|---|---:|---:|---:|",
        f"| TensorBoard alone | {statistics.median(timed['alone']):.2f} | | |",
        f"| with {arguments.tracker} | {statistics.median(timed['tracked']):.2f} | "
        f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | <= 1.10 |",
        f"| the first run with {arguments.tracker} (its store made) | {first:.2f} | | |",
        "",
    ]
    print("\n".join(lines))
    if not arguments.no_save:
        append_to_results(lines)


if __name__ == "__main__":
    main()
