"""Whole process against whole process: `python train.py` against the same job written with
PyTorch Lightning (bench/lightning_peer.py), timed from the command to its exit.

Both train the same model on the shipped CIFAR-10 sample for the same epochs, batch and optimizer,
evaluating the test split after every epoch, each in a scratch folder of its own, with its own
records (this project's run folder; Lightning's logs and checkpoints). The runs go in pairs, the
order alternating from pair to pair (ours first, then Lightning first, ...), so that drift in the
machine's speed touches both alike: the seconds are medians over the pairs and the speed-up the
median of each pair's own ratio. It prints them and appends them to bench/RESULTS.md.

Lightning is installed for this benchmark only, beside the project (never a dependency of it):

    pip install --no-deps --target bench/.lightning -r bench/requirements-lightning.txt
    python bench/vs_lightning.py                        # tudui (the default run) and resnet18
    python bench/vs_lightning.py --models tudui --pairs 5
    python bench/vs_lightning.py --peer-channels-last    # Lightning in channels-last too
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import torch
from record import append_to_results

from experiments.devices.backends.cpu import cpu_name

BENCH = Path(__file__).resolve().parent
LIGHTNING = BENCH / ".lightning"
TRAIN_PY = BENCH.parent / "train.py"
# The overrides that make `python train.py` train each peer model (tudui is the default run).
OVERRIDES = {
    "tudui": [],
    "lenet": ["model=lenet"],
    "resnet18": ["model=torchvision", "model.arch=resnet18"],
}


def timed(command: list[str], scratch: str, env: dict[str, str] | None = None) -> tuple[float, str]:
    """Seconds from launching `command` in the folder `scratch` to its exit, and its stdout."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def framework_run(model: str, epochs: int) -> tuple[float, float]:
    """Seconds of `python train.py` for `model`, and its final test accuracy."""
    command = [sys.executable, str(TRAIN_PY), *OVERRIDES[model], f"trainer.epochs={epochs}"]
    with tempfile.TemporaryDirectory() as scratch:
        seconds, _ = timed(command, scratch)
        (results,) = Path(scratch).rglob("results.json")
        return seconds, json.loads(results.read_text())["test_accuracy"]


def lightning_run(model: str, epochs: int, channels_last: bool) -> tuple[float, float]:
    """Seconds of the Lightning peer for `model`, and its final test accuracy."""
    path = os.pathsep.join(filter(None, [str(LIGHTNING), os.environ.get("PYTHONPATH")]))
    peer = BENCH / "lightning_peer.py"
    command = [sys.executable, str(peer), "--model", model, "--epochs", str(epochs)]
    command += ["--channels-last"] if channels_last else []
    with tempfile.TemporaryDirectory() as scratch:
        seconds, stdout = timed(command, scratch, {**os.environ, "PYTHONPATH": path})
    return seconds, json.loads(stdout.splitlines()[-1])["test_accuracy"]


def measure(model: str, epochs: int, pairs: int, channels_last: bool) -> dict[str, float]:
    ours: list[tuple[float, float]] = []
    theirs: list[tuple[float, float]] = []
    for pair in range(pairs):
        runs = [
            (ours, framework_run),
            (theirs, partial(lightning_run, channels_last=channels_last)),
        ]
        for record, run in runs if pair % 2 == 0 else reversed(runs):
            record.append(run(model, epochs))
        seconds = f"train.py {ours[-1][0]:.1f} s, Lightning {theirs[-1][0]:.1f} s"
        print(f"  {model} pair {pair + 1}: {seconds}")
    return {
        "framework": statistics.median(seconds for seconds, _ in ours),
        "lightning": statistics.median(seconds for seconds, _ in theirs),
        "speedup": statistics.median(t / o for (o, _), (t, _) in zip(ours, theirs, strict=True)),
        "framework_accuracy": statistics.median(accuracy for _, accuracy in ours),
        "lightning_accuracy": statistics.median(accuracy for _, accuracy in theirs),
    }


def lightning_version() -> str:
    metadata = next(LIGHTNING.glob("lightning-*.dist-info"), None)
    if metadata is None:
        sys.exit(
            f"Lightning is not installed in {LIGHTNING}; install it there with\n"
            "  pip install --no-deps --target bench/.lightning -r bench/requirements-lightning.txt"
        )
    return metadata.name.removeprefix("lightning-").removesuffix(".dist-info")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tudui", "resnet18"], choices=OVERRIDES)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument(
        "--peer-channels-last",
        action="store_true",
        help="give the Lightning peer channels-last too, as train.py has on the CPU by default",
    )
    parser.add_argument("--no-save", action="store_true", help="print only; leave RESULTS.md")
    arguments = parser.parse_args()
    peer = "bench/lightning_peer.py" + (" --channels-last" if arguments.peer_channels_last else "")
    header = (
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, `python train.py` against Lightning "
        f"{lightning_version()} (`{peer}`), {cpu_name()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"Python {platform.python_version()}, {arguments.epochs} epochs, device auto, "
        f"median of {arguments.pairs} interleaved pairs"
    )
    print(header)
    lines = [
        f"### {header}",
        "",
        "Seconds from the command to its exit; speed-up: Lightning's seconds over train.py's.",
        "",
        "| model | train.py s | Lightning s | speed-up | train.py test acc | Lightning test acc |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for model in arguments.models:
        result = measure(model, arguments.epochs, arguments.pairs, arguments.peer_channels_last)
        row = (
            f"| {model} | {result['framework']:.1f} | {result['lightning']:.1f} "
            f"| {result['speedup']:.2f} | {result['framework_accuracy']:.1%} "
            f"| {result['lightning_accuracy']:.1%} |"
        )
        print(row)
        lines.append(row)
    if not arguments.no_save:
        append_to_results(lines)


if __name__ == "__main__":
    main()
