"""The training loop and evaluation, as the run's task scores a batch. Losses and tallies add up on
the device and come to the host only at log intervals and at a pass's end, never per step."""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor, nn
from torch.amp import GradScaler
from torch.optim.lr_scheduler import LRScheduler
from tqdm import tqdm

from experiments.core import interrupts
from experiments.core.errors import ExperimentError
from experiments.core.text import IMAGES, Unit
from experiments.data.batches import Batches
from experiments.devices.distributed import summed
from experiments.devices.process_group import ProcessGroup
from experiments.devices.runtime import Runtime
from experiments.devices.timing import DeviceTimer, wait_for
from experiments.devices.wrapping import without_gradient_sync
from experiments.training.ema import ModelAverage
from experiments.training.tasks import Task

# tqdm's default lock takes a multiprocessing semaphore, which a killed sweep worker never hands
# back and Python's resource tracker then warns of; a thread lock will do for one process.
tqdm.set_lock(threading.RLock())

# Called every log interval: (step within the epoch, mean loss since the last call, images/s, lr).
StepLogger = Callable[[int, float, float, float], None]


@dataclass
class TrainingResult:
    """One epoch of training, and where its time went."""

    loss: float  # mean over the epoch's images
    images: int
    seconds: float
    wait_seconds: float  # the loop waiting for batches (host clock)
    copy_seconds: float  # to the device: on a GPU by CUDA events, overlapping wait_seconds
    compute_seconds: float  # forward, backward and optimizer step (on the device)
    lr: float  # of the epoch's last step
    warm_up: list[tuple[int, float]] = field(default_factory=list)  # (images, seconds) at each end
    last_step: tuple[int, float] | None = None  # timed apart where it compiled a new shape

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds


@dataclass
class EvaluationResult:
    loss: float  # mean over the images
    metrics: dict[str, float]  # the task's, by name: {"accuracy": 0.386}
    seconds: float
    # Of a task that tells classes apart: inputs of true class i predicted as class j.
    confusion: list[list[int]] | None = None
    class_accuracy: list[float | None] | None = None


@dataclass
class Learner:
    """What the training step updates, and how (`step_scheduler` None: stepped per epoch)."""

    model: nn.Module
    task: Task
    optimizer: torch.optim.Optimizer
    step_scheduler: LRScheduler | None = None
    gradient_clip: float | None = None
    stop_on_divergence: bool = True  # raise once the training loss is not finite
    accumulate_batches: int = 1  # batches whose gradients add up to one optimizer step
    # trainer.compile_mode=reduce-overhead: each optimizer step begins a new step of CUDA graphs,
    # or the next replay would overwrite what this one still needs.
    cuda_graphs: bool = False
    ema: ModelAverage | None = None  # trainer.ema's moving average of the weights


def train_epoch(
    learner: Learner,
    batches: Batches,
    runtime: Runtime,
    *,
    log_interval: int,
    log_step: StepLogger,
    description: str,
    after_step: Callable[[int], object] | None = None,
    warm_up_steps: int = 0,
    unit: Unit = IMAGES,
    last_step_apart: bool = False,
) -> TrainingResult:
    """One pass of optimizer steps over `batches`; its first `warm_up_steps`, and with
    `last_step_apart` a smaller last step (compiled anew), are timed apart."""
    optimizer, scaler, accumulate = learner.optimizer, runtime.scaler, learner.accumulate_batches
    learner.model.train()
    compute_timer = DeviceTimer(runtime.device)
    epoch_loss = 0.0
    times = _StepTimes(batches, accumulate, warm_up_steps, last_step_apart, runtime.device)
    hidden = None if runtime.group.is_main else True  # (tqdm's None: hidden off a terminal)
    progress = tqdm(batches, desc=description, unit="batch", leave=False, disable=hidden)
    interval = _LogInterval(batches, runtime, learner, progress, log_step, description, unit)
    for index, (inputs, targets) in enumerate(progress):
        step = index // accumulate + 1  # the optimizer step this batch is part of
        last_of_step = index % accumulate == accumulate - 1 or index == len(batches) - 1
        span = compute_timer.start()
        if index % accumulate == 0:
            times.step_begins(index)
            if learner.cuda_graphs:  # (once a step: its batches add up their gradients)
                torch.compiler.cudagraph_mark_step_begin()
            lr = optimizer.param_groups[0]["lr"]
            optimizer.zero_grad(set_to_none=True)
            step_images = sum(batches.sizes[index : index + accumulate])
        loss = _backward(learner, runtime, inputs, targets, step_images, sync=last_of_step)
        interval.add(loss.detach(), len(targets))
        if not last_of_step:
            compute_timer.stop(span)
            continue
        _optimizer_step(learner, scaler, first=step == 1)
        compute_timer.stop(span)
        if after_step is not None:
            after_step(step)  # the callbacks'
        times.step_ended(step, index)
        if step % log_interval == 0 or index == len(batches) - 1:
            epoch_loss += interval.end(index, step, lr)
    # The last step always logs, so the device has finished by now.
    compute, ended = compute_timer.take(), time.perf_counter()
    images = batches.count_images()
    waited, copying = batches.times()
    seconds, warm_up, last_step = ended - times.started, times.warm_up, times.last_step(ended)
    return TrainingResult(
        epoch_loss / images, images, seconds, waited, copying, compute, lr, warm_up, last_step
    )


