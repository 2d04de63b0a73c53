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

# Called every log interval with (step within the epoch, mean loss since the last call, images/s).
StepLogger = Callable[[int, float, float], None]


@dataclass
class Training:
    """One epoch of training."""

    loss: float  # mean over the epoch's images
    images: int
    seconds: float
    data_seconds: float  # of `seconds`, putting batches on the device

    @property
    def data_share(self) -> float:
        return self.data_seconds / self.seconds

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
    batches: Batches,
    log_interval: int,
    log_step: StepLogger,
    description: str,
) -> Training:
    """One pass of optimizer steps over `batches`; losses and speeds count every process."""
    model.train()
    processes = batches.processes
    epoch_loss = batches.placement.tensor(torch.zeros(()))
    interval_loss = batches.placement.tensor(torch.zeros(()))
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
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()

        batch_loss = loss.detach() * len(labels)
        epoch_loss += batch_loss
        interval_loss += batch_loss
        if step % log_interval == 0 or step == len(batches):
            images_seen = sum(batches.sizes[interval_first:step])
            mean_loss = processes.sum(interval_loss).item() / images_seen  # waits for the device
            now = time.perf_counter()
            speed = images_seen / (now - interval_started)
            progress.set_postfix(loss=f"{mean_loss:.3f}", img_per_s=f"{speed:,.0f}")
            log_step(step, mean_loss, speed)
            interval_loss.zero_()
            interval_first, interval_started = step, now
    # The last step always logs, so the device has finished by now.
    seconds = time.perf_counter() - started
    images = batches.count_images()
    loss = processes.sum(epoch_loss).item() / images
    return Training(loss, images, seconds, batches.timer.take())


@torch.no_grad()
def evaluate(
    model: nn.Module, loss_fn: nn.Module, batches: Batches, num_classes: int
) -> Evaluation:
    """Loss and accuracy (overall and per class) over `batches`, counting every process."""
    model.eval()
    started = time.perf_counter()
    loss_sum = batches.placement.tensor(torch.zeros(()))
    seen = batches.placement.tensor(torch.zeros(num_classes, dtype=torch.int64))
    correct = torch.zeros_like(seen)
    for images, labels in batches:
        outputs = model(images)
        loss_sum += loss_fn(outputs, labels) * len(labels)
        per_class = nn.functional.one_hot(labels, num_classes)
        seen += per_class.sum(0)
        correct += (per_class * (outputs.argmax(1) == labels).unsqueeze(1)).sum(0)
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
