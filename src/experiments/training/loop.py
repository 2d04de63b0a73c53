"""The training loop: one epoch of optimizer steps, and evaluation on a split.

Losses and correct counts add up on the device; they come back to the host (`.item()`, `.tolist()`)
only at log intervals and at the end of a pass, so the loop never waits for the device per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.optim.lr_scheduler import LRScheduler
from tqdm import tqdm

from experiments.data.batches import Batches
from experiments.devices.distributed import summed
from experiments.devices.process_group import ProcessGroup
from experiments.devices.timing import DeviceTimer

# Called every log interval with (step within the epoch, mean loss since the last call, images/s,
# the step's learning rate).
StepLogger = Callable[[int, float, float, float], None]


@dataclass
class TrainingResult:
    """One epoch of training, and where its time went."""

    loss: float  # mean over the epoch's images
    images: int
    seconds: float
    wait_seconds: float  # the loop waiting for batches (host clock)
    copy_seconds: float  # of which, copying them to the device
    compute_seconds: float  # forward, backward and optimizer step (on the device)
    lr: float  # of the epoch's last step

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds


@dataclass
class EvaluationResult:
    loss: float  # mean over the images
    accuracy: float  # fraction correct
    class_accuracy: list[float | None]  # per class; None for a class with no images
    confusion: list[list[int]]  # images of true class i predicted as class j
    seconds: float


def train_epoch(
    *,
    model: nn.Module,
    loss_fn: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    autocast_dtype: torch.dtype | None,
    batches: Batches,
    device: torch.device,
    group: ProcessGroup,
    log_interval: int,
    log_step: StepLogger,
    description: str,
    gradient_clip: float | None = None,
    scheduler: LRScheduler | None = None,
) -> TrainingResult:
    """One pass of optimizer steps over `batches`; losses and speeds count every process.

    `autocast_dtype` (None: fp32) is what the forward pass and the loss run in; `scaler` scales
    the loss for fp16 and passes it through otherwise. `gradient_clip` bounds the gradients'
    total norm; `scheduler`, if given, is stepped after every optimizer step."""
    model.train()
    compute = DeviceTimer(device)
    interval_loss = torch.zeros((), device=device)  # summed over the images
    epoch_loss = 0.0
    interval_first = 0
    started = interval_started = time.perf_counter()
    progress = tqdm(
        batches,
        desc=description,
        unit="batch",
        leave=False,
        disable=None if group.is_main else True,
    )
    for step, (images, labels) in enumerate(progress, start=1):
        span = compute.start()
        lr = optimizer.param_groups[0]["lr"]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = loss_fn(model(images), labels)
        scaler.scale(loss).backward()
        if gradient_clip is not None:
            scaler.unscale_(optimizer)  # fp16: clip the true gradients, not the scaled ones
            nn.utils.clip_grad_norm_(model.parameters(), gradient_clip)
        scaler.step(optimizer)
        scaler.update()
        if scheduler is not None:
            scheduler.step()
        compute.stop(span)

        interval_loss.add_(loss.detach(), alpha=len(labels))
        if step % log_interval == 0 or step == len(batches):
            images_seen = sum(batches.sizes[interval_first:step])
            interval_total = summed(interval_loss, group).item()  # waits for the device
            epoch_loss += interval_total
            mean_loss = interval_total / images_seen
            now = time.perf_counter()
            speed = images_seen / (now - interval_started)
            progress.set_postfix(loss=f"{mean_loss:.3f}", img_per_s=f"{speed:,.0f}")
            log_step(step, mean_loss, speed, lr)
            interval_loss.zero_()
            interval_first, interval_started = step, now
    # The last step always logs, so the device has finished by now.
    seconds = time.perf_counter() - started
    images = batches.count_images()
    waited, copying = batches.times()
    return TrainingResult(epoch_loss / images, images, seconds, waited, copying, compute.take(), lr)


@torch.no_grad()
def evaluate(
    *,
    model: nn.Module,
    loss_fn: nn.Module,
    autocast_dtype: torch.dtype | None,
    batches: Batches,
    device: torch.device,
    group: ProcessGroup,
    num_classes: int,
) -> EvaluationResult:
    """Loss, accuracy (overall and per class) and confusion matrix over `batches`, counting
    every process."""
    model.eval()
    started = time.perf_counter()
    loss_sum = torch.zeros((), device=device)
    counts = torch.zeros(num_classes, num_classes, dtype=torch.int64, device=device)
    for images, labels in batches:
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            outputs = model(images)
            loss_sum += loss_fn(outputs, labels).float() * len(labels)
        counts += confusion_counts(labels, outputs.argmax(1), num_classes)
    batches.times()  # evaluation's waits are part of its seconds
    matrix = summed(counts, group).tolist()
    seen = [sum(row) for row in matrix]
    correct = [row[label] for label, row in enumerate(matrix)]
    images = sum(seen)
    return EvaluationResult(
        loss=summed(loss_sum, group).item() / images,
        accuracy=sum(correct) / images,
        class_accuracy=[c / n if n else None for c, n in zip(correct, seen, strict=True)],
        confusion=matrix,
        seconds=time.perf_counter() - started,
    )


def confusion_counts(
    labels: torch.Tensor, predictions: torch.Tensor, num_classes: int
) -> torch.Tensor:
    """(num_classes, num_classes) int64 counts: row = true class, column = predicted class.

    One bincount over `label * K + prediction`, on whatever device the tensors are on (no copy
    to the host per batch; deterministic on CUDA too, since no weights are given)."""
    pairs = labels.reshape(-1).long() * num_classes + predictions.reshape(-1).long()
    counts = torch.bincount(pairs, minlength=num_classes * num_classes)
    return counts.reshape(num_classes, num_classes)