class _StepTimes:
    """The steps of an epoch timed apart, the device waited for around each."""

    def __init__(
        self,
        batches: Batches,
        accumulate: int,
        warm_up_steps: int,
        last_apart: bool,
        device: torch.device,
    ) -> None:
        self.sizes, self.warm_up_steps, self.device = batches.sizes, warm_up_steps, device
        last_begins = (len(batches) - 1) // accumulate * accumulate  # its first batch
        new_shape = batches.sizes[-1] != batches.sizes[0]
        warming = last_begins // accumulate + 1 <= warm_up_steps
        self.last_begins = last_begins if last_apart and new_shape and not warming else None
        self.warm_up: list[tuple[int, float]] = []
        self.last_started: float | None = None
        self.started = time.perf_counter()

    def step_begins(self, index: int) -> None:
        if index == self.last_begins:
            wait_for(self.device)  # the steps before it end here
            self.last_started = time.perf_counter()

    def step_ended(self, step: int, index: int) -> None:
        if step <= self.warm_up_steps:
            wait_for(self.device)  # its time is the step's, not the next one's
            self.warm_up.append((sum(self.sizes[: index + 1]), time.perf_counter() - self.started))

    def last_step(self, ended: float) -> tuple[int, float] | None:
        if self.last_begins is None or self.last_started is None:
            return None
        return sum(self.sizes[self.last_begins :]), ended - self.last_started


def trial_step(
    learner: Learner, runtime: Runtime, scaler: GradScaler, inputs: Tensor, targets: Tensor
) -> None:
    """One optimizer step on one batch as training takes it (`training.batch_search`'s try)."""
    learner.model.train()
    learner.optimizer.zero_grad(set_to_none=True)
    _backward(learner, replace(runtime, scaler=scaler), inputs, targets, len(targets), sync=True)
    _optimizer_step(learner, scaler, first=True)
    runtime.backend.wait(runtime.device)  # an out-of-memory error is raised here, if late


def _backward(
    learner: Learner,
    runtime: Runtime,
    inputs: Tensor,
    targets: Tensor,
    step_images: int,
    *,
    sync: bool,
) -> Tensor:
    """A batch's mean loss, its gradient added up; DDP averages the gradients only with `sync`."""
    model, group = learner.model, runtime.group
    with nullcontext() if sync else without_gradient_sync(model):
        with runtime.autocast():
            loss = learner.task(model(inputs), targets)
        runtime.scaler.scale(_weighted(loss, len(targets), step_images, group)).backward()
    return loss


def _optimizer_step(learner: Learner, scaler: GradScaler, *, first: bool) -> None:
    optimizer = learner.optimizer
    if learner.gradient_clip is not None:
        scaler.unscale_(optimizer)  # fp16: clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(learner.model.parameters(), learner.gradient_clip)
    scaler.step(optimizer)  # skips a step whose fp16 gradients overflowed
    scaler.update()
    if learner.step_scheduler is not None:
        with _schedule_may_step_first() if first else nullcontext():
            learner.step_scheduler.step()
    if learner.ema is not None:
        learner.ema.step()


