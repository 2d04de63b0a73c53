"""A true/false setting of train.py, on against off, in paired fresh processes: train images/s.

Made to pick `trainer.cudnn_benchmark`'s default on a GPU (docs/speed.md), and to measure
`optimizer.fused` there. Each pair runs `python train.py` once with SETTING=false and once with
SETTING=true, in fresh processes (cuDNN's choices and CUDA's caches are a process's own), the
side that goes first alternating from pair to pair so that drift and a GPU warming up touch both
alike. It reports each side's median train images/s from results.json and the median of the
pairs' own ratios, and appends them to bench/RESULTS.md.

    python bench/paired.py trainer.cudnn_benchmark -- device=cuda       # tudui, lenet, resnet18
    python bench/paired.py trainer.cudnn_benchmark --models resnet18 -- device=cuda \
        trainer.precision=bf16 trainer.channels_last=true
    python bench/paired.py optimizer.fused -- device=cuda trainer.precision=fp16 optimizer=adam
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
from typing import Any

from record import append_to_results

ROOT = Path(__file__).resolve().parents[1]
# The models by name, as train.py overrides.
MODELS = {
    "tudui": ["model=tudui"],
    "lenet": ["model=lenet"],
    "resnet18": ["model=torchvision", "model.arch=resnet18"],
}


def run(model: str, setting: str, value: bool, epochs: int, overrides: list[str]) -> dict[str, Any]:
    """The results.json of one `python train.py` run with `setting`=`value`."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            sys.executable,
            str(ROOT / "train.py"),
            *MODELS[model],
            f"trainer.epochs={epochs}",
            f"{setting}={str(value).lower()}",
            *overrides,
        ]
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"train.py {' '.join(command[2:])}: {done.stderr.strip().splitlines()[-1]}")
        (results,) = Path(scratch).rglob("results.json")
        return json.loads(results.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setting", help="a true/false train.py key, e.g. trainer.cudnn_benchmark")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--print-only", action="store_true", help="leave RESULTS.md as it is")
    parser.add_argument("overrides", nargs="*", help="more train.py overrides, after --")
    arguments = parser.parse_intermixed_args()

    setting, rows, device = arguments.setting, [], "?"
    for model in arguments.models:
        pairs = []
        for pair in range(arguments.pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)
            speeds = {}
            for value in order:
                results = run(model, setting, value, arguments.epochs, arguments.overrides)
                speeds[value] = results["train_images_per_second"]
                device = results["device"]["name"]
            pairs.append((speeds[False], speeds[True]))
        off, on = (statistics.median(side) for side in zip(*pairs, strict=True))
        ratio = statistics.median(with_it / without for without, with_it in pairs)
        rows.append(f"| {model} | {off:,.0f} | {on:,.0f} | {ratio:.2f} |")
        print(rows[-1])

    header = (
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {setting} on vs off, {device}, "
        f"{arguments.pairs} pairs of `python train.py` runs ({arguments.epochs} epochs) "
        f"{' '.join(arguments.overrides)}".rstrip()
    )
    print(header)
    lines = [
        f"### {header}",
        "",
        "| model | off img/s | on img/s | on/off |",
        "|---|---:|---:|---:|",
    ]
    if not arguments.print_only:
        append_to_results(lines + rows)


if __name__ == "__main__":
    main()
