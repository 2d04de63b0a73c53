"""Training throughput three ways, in one process, on the same model, data and batch size:

  (a) tutorial  the tutorials' loop: a torchvision CIFAR10 dataset that makes a PIL image and
                calls ToTensor (and Normalize) per item, a DataLoader with batch 64, `.to(device)`
                per batch and `loss.item()` every step (for the classifiers: the tutorials have
                no regression or segmentation to compare with);
  (b) framework this project's training path (`experiments.training.loop.train_epoch`
                over `experiments.data.batches.Batches`, with the task's loss), exactly as
                `python train.py` runs it;
  (c) compute   the bound: forward, backward and step repeated on one fixed batch on the device.

The workloads: tudui, lenet and resnet18 classifying the shipped CIFAR-10 sample; mlp_regression,
model=mlp on the shipped diabetes table (task=regression, dataset=csv); unet_segmentation,
model=unet on generated shapes (task=segmentation, dataset=shapes). The ways are measured in
rounds of passes over the workload's training split, 4,000 examples or more a round (one pass
over the 4,000 CIFAR-10 images), interleaved (a b c, b c a, c a b, ...) after a warm-up of each,
so that drift in the machine's speed touches all three alike: images per second are the medians
over the rounds, and b/a and b/c the medians of each round's own ratios. It prints them, the
machine and the start-up times, and appends them to bench/RESULTS.md. glibc's malloc keeps freed
memory here, for all three, as `python train.py` does by default (--no-keep-freed-memory to
measure without).

    python bench/throughput.py                                 # every workload on the CPU
    python bench/throughput.py --models tudui --device cuda:0 --rounds 7
    python bench/throughput.py --channels-last off --precision bf16  # trainer options, (b) and (c)
    python bench/throughput.py --models tudui lenet --compile inductor --compile-mode default

Beside b/c, each model's MFU: (b)'s training FLOP/s over the device's measured peak in its
precision (`experiments.devices.measuring.peak_cache`, as a run's).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import torch
import torchvision
from omegaconf import OmegaConf
from record import append_to_results
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms
from tutorial import tutorial_steps

from experiments.config.choices import Precision
from experiments.config.schemas import SGDConfig
from experiments.data import builtin
from experiments.data.batches import Batches
from experiments.data.csv_table import csv_splits
from experiments.data.types import Split
from experiments.devices.backends.cpu import cpu_name
from experiments.devices.measuring.peak_cache import PeakCache
from experiments.devices.memory import channels_last, keep_freed_memory
from experiments.devices.placement import ToDevice
from experiments.devices.plan import DevicePlan
from experiments.devices.precision import autocast_and_scaler
from experiments.devices.runtime import Runtime
from experiments.training import loop, model_size, models, optimizers, torchvision_models
from experiments.training.tasks import Classification, Regression, Segmentation, Task

BATCH = 64


@dataclass(frozen=True)
class Workload:
    """A model built as train.py builds it, its training split, and its task."""

    model: Callable[[], nn.Module]
    data: Callable[[], tuple[Split, list[float], list[float]]]  # the split, its mean and std
    task: Callable[[Split], Task]
    tutorial: bool = False  # (a) exists for it


def cifar10() -> tuple[Split, list[float], list[float]]:
    return builtin.cifar10_sample()[0], [0.5], [0.5]


def diabetes() -> tuple[Split, list[float], list[float]]:
    train, _ = csv_splits(None, "progression", 0.2, 0)
    features = train.images.double()
    return train, features.mean((0, 2, 3)).tolist(), features.std((0, 2, 3)).tolist()


def shapes() -> tuple[Split, list[float], list[float]]:
    return builtin.shapes_splits(32, 1024, 256, 0)[0], [0.5], [0.5]


def regression(train: Split) -> Task:
    targets = train.labels.double()
    return Regression(targets.mean(0).tolist(), targets.std(0).tolist())


WORKLOADS = {
    "tudui": Workload(partial(models.Tudui, 3, 32, 10), cifar10, lambda _: Classification(), True),
    "lenet": Workload(partial(models.LeNet, 3, 32, 10), cifar10, lambda _: Classification(), True),
    "resnet18": Workload(
        partial(torchvision_models.build, "resnet18", 3, 32, 10),
        cifar10,
        lambda _: Classification(),
        True,
    ),
    "mlp_regression": Workload(partial(models.MLP, 10, 1, 1, [25, 16]), diabetes, regression),
    "unet_segmentation": Workload(partial(models.UNet, 3, 32, 4), shapes, lambda _: Segmentation()),
}


class TutorialCIFAR10(torchvision.datasets.CIFAR10):
    """torchvision's own CIFAR10 class and per-item code (PIL image, then the transform), over
    the shipped sample instead of the downloaded files."""

    def __init__(self, split: Split, transform: Callable) -> None:
        torchvision.datasets.VisionDataset.__init__(self, root="", transform=transform)
        self.train = True
        self.data = split.images.permute(0, 2, 3, 1).numpy()  # (N, H, W, C), as CIFAR10 keeps it
        self.targets = split.labels.tolist()


def tutorial_pass(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    loss_fn = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    started = time.perf_counter()
    images_seen = tutorial_steps(model, loader, device, loss_fn, optimizer)
    return images_seen / (time.perf_counter() - started)


# The shipped default, `optimizer=sgd`, as train.py builds it: fused on a GPU (`optimizer.fused`
# null), where an unfused step would make fp16's scaler wait for the GPU at every step.
SGD = OmegaConf.structured(SGDConfig(name="sgd", lr=0.01))


def framework_pass(model: nn.Module, batches: Batches, task: Task) -> float:
    runtime = batches.runtime
    optimizer, _ = optimizers.build_optimizer(SGD, model, runtime.type)
    learner = loop.Learner(model, runtime.placement.module(task), optimizer)
    training = loop.train_epoch(
        learner,
        batches,
        runtime,
        log_interval=20,
        log_step=lambda *logged: None,
        description="bench",
    )
    return training.images_per_second


def compute_pass(
    model: nn.Module,
    batch: tuple[torch.Tensor, torch.Tensor],
    steps: int,
    name: Precision,
    task: Task,
) -> float:
    images, labels = batch
    autocast_dtype, scaler = autocast_and_scaler(name, images.device)
    loss_fn = task.to(images.device)
    optimizer, _ = optimizers.build_optimizer(SGD, model, images.device.type)
    started = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(
            images.device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None
        ):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    loss.item()  # wait for the device
    return steps * len(labels) / (time.perf_counter() - started)


def measure(name: str, device: torch.device, rounds: int, options: argparse.Namespace) -> dict:
    """Median images/s of each way, and the medians of the per-round ratios b/a and b/c."""
    workload = WORKLOADS[name]
    train, mean, std = workload.data()
    task = workload.task(train)
    precision_name = Precision(options.precision)
    asked = {"auto": None, "on": True, "off": False}[options.channels_last]
    in_channels_last = channels_last(asked, device)
    autocast_dtype, scaler = autocast_and_scaler(precision_name, device)
    framework_runtime = Runtime(
        DevicePlan(device.type, device.index),
        ToDevice(device),
        autocast_dtype=autocast_dtype,
        scaler=scaler,
        channels_last=in_channels_last,
    )

    def model() -> nn.Module:
        torch.manual_seed(0)
        built = workload.model().to(device)
        if in_channels_last:
            built = built.to(memory_format=torch.channels_last)
        if not options.compile:
            return built
        return torch.compile(built, backend=options.compile, mode=options.compile_mode)

    framework_model = model()
    shuffle = torch.Generator().manual_seed(0)
    batches = Batches(
        train, batch_size=BATCH, mean=mean, std=std, runtime=framework_runtime, shuffle=shuffle
    )
    fixed = next(iter(batches))
    ways = {
        "framework": lambda: framework_pass(framework_model, batches, task),
        "compute": lambda: compute_pass(framework_model, fixed, len(batches), precision_name, task),
    }
    if workload.tutorial:
        tutorial_model = workload.model().to(device)
        normalize = transforms.Compose(
            [transforms.ToTensor(), transforms.Normalize([0.5] * 3, [0.5] * 3)]
        )
        loader = DataLoader(TutorialCIFAR10(train, normalize), batch_size=BATCH, shuffle=True)
        ways = {"tutorial": lambda: tutorial_pass(tutorial_model, loader, device), **ways}
    # A round passes over at least 4,000 examples (the diabetes table's 354 rows twelve times):
    # a pass of a few milliseconds alone would be timed mostly as noise.
    passes = -(-4000 // len(train))
    ways = {way: partial(_repeated, run, passes) for way, run in ways.items()}
    for run in ways.values():  # warm-up (and compilation)
        run()
    speeds: dict[str, list[float]] = {way: [] for way in ways}
    names = list(ways)
    for round_number in range(rounds):
        # Each round starts one further along (a b c, b c a, c a b, ...), so that no way always
        # runs right after the same other one (whose memory and caches it would inherit).
        shift = round_number % len(names)
        for way in names[shift:] + names[:shift]:
            speeds[way].append(ways[way]())
    a, b, c = (speeds.get(way, []) for way in ("tutorial", "framework", "compute"))
    # (b)'s MFU: its training FLOP/s over the device's peak in its precision, as a run's.
    size = model_size.measure(workload.model().to(device), tuple(train.images.shape[1:]), device)
    found = PeakCache().peak(device, autocast_dtype, size.convolutions_lead)
    framework = statistics.median(b)
    return {
        **{way: statistics.median(values) for way, values in speeds.items()},
        "mfu": size.training_flops_per_image * framework / found.peak.flops_per_second,
        "b/a": statistics.median(y / x for x, y in zip(a, b, strict=True)) if a else None,
        "b/c": statistics.median(y / x for x, y in zip(c, b, strict=True)),
    }


def _repeated(run: Callable[[], float], passes: int) -> float:
    """Examples/s over `passes` runs of a pass: all their examples over all their time."""
    return passes / sum(1 / run() for _ in range(passes))


def startup_seconds() -> tuple[float, float]:
    """Seconds for `python train.py --cfg job`, and from the command to the first training step
    (a real run of one step, in a scratch folder)."""
    train_py = Path(__file__).resolve().parents[1] / "train.py"
    started = time.perf_counter()
    subprocess.run([sys.executable, str(train_py), "--cfg", "job"], capture_output=True, check=True)
    show_config = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as scratch:
        launched = time.time()
        subprocess.run(
            [
                sys.executable,
                str(train_py),
                "device=cpu",
                "trainer.epochs=1",
                "trainer.limit_train_batches=1",
                "trainer.limit_eval_images=64",
            ],
            cwd=scratch,
            capture_output=True,
            check=True,
        )
        (metrics,) = Path(scratch).rglob("metrics.jsonl")
        first_step = json.loads(metrics.read_text().splitlines()[0])["time"]
    return show_config, first_step - launched


def machine(device: torch.device) -> str:
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    return (
        f"{where}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"Python {platform.python_version()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--precision", default="fp32", choices=[p.value for p in Precision])
    parser.add_argument(
        "--channels-last",
        choices=["auto", "on", "off"],
        default="auto",
        help="as trainer.channels_last (auto: on for the CPU, as train.py does by default)",
    )
    parser.add_argument("--compile", metavar="BACKEND", help="torch.compile backend, e.g. inductor")
    parser.add_argument(
        "--compile-mode",
        metavar="MODE",
        help="inductor's mode, as trainer.compile_mode: default, reduce-overhead (CUDA graphs), "
        "max-autotune, max-autotune-no-cudagraphs",
    )
    parser.add_argument(
        "--no-keep-freed-memory", action="store_true", help="leave glibc's malloc as it is"
    )
    parser.add_argument("--no-save", action="store_true", help="print only; leave RESULTS.md")
    arguments = parser.parse_args()
    device = torch.device(arguments.device)
    # As `python train.py` does by default (trainer.keep_freed_memory); process-wide, so (a) too.
    kept = not arguments.no_keep_freed_memory and keep_freed_memory()

    settings = [
        f"precision {arguments.precision}",
        f"channels_last {arguments.channels_last}",
        *([f"compile={arguments.compile}"] if arguments.compile else []),
        *([f"compile_mode={arguments.compile_mode}"] if arguments.compile_mode else []),
        f"keep_freed_memory={'on' if kept else 'off'}",
    ]
    header = (
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {machine(device)}, batch {BATCH}, "
        f"{', '.join(settings)}, median of {arguments.rounds} rounds"
    )
    lines = [
        f"### {header}",
        "",
        "| model | (a) tutorial img/s | (b) framework img/s | (c) compute img/s | b/a | b/c "
        "| MFU (b) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    print(header)
    for name in arguments.models:
        speeds = measure(name, device, arguments.rounds, arguments)
        tutorial, b, c = speeds.get("tutorial"), speeds["framework"], speeds["compute"]
        a = "-" if tutorial is None else f"{tutorial:,.0f}"
        b_a = "-" if speeds["b/a"] is None else f"{speeds['b/a']:.2f}"
        row = (
            f"| {name} | {a} | {b:,.0f} | {c:,.0f} | {b_a} | {speeds['b/c']:.2f} "
            f"| {speeds['mfu']:.1%} |"
        )
        print(row)
        lines.append(row)
    show_config, first_step = startup_seconds()
    startup = (
        f"Start-up: `python train.py --cfg job` {show_config:.2f} s; "
        f"command to first training step {first_step:.1f} s."
    )
    print(startup)
    lines += ["", startup]
    if not arguments.no_save:
        append_to_results(lines)


if __name__ == "__main__":
    main()
