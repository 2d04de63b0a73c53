"""What each `dataset.augment` option costs, as a share of the default training step: the
framework's training pass (`experiments.training.loop.train_epoch` over `Batches`, as
`python train.py` runs it) of the default model (tudui) on the shipped CIFAR-10 sample, batch 64,
with each option and without any, in one process. Passes alternate (off, each option, off, ...,
each round starting one further along), and each option's figure is the median over the rounds
of its pass's time over the round's pass without augmentation: 1.10 is 10% more time per step.

    python bench/augment_cost.py                        # on the CPU, 5 rounds
    python bench/augment_cost.py --threads 1 --batches 20 --rounds 7  # a busy 2-core host
    python bench/augment_cost.py --device cuda:0 --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from throughput import BATCH, SGD

from experiments.data import builtin
from experiments.data.augment import Augment
from experiments.data.batches import Batches
from experiments.devices.placement import ToDevice
from experiments.devices.plan import DevicePlan
from experiments.devices.runtime import Runtime
from experiments.training import loop, models, optimizers
from experiments.training.tasks import Classification

# Each option as the reference recipes set it (torchvision's classification reference, timm's).
OPTIONS: dict[str, dict[str, object]] = {
    "off": {},
    "crop_padding=4 flip=true": {"crop_padding": 4, "flip": True},
    "policy=randaugment": {"policy": "randaugment"},
    "policy=trivialaugment": {"policy": "trivialaugment"},
    "policy=autoaugment": {"policy": "autoaugment"},
    "erasing=0.25": {"erasing": 0.25},
    "mixup_alpha=0.2": {"mixup_alpha": 0.2},
    "cutmix_alpha=1.0": {"cutmix_alpha": 1.0},
    "all of them": {
        "crop_padding": 4,
        "flip": True,
        "policy": "trivialaugment",
        "erasing": 0.25,
        "mixup_alpha": 0.2,
        "cutmix_alpha": 1.0,
    },
}


def training_pass(
    device: torch.device, options: dict[str, object], limit: int | None
) -> Callable[[], float]:
    """A function timing one training pass over the sample (its first `limit` batches) with
    `options`, in seconds."""
    train, _ = builtin.cifar10_sample()
    runtime = Runtime(DevicePlan(device.type, device.index), ToDevice(device))
    torch.manual_seed(0)
    model = models.Tudui(3, 32, 10).to(device)
    optimizer, _ = optimizers.build_optimizer(SGD, model, device.type)
    learner = loop.Learner(model, Classification().to(device), optimizer)
    shuffle = torch.Generator().manual_seed(0)
    padding, flip = options.get("crop_padding", 0), options.get("flip", False)
    rest = {key: value for key, value in options.items() if key not in ("crop_padding", "flip")}
    augment = Augment(padding, flip, shuffle, num_classes=10, **rest)
    batches = Batches(
        train,
        batch_size=BATCH,
        mean=[0.5],
        std=[0.5],
        runtime=runtime,
        shuffle=shuffle,
        limit=limit,
        augment=augment,
    )

    def timed() -> float:
        started = time.perf_counter()
        loop.train_epoch(
            learner,
            batches,
            runtime,
            log_interval=20,
            log_step=lambda *logged: None,
            description="bench",
        )
        return time.perf_counter() - started

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=None, help="per pass (default: all 62)")
    parser.add_argument("--threads", type=int, default=None, help="torch's (default: its own)")
    arguments = parser.parse_args()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    device = torch.device(arguments.device)
    passes = {
        name: training_pass(device, options, arguments.batches) for name, options in OPTIONS.items()
    }
    for run in passes.values():  # warm-up
        run()
    seconds: dict[str, list[float]] = {name: [] for name in passes}
    names = list(passes)
    for round_number in range(arguments.rounds):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(passes[name]())
    print(f"{'option':28} {'s/pass':>8} {'x off':>6}  (median of {arguments.rounds} rounds)")
    for name, times in seconds.items():
        ratio = statistics.median(t / off for t, off in zip(times, seconds["off"], strict=True))
        print(f"{name:28} {statistics.median(times):8.3f} {ratio:6.2f}")


if __name__ == "__main__":
    main()
