"""The training loop: one epoch of optimizer steps, and evaluation on the test split.

Losses and correct counts add up on the device; they come back to the host (`.item()`, `.tolist()`)
only at log intervals and at the end of a pass, so the loop never waits for the device per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from tqdm import tqdm

from experiments.data import Batches
from experiments.measure import DeviceTimer
from experiments.tuning import Precision

# Called every log interval with (step within the epoch, mean loss since the last call, images/s).
StepLogger = Callable[[int, float, float], None]


@dataclass
class Training:
    """One epoch of training, and where its time went."""

    loss: float  # mean over the epoch's images
    images: int
    seconds: float
    wait_seconds: float  # the loop waiting for batches (host clock)
    copy_seconds: float  # of which, copying them to the device
    compute_seconds: float  # forward, backward and optimizer step (on the device)

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds


@dataclass
class Evaluation:
    loss: float  # mean over the images
    accuracy: float  # fraction correct
    class_accuracy: list[float | None]  # per class; None for a class with no images
    seconds: float


def train_epoch(
    model: nn.Module,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    precision: Precision,
    batches: Batches,
    log_interval: int,
    log_step: StepLogger,
    description: str,
) -> Training:
    """One pass of optimizer steps over `batches`; losses and speeds count every process."""
    model.train()
    processes = batches.processes
    compute = DeviceTimer(batches.placement.device)
    interval_loss = batches.placement.tensor(torch.zeros(()))  # summed over the images
    epoch_loss = 0.0
    interval_first = 0
    started = interval_started = time.perf_counter()
    progress = tqdm(
        batches,
        desc=description,
        unit="batch",
        leave=False,
        disable=None if processes.is_main else True,
    )
    for step, (images, labels) in enumerate(progress, start=1):
        span = compute.start()
        optimizer.zero_grad(set_to_none=True)
        with precision.autocast():
            loss = loss_fn(model(images), labels)
        precision.step(loss, optimizer)
        compute.stop(span)

        interval_loss.add_(loss.detach(), alpha=len(labels))
        if step % log_interval == 0 or step == len(batches):
            images_seen = sum(batches.sizes[interval_first:step])
            interval_total = processes.sum(interval_loss).item()  # waits for the device
            epoch_loss += interval_total
            mean_loss = interval_total / images_seen
            now = time.perf_counter()
            speed = images_seen / (now - interval_started)
            progress.set_postfix(loss=f"{mean_loss:.3f}", img_per_s=f"{speed:,.0f}")
            log_step(step, mean_loss, speed)
            interval_loss.zero_()
            interval_first, interval_started = step, now
    # The last step always logs, so the device has finished by now.
    seconds = time.perf_counter() - started
    images = batches.count_images()
    waited, copying = batches.times()
    return Training(epoch_loss / images, images, seconds, waited, copying, compute.take())


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loss_fn: nn.Module,
    precision: Precision,
    batches: Batches,
    num_classes: int,
) -> Evaluation:
    """Loss and accuracy (overall and per class) over `batches`, counting every process."""
    model.eval()
    started = time.perf_counter()
    loss_sum = batches.placement.tensor(torch.zeros(()))
    seen = batches.placement.tensor(torch.zeros(num_classes, dtype=torch.int64))
    correct = torch.zeros_like(seen)
    for images, labels in batches:
        with precision.autocast():
            outputs = model(images)
            loss_sum += loss_fn(outputs, labels).float() * len(labels)
        per_class = nn.functional.one_hot(labels, num_classes)
        seen += per_class.sum(0)
        correct += (per_class * (outputs.argmax(1) == labels).unsqueeze(1)).sum(0)
    batches.times()  # evaluation's waits are part of its seconds
    processes = batches.processes
    seen_list = processes.sum(seen).tolist()
    correct_list = processes.sum(correct).tolist()
    images = sum(seen_list)
    return Evaluation(
        loss=processes.sum(loss_sum).item() / images,
        accuracy=sum(correct_list) / images,
        class_accuracy=[c / n if n else None for c, n in zip(correct_list, seen_list, strict=True)],
        seconds=time.perf_counter() - started,
    )
