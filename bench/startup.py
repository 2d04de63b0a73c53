"""How quickly a run starts, measured against its floor, side by side in one session.

    (a) floor     `python -c "import torch"`: no run can start faster than torch loads
    (a') floor    the smallest PyTorch script of the same step (SMALLEST_STEP): torch imported,
                  the default model (Tudui) and SGD built, one forward, backward and step on a
                  random batch of 64; torch's Optimizer imports torch._dynamo on its first
                  parameter group, which every training script pays
    (b) one batch `python train.py trainer.epochs=1 trainer.limit_train_batches=1
                  trainer.limit_eval_images=64`, the whole process (target: b/a' <= 1.25)
    (c) a sweep   `python train.py -m model=lenet trainer.epochs=1 trainer.seed=0,...,7`, the
                  whole command against the sum of its 8 jobs' own run times (results.json's
                  total_seconds; target: at most 1.3x)

Rounds are interleaved (a, b, c in turn, rotated each round) so drift in the machine's speed
touches all three; the medians of each round's own ratios are reported, with their range. Every
command may cache its bytecode (in the scratch folder, even where PYTHONDONTWRITEBYTECODE is set),
as a user's checkout does after its first run. Appends to bench/RESULTS.md unless --no-save.

    python bench/startup.py                 # 5 rounds
    python bench/startup.py --rounds 9 --no-save
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
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from record import append_to_results

from experiments.devices.backends.cpu import cpu_name

ROOT = Path(__file__).resolve().parents[1]
ONE_BATCH = [
    "device=cpu",
    "trainer.epochs=1",
    "trainer.limit_train_batches=1",
    "trainer.limit_eval_images=64",
]
# The same step as the one-batch run's, written as the shortest PyTorch script would.
SMALLEST_STEP = """
import torch
from torch import nn

model = nn.Sequential(
    nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(2), nn.Conv2d(32, 32, 5, padding=2),
    nn.MaxPool2d(2), nn.Conv2d(32, 64, 5, padding=2), nn.MaxPool2d(2), nn.Flatten(),
    nn.Linear(1024, 64), nn.Linear(64, 10),
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
images, labels = torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,))
nn.functional.cross_entropy(model(images), labels).backward()
optimizer.step()
"""
SWEEP_JOBS = 8
SWEEP = ["-m", "device=cpu", "model=lenet", "trainer.epochs=1", "trainer.seed=0,1,2,3,4,5,6,7"]


def timed(command: list[str], cwd: Path) -> float:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    environment["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "startup-bytecode")
    began = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=environment, capture_output=True, check=True)
    return time.perf_counter() - began


def floor(scratch: Path) -> float:
    return timed([sys.executable, "-c", "import torch"], scratch)


def smallest_step(scratch: Path) -> float:
    return timed([sys.executable, "-c", SMALLEST_STEP], scratch)


def one_batch(scratch: Path) -> float:
    return timed([sys.executable, str(ROOT / "train.py"), *ONE_BATCH], scratch)


def sweep(scratch: Path) -> tuple[float, float]:
    """The whole sweep's seconds, and the sum of its jobs' own run times."""
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        whole = timed([sys.executable, str(ROOT / "train.py"), *SWEEP], Path(folder))
        jobs = [json.loads(path.read_text()) for path in Path(folder).rglob("results.json")]
    if len(jobs) != SWEEP_JOBS or any(job["status"] != "completed" for job in jobs):
        raise SystemExit(f"the sweep did not complete its {SWEEP_JOBS} jobs")
    return whole, sum(job["total_seconds"] for job in jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-save", action="store_true", help="print only")
    parser.add_argument("--no-sweep", action="store_true", help="(a) and (b) only")
    arguments = parser.parse_args()

    seconds: dict[str, list[float]] = {
        key: [] for key in ("floor", "smallest", "one_batch", "sweep", "jobs")
    }
    ratios: dict[str, list[float]] = {"one_batch": [], "over_smallest": [], "sweep": []}
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        smallest_step(scratch)  # warm-up: the file system's cache, Python's bytecode
        one_batch(scratch)
        ways: list[Callable[[], dict[str, float]]] = [
            lambda: {"floor": floor(scratch), "smallest": smallest_step(scratch)},
            lambda: {"one_batch": one_batch(scratch)},
            lambda: dict(zip(("sweep", "jobs"), sweep(scratch), strict=True)),
        ][: 2 if arguments.no_sweep else 3]
        for number in range(arguments.rounds):
            measured: dict[str, float] = {}
            for way in ways[number % len(ways) :] + ways[: number % len(ways)]:
                measured.update(way())
            for key, value in measured.items():
                seconds[key].append(value)
            ratios["one_batch"].append(measured["one_batch"] / measured["floor"])
            ratios["over_smallest"].append(measured["one_batch"] / measured["smallest"])
            if not arguments.no_sweep:
                ratios["sweep"].append(measured["sweep"] / measured["jobs"])

    median = {key: statistics.median(values) for key, values in seconds.items() if values}
    spread = {
        key: f"{min(values):.2f}-{max(values):.2f}" for key, values in ratios.items() if values
    }
    lines = [
        f"### {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, start-up, {cpu_name()}, Python "
        f"{platform.python_version()}, median of {arguments.rounds} rounds",
        "",
        "| measure | seconds | against | ratio | target |",
        "|---|---:|---|---:|---:|",
        f"| one-batch run, whole process | {median['one_batch']:.2f} | `import torch` "
        f"{median['floor']:.2f} s | {statistics.median(ratios['one_batch']):.2f} | <= 2 |",
        f"| one-batch run, whole process | {median['one_batch']:.2f} | the smallest PyTorch "
        f"script of the step {median['smallest']:.2f} s | "
        f"{statistics.median(ratios['over_smallest']):.2f} ({spread['over_smallest']}) | <= 1.25 |",
    ]
    if not arguments.no_sweep:
        lines.append(
            f"| sweep of {SWEEP_JOBS} one-epoch LeNet jobs | {median['sweep']:.2f} | its jobs' run "
            f"times, summed: {median['jobs']:.2f} s | {statistics.median(ratios['sweep']):.2f} "
            "| <= 1.3 |"
        )
    lines.append("")
    print("\n".join(lines))
    if not arguments.no_save:
        append_to_results(lines)


if __name__ == "__main__":
    main()