@contextmanager
def _schedule_may_step_first() -> Iterator[None]:
    """Silence torch's warning that the schedule stepped before the optimizer, whose first step
    fp16's scaler often skips; only there, as changing the filters makes other warnings repeat."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r"Detected call of `lr_scheduler\.step\(\)` before `optimizer"
        )
        yield


BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def fewest_images(model: nn.Module, processes: int) -> int:
    """The fewest images a batch of all `processes` may have: 2 each for unsynced BatchNorm."""
    norms = [module for module in model.modules() if isinstance(module, BATCH_NORMS)]
    pooled = processes > 1 and all(isinstance(norm, nn.SyncBatchNorm) for norm in norms)
    return processes if not norms or pooled else 2 * processes


def fewest_images_per_batch(model: nn.Module, batch_size: int, processes: int) -> int:
    """`fewest_images`, refusing a smaller trainer.batch_size (a smaller last batch is left out)."""
    fewest = fewest_images(model, processes)
    if batch_size < fewest:  # (trainer.batch_size is a multiple of the processes: validate)
        given = "is a batch of 1 image"
        if processes > 1:
            given = f"gives each of the {processes} processes 1 image"
        raise ExperimentError(
            f"trainer.batch_size={batch_size} {given}, on which the model's BatchNorm layers "
            f"cannot train; use trainer.batch_size={fewest} or more"
        )
    return fewest


def refuse_a_split_too_small(
    batch_size: int | str, images: int, fewest: int, processes: int, unit: Unit = IMAGES
) -> None:
    """Refuse a training split smaller than a batch may be, rather than train no steps."""
    if images >= fewest:
        return
    held = f"the training split holds {images} {unit.one if images == 1 else unit.many}"
    if fewest == processes:  # (no BatchNorm layers, or synchronized ones)
        why = f"too few to give each of the {processes} processes one"
    elif processes == 1:
        why = f"on which the model's BatchNorm layers cannot train (a batch needs 2 {unit.many})"
    else:
        why = (
            f"too few to give each of the {processes} processes the 2 {unit.many} the model's "
            "BatchNorm layers need to train"
        )
    raise ExperimentError(
        f"trainer.batch_size={batch_size}: {held}, {why}; give it {fewest} {unit.many} or more "
        "(fewer held out by dataset.val_fraction), or train a model without BatchNorm layers"
    )


def left_out_note(batches: Batches, processes: int) -> str | None:
    """The log's line on a last batch left out of every epoch for BatchNorm's sake, if any."""
    if batches.left_out < processes:
        return None
    if processes == 1:
        return (
            "the last batch, of 1 image, is left out of every epoch: the model's BatchNorm "
            "layers cannot train on 1 image"
        )
    return (
        f"the last batch, of {batches.left_out} images, is left out of every epoch: a process's "
        "share of it would be 1 image, on which the model's BatchNorm layers cannot train "
        "(trainer.sync_batchnorm=true pools the processes' images)"
    )


@dataclass
class _LogInterval:
    """The batches since the last logged step, their losses on the device until it ends."""

    batches: Batches
    runtime: Runtime
    learner: Learner
    progress: tqdm
    log_step: StepLogger
    description: str
    unit: Unit

    def __post_init__(self) -> None:
        self.loss = torch.zeros((), device=self.runtime.device)
        # Each batch's, read only once the total is not finite, so no step waits for them.
        self.losses: list[Tensor] = []
        self.first = 0  # batch
        self.started = time.perf_counter()

    def add(self, loss: Tensor, images: int) -> None:
        self.loss.add_(loss, alpha=images)
        if self.learner.stop_on_divergence:
            self.losses.append(loss)

    def end(self, index: int, step: int, lr: float) -> float:
        """Log and check the interval up to batch `index`; return its loss summed over processes."""
        interrupts.raise_if_lost()
        images = sum(self.batches.sizes[self.first : index + 1])
        total = summed(self.loss, self.runtime.group).item()  # waits for the device
        mean_loss, now = total / images, time.perf_counter()
        speed = images / (now - self.started)
        self.progress.set_postfix({"loss": f"{mean_loss:.3f}", self.unit.rate: f"{speed:,.0f}"})
        self.log_step(step, mean_loss, speed, lr)
        if self.learner.stop_on_divergence and not math.isfinite(mean_loss):
            finite = torch.isfinite(torch.stack(self.losses)).tolist()
            # All finite here: another process's loss was not (under DDP).
            batch = self.first + finite.index(False) if False in finite else index
            raise ExperimentError(
                f"diverged: train loss {mean_loss} at {self.description}, step "
                f"{batch // self.learner.accumulate_batches + 1}; lower optimizer.lr or set "
                "trainer.gradient_clip"
            )
        self.loss.zero_()
        self.losses.clear()
        self.first, self.started = index + 1, now
        return total


def _weighted(loss: Tensor, images: int, step_images: int, group: ProcessGroup) -> Tensor:
    """The loss weighted so that the gradients summed over a step's uneven batches and processes
    are those of its mean (times world_size, which DDP divides by)."""
    weight = images * group.world_size / step_images
    return loss if weight == 1 else loss * weight


@torch.no_grad()
def evaluate(
    model: nn.Module, batches: Batches, runtime: Runtime, task: Task, cuda_graphs: bool = False
) -> EvaluationResult:
    """The task's evaluation loss and metrics over `batches`, counting every process."""
    model.eval()
    group = runtime.group
    started = time.perf_counter()
    loss_sum = torch.zeros((), device=runtime.device)
    tally: Tensor | None = None
    for inputs, targets in batches:
        if cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with runtime.autocast():
            outputs = model(inputs)
            loss_sum += task.evaluation_loss(outputs, targets).float() * len(targets)
        counted = task.tally(outputs, targets)
        tally = counted if tally is None else tally.add_(counted)
    batches.times()  # evaluation's waits are part of its seconds
    assert tally is not None  # (a split has a batch: `data.subset` keeps one at least)
    measured = task.measure(summed(tally, group).cpu())
    return EvaluationResult(
        loss=summed(loss_sum, group).item() / batches.count_images(),
        metrics=measured.metrics,
        seconds=time.perf_counter() - started,
        confusion=measured.confusion,
        class_accuracy=None if measured.confusion is None else class_accuracy(measured.confusion),
    )


def class_accuracy(confusion: list[list[int]]) -> list[float | None]:
    """The fraction right of each class's inputs (None: a class with none)."""
    return [row[label] / sum(row) if sum(row) else None for label, row in enumerate(confusion)]
