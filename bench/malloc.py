"""What `trainer.keep_freed_memory` (glibc's malloc keeping freed memory) gives, in paired runs.

The setting holds for a whole process, so it cannot be compared inside one: this runs
`python train.py` with it on and off, alternately, in fresh processes (each pair close in time, so
drift in the machine's speed touches both), and reports train images per second from each run's
results.json: the medians, and the median of the pairs' own ratios. Appends to bench/RESULTS.md.

    python bench/malloc.py                          # tudui and lenet, 5 pairs each
    python bench/malloc.py --models tudui --pairs 9 -- trainer.channels_last=false
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from record import append_to_results

ROOT = Path(__file__).resolve().parents[1]


def images_per_second(model: str, keep: bool, overrides: list[str]) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            sys.executable,
            str(ROOT / "train.py"),
            f"model={model}",
            "device=cpu",
            "trainer.epochs=2",
            "trainer.limit_eval_images=64",
            f"trainer.keep_freed_memory={keep}",
            *overrides,
        ]
        subprocess.run(command, cwd=scratch, capture_output=True, check=True)
        (results,) = Path(scratch).rglob("results.json")
        return json.loads(results.read_text())["train_images_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tudui", "lenet"])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("overrides", nargs="*", help="more train.py overrides, after --")
    arguments = parser.parse_args()

    header = (
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, trainer.keep_freed_memory on vs off, "
        f"{arguments.pairs} pairs of `python train.py` runs (2 epochs, CPU) "
        f"{' '.join(arguments.overrides)}".rstrip()
    )
    lines = [
        f"### {header}",
        "",
        "| model | off img/s | on img/s | on/off |",
        "|---|---:|---:|---:|",
    ]
    print(header)
    for model in arguments.models:
        pairs = [
            (
                images_per_second(model, False, arguments.overrides),
                images_per_second(model, True, arguments.overrides),
            )
            for _ in range(arguments.pairs)
        ]
        off, on = (statistics.median(side) for side in zip(*pairs, strict=True))
        ratio = statistics.median(kept / plain for plain, kept in pairs)
        row = f"| {model} | {off:,.0f} | {on:,.0f} | {ratio:.2f} |"
        print(row)
        lines.append(row)
    append_to_results(lines)


if __name__ == "__main__":
    main()
