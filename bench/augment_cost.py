"""What each `dataset.augment` option costs, as a share of the default training step: for
each batch of the default model's run (tudui on the shipped CIFAR-10 sample, batch 64), the time
to make it augmented, then the time to make it plain (`Batches`, as `python train.py` makes
them), then its optimizer step (`experiments.training.loop.trial_step`, as training takes it),
back to back, so that a busy host's drift touches all three alike. An option's cost is its extra
time over the plain batches' divided by the steps' time: 0.10 adds a tenth to each step. Each
figure is the median over rounds of a pass over the sample.

    python bench/augment_cost.py                        # on the CPU, 5 rounds
    python bench/augment_cost.py --threads 1 --rounds 7  # a busy host: one thread
"""

from __future__ import annotations

import argparse
import statistics
import time

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


def costs(device: torch.device, options: dict[str, object], rounds: int) -> list[float]:
    """Per round (a pass over the sample), the augmented batches' extra time over the plain
    ones' as a share of the steps' time."""
    train, _ = builtin.cifar10_sample()
    runtime = Runtime(DevicePlan(device.type, device.index), ToDevice(device))
    torch.manual_seed(0)
    model = models.Tudui(3, 32, 10).to(device)
    optimizer, _ = optimizers.build_optimizer(SGD, model, device.type)
    learner = loop.Learner(model, Classification().to(device), optimizer)

    def batches(shuffle: torch.Generator, augment: Augment | None) -> Batches:
        return Batches(
            train,
            batch_size=BATCH,
            mean=[0.5],
            std=[0.5],
            runtime=runtime,
            shuffle=shuffle,
            augment=augment,
        )

    padding, flip = options.get("crop_padding", 0), options.get("flip", False)
    rest = {key: value for key, value in options.items() if key not in ("crop_padding", "flip")}
    shuffle = torch.Generator().manual_seed(0)
    augmented = batches(shuffle, Augment(padding, flip, shuffle, num_classes=10, **rest))
    plain = batches(torch.Generator().manual_seed(0), None)
    shares = []
    for _ in range(rounds + 1):  # (the first a warm-up)
        extra = steps = 0.0
        made, plain_made = iter(augmented), iter(plain)
        for _ in range(len(augmented)):
            started = time.perf_counter()
            images, labels = next(made)
            augmenting = time.perf_counter()
            next(plain_made)
            stepping = time.perf_counter()
            loop.trial_step(learner, runtime, runtime.scaler, images, labels)
            extra += (augmenting - started) - (stepping - augmenting)
            steps += time.perf_counter() - stepping
        shares.append(extra / steps)
    return shares[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch's (default: its own)")
    arguments = parser.parse_args()
    if arguments.threads:
        torch.set_num_threads(arguments.threads)
    device = torch.device(arguments.device)
    print(f"{'option':28} {'cost':>6} {'range':>13}  (of a step; {arguments.rounds} rounds)")
    for name, options in OPTIONS.items():
        shares = costs(device, options, arguments.rounds)
        spread = f"{min(shares):+.3f}..{max(shares):+.3f}"
        print(f"{name:28} {statistics.median(shares):+6.3f} {spread:>13}", flush=True)


if __name__ == "__main__":
    main()
